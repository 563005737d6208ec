"""The short way through the stack for an ordinary ingest request.

A gateway's hook request is what SessionHub answers hundreds of times a second, and
storing its event is the smaller part of its cost: in process, Django's middleware chain
and URL resolving and DRF's request wrapping, content negotiation, permission and
throttle plumbing and response finalizing took more CPU than the ingest service itself
(docs/benchmarks.md). This middleware sits right after the security, content-security
and static-file middleware and answers a ``POST`` to an ingest endpoint itself, calling
the same authentication, scope check, rate limit, parser and view code, when everything
about the request is ordinary:

* a JSON body of a known length, within the body limit and Django's in-memory limit, not
  compressed, with no query string and an ``Accept`` that only JSON can satisfy;
* a valid, active token with the endpoint's scope, under its rate limit;
* a body the strict parser takes and a batch within its limits.

Anything else goes on down the ordinary stack as if this middleware were not there, so
every refusal keeps the one answer (status, body and headers) the DRF view gives it:
nothing is stored before the last of those checks, and the body read here stays readable
(Django keeps it). The one thing a refused request has already done is count once
against its token's rate limit; the ordinary path counts it again, which can only matter
to a token that is already past its limit.

The answer carries what the skipped middleware and DRF would add (``Allow``, ``Vary``,
``X-Frame-Options``, ``Content-Length``); ``tests/lifecycle/test_fast_path.py`` holds the
two ways to the same statuses, bodies and headers. ``SESSIONHUB_INGEST_FAST_PATH=0``
turns it off.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import get_script_prefix, reverse
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from sessionhub.errors import api_exception_handler
from sessionhub.exceptions import ApiError
from sessionhub.models import ApiToken

from . import apis

_ENDPOINTS = {
    "api:events-ingest": apis.EventsIngestApi,
    "api:hooks-claude-code": apis.ClaudeCodeHookApi,
    "api:hooks-openclaw": apis.OpenClawHookApi,
    "api:hooks-codex": apis.CodexHookApi,
    "api:hooks-gemini-cli": apis.GeminiCliHookApi,
}
_JSON = "application/json"
# Media ranges for which DRF's negotiation picks the JSON renderer.
_JSON_RANGES = frozenset({"", "*/*", "application/*", "application/json"})


class _Endpoint:
    """One ingest view as the short way uses it: an instance for its scope, permission
    and throttle settings, its batch rules and its answer."""

    def __init__(self, view_class: type[apis._IngestView]) -> None:
        self.view = view_class()
        self.parser = next(p for p in self.view.get_parsers() if p.media_type == _JSON)
        self.headers = dict(self.view.default_response_headers)
        self.renderer = JSONRenderer()


def _media_type(value: str) -> str:
    """``application/json; charset=utf-8`` → ``application/json``."""
    return value.split(";", 1)[0].strip().lower()


def _accepts_only_json(accept: str) -> bool:
    """Whether DRF would answer in plain JSON: a parameter other than the weight (say
    ``indent=4``, which its JSON renderer honours) takes the ordinary way."""
    for part in accept.split(","):
        media_type, *parameters = part.split(";")
        if media_type.strip().lower() not in _JSON_RANGES:
            return False
        if any(not p.strip().lower().startswith("q=") for p in parameters):
            return False
    return True


class IngestFastPathMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self._endpoints: dict[str, _Endpoint] | None = None

    def endpoints(self) -> dict[str, _Endpoint]:
        # Built at the first request (the URLconf is not loaded yet at __init__), keyed
        # as URL resolving sees a request: by its path within the script prefix.
        if self._endpoints is None:
            prefix = len(get_script_prefix())
            self._endpoints = {
                "/" + reverse(name)[prefix:]: _Endpoint(view) for name, view in _ENDPOINTS.items()
            }
        return self._endpoints

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and settings.SESSIONHUB["INGEST_FAST_PATH"]:
            endpoint = self.endpoints().get(request.path_info)
            if endpoint is not None:
                response = self.answer(request, endpoint)
                if response is not None:
                    return response
        return self.get_response(request)

    def answer(self, request: HttpRequest, endpoint: _Endpoint) -> HttpResponse | None:
        """The answer to an ordinary ingest request; None hands it to the ordinary path."""
        meta = request.META
        if meta.get("QUERY_STRING") or _media_type(meta.get("CONTENT_TYPE", "")) != _JSON:
            return None
        if not _accepts_only_json(meta.get("HTTP_ACCEPT", "")):
            return None
        # The body is read into memory here (Django keeps it for the ordinary path): only
        # within the API's limit and Django's in-memory one; the parser streams the rest.
        try:
            length = int(meta.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return None
        in_memory = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if not 0 < length <= settings.SESSIONHUB["MAX_BODY_BYTES"] or (
            in_memory is not None and length > in_memory
        ):
            return None

        view = endpoint.view
        try:
            checked = self.checked(request, endpoint)
        except Exception:  # noqa: BLE001 - the ordinary path meets it again and answers it
            return None
        if checked is None:
            return None
        token, bodies = checked
        try:
            response = view.store(token, bodies)
        except Exception as exc:  # the same mapping as the view's (database outages...)
            handled = api_exception_handler(exc, {"view": view, "request": request})
            if handled is None:
                raise
            response = handled
        return self.finish(response, endpoint)

    @staticmethod
    def checked(request: HttpRequest, endpoint: _Endpoint) -> tuple[ApiToken, list[Any]] | None:
        """The caller's token and the events, if the request passes every check the view
        makes before storing, with the view's own authentication, permission, throttle
        and parser classes. Nothing here stores anything: a refusal (or an error, such as
        the database being down for the token's lookup) goes the ordinary way."""
        view = endpoint.view
        for authenticator in view.get_authenticators():
            try:
                found = authenticator.authenticate(request)  # type: ignore[arg-type]
            except exceptions.AuthenticationFailed:
                return None
            if found is not None:
                break
        else:
            return None
        # What the permission and throttle classes read of DRF's request.
        caller = cast(Request, SimpleNamespace(user=found[0], auth=found[1], META=request.META))
        if not all(p.has_permission(caller, view) for p in view.get_permissions()):
            return None
        if not all(t.allow_request(caller, view) for t in view.get_throttles()):
            return None
        try:
            data = endpoint.parser.parse(
                io.BytesIO(request.body), _JSON, {"request": request, "view": view}
            )
            return found[1], view.batch(data)
        except ApiError:
            return None

    @staticmethod
    def finish(response: Response, endpoint: _Endpoint) -> Response:
        """Render as DRF's view would, with the headers the skipped middleware add."""
        response.accepted_renderer = endpoint.renderer
        response.accepted_media_type = endpoint.renderer.media_type
        response.renderer_context = {}  # type: ignore[attr-defined]
        for name, value in endpoint.headers.items():
            response[name] = value
        response.render()
        response.headers.setdefault("X-Frame-Options", settings.X_FRAME_OPTIONS.upper())
        response.headers["Content-Length"] = str(len(response.content))
        return response
