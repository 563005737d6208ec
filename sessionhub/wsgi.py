"""WSGI entry point (python -m sessionhub.serve runs it in production)."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from django.core.handlers.wsgi import WSGIHandler
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessionhub.settings")


def buffer_chunked_bodies(
    app: Callable[..., Iterable[bytes]], limit: int, too_large: bytes
) -> Callable[..., Any]:
    """Give Django a length for a chunked request body.

    Django reads no body without ``Content-Length``, so a client that streams its JSON
    (``Transfer-Encoding: chunked``) would otherwise be answered as if it had sent
    nothing. The server has already decoded the chunks; read them here up to the body
    limit, answer 413 past it, and hand Django the bytes with their length.
    """

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if chunked and not environ.get("CONTENT_LENGTH"):
            body = environ["wsgi.input"].read(limit + 1)
            if len(body) > limit:
                start_response(
                    "413 Request Entity Too Large",
                    [
                        ("Content-Type", "application/json"),
                        ("Content-Length", str(len(too_large))),
                    ],
                )
                return [too_large]
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return app(environ, start_response)

    return application


class ApiHandler(WSGIHandler):
    """Django's WSGI handler with the API's middleware (``settings.API_MIDDLEWARE``)
    instead of the whole list the dashboard and the admin need."""

    def load_middleware(self, is_async: bool = False) -> None:
        from django.conf import settings

        # Django builds the chain from settings.MIDDLEWARE: show it the API's list while
        # it does (once, at start-up, before any request).
        everything = settings.MIDDLEWARE
        settings.MIDDLEWARE = settings.API_MIDDLEWARE
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = everything


def by_path(api: Callable[..., Any], other: Callable[..., Any], prefix: str) -> Callable[..., Any]:
    """Requests under ``prefix`` to ``api``, the rest to ``other`` (both Django handlers
    of the same project: the same URLs, views and signals)."""

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        handler = api if environ.get("PATH_INFO", "").startswith(prefix) else other
        return handler(environ, start_response)

    return application


def _build() -> Callable[..., Any]:
    django_app = get_wsgi_application()
    from django.conf import settings

    from sessionhub.errors import error_body

    limit = settings.SESSIONHUB["MAX_BODY_BYTES"]
    too_large = json.dumps(
        error_body(f"Request body is larger than {limit} bytes", "payload_too_large")
    ).encode()
    routed = by_path(ApiHandler(), django_app, settings.API_PATH_PREFIX)
    return buffer_chunked_bodies(routed, limit, too_large)


application = _build()
