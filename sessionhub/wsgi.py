"""WSGI entry point (python -m sessionhub.serve runs it in production)."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterable
from typing import Any, cast

from django.core.handlers.exception import convert_exception_to_response, response_for_exception
from django.core.handlers.wsgi import WSGIHandler
from django.core.wsgi import get_wsgi_application
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import ResolverMatch, get_resolver
from django.utils.deprecation import MiddlewareMixin

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
    instead of the whole list the dashboard and the admin need, run with less of the
    work that is the same for every request (together about 5% of an ingest request's
    instructions, docs/benchmarks.md):

    * **The chain runs flat.** Django nests the middleware, each layer a call through
      its exception wrapper and ``MiddlewareMixin.__call__``. Where every layer is a
      plain ``MiddlewareMixin`` (its hooks only, no ``__call__`` of its own), this
      handler calls the same hooks from one loop instead, with the same rules: the
      requests' hooks outside in, the first that answers (or raises) turning the
      request back, the responses' hooks inside out from there, an exception turned
      into its response where the layer that raised it would have turned it.
    * **A fixed route is resolved once.** The URL a view answers at with no part of
      it captured (every ingest URL) maps to the same match for every request; it is
      kept per resolver and path, so only such URLs are kept, however many others
      are asked for.
    """

    flatten = True

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
        django: Any = self  # the handler's internals, which the stubs do not describe
        self._routes: dict[tuple[Any, str], ResolverMatch] = {}
        # A middleware's process_view gets a match's arguments, and could change them
        # for every later request of the route: then nothing is kept.
        self._keep_routes = not django._view_middleware
        self._built_chain = django._middleware_chain  # as Django nests it
        layers = _plain_layers(self._built_chain)
        if self.flatten and not is_async and layers is not None:
            self._request_hooks = [getattr(m, "process_request", None) for m in layers]
            self._response_hooks = [getattr(m, "process_response", None) for m in layers]
            self._view_layer = convert_exception_to_response(django._get_response)
            self._middleware_chain = self._flat_chain

    def _flat_chain(self, request: HttpRequest) -> HttpResponseBase:
        """What the nested chain answers, from one loop over the same hooks."""
        response: Any = None
        back_from = len(self._request_hooks)  # the layers whose response hook runs
        for index, process_request in enumerate(self._request_hooks):
            if process_request is None:
                continue
            try:
                response = process_request(request)
            except Exception as exc:  # noqa: BLE001 - as the layer's wrapper turns it
                response = response_for_exception(request, exc)
                back_from = index  # the layer that raised skips its own response hook
                break
            if response:
                back_from = index + 1
                break
        else:
            response = self._view_layer(request)
        for index in range(back_from - 1, -1, -1):
            process_response = self._response_hooks[index]
            if process_response is None:
                continue
            try:
                response = process_response(request, response)
            except Exception as exc:  # noqa: BLE001 - as the layer's wrapper turns it
                response = response_for_exception(request, exc)
        return cast(HttpResponseBase, response)

    def resolve_request(self, request: HttpRequest) -> ResolverMatch:
        if hasattr(request, "urlconf"):  # a middleware chose another URLconf
            return super().resolve_request(request)
        key = (get_resolver(), request.path_info)
        match = self._routes.get(key)
        if match is None:
            match = super().resolve_request(request)
            # A fixed route only: bounded by the URLconf.
            fixed = not match.args and not match.kwargs and "/" + match.route == key[1]
            if fixed and self._keep_routes:
                self._routes[key] = match
            return match
        request.resolver_match = match
        return match


def _plain_layers(chain: Any) -> list[MiddlewareMixin] | None:
    """The middleware of a built chain, outermost first, when every layer is a plain
    synchronous ``MiddlewareMixin`` (else None: the chain runs nested, as built)."""
    layers: list[MiddlewareMixin] = []
    layer = getattr(chain, "__wrapped__", chain)  # Django's exception wrapper
    while hasattr(layer, "get_response"):
        if (
            not isinstance(layer, MiddlewareMixin)
            or type(layer).__call__ is not MiddlewareMixin.__call__
            or layer.async_mode
        ):
            return None
        layers.append(layer)
        layer = getattr(layer.get_response, "__wrapped__", layer.get_response)
    return layers


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
