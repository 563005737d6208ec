"""One error shape for the whole API: ``{"message": ..., "code": ..., "extra": {...}}``.

Services raise :class:`ApiError` subclasses that carry a stable machine-readable code
and an HTTP status; DRF's own exceptions and database outages are mapped here too, so no
client input can surface as a 500.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from django.conf import settings
from django.core.exceptions import (
    DisallowedHost,
    ImproperlyConfigured,
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
)
from django.db import DatabaseError, DataError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.views.defaults import bad_request as django_bad_request
from django.views.defaults import page_not_found
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from .exceptions import ApiError
from .refusals import refusal_note

logger = logging.getLogger(__name__)


class ApiErrorSerializer(serializers.Serializer[Any]):
    """The one error shape, as the OpenAPI schema publishes it (component ``ApiError``)."""

    message = serializers.CharField()
    code = serializers.CharField()
    extra = serializers.DictField()


def error_body(message: str, code: str, extra: Any = None) -> dict[str, Any]:
    return {"message": message, "code": code, "extra": extra or {}}


def _retry_after() -> str:
    return str(settings.SESSIONHUB["RETRY_AFTER_SECONDS"])


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Turn any exception raised in an API view into the one error shape."""
    if isinstance(exc, ApiError):
        headers = {"Retry-After": _retry_after()} if exc.status_code == 503 else None
        return Response(
            error_body(exc.message, exc.code, exc.extra), status=exc.status_code, headers=headers
        )
    if isinstance(exc, RequestDataTooBig):
        return Response(
            error_body("Request body is too large", "payload_too_large"),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, (DatabaseError, InterfaceError)):
        return _database_error(exc)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if response.status_code in (401, 403):
        request = context.get("request")
        if request is not None:
            refusal_note(request, response.status_code)
    response.data = _drf_error_body(exc)
    return response


def _database_error(exc: DatabaseError | InterfaceError) -> Response:
    if _cancelled_by_timeout(exc):
        # The statement ran past DB_STATEMENT_TIMEOUT (a lock held elsewhere, a slow
        # plan): rolled back, so the same request may succeed later.
        logger.warning("database statement timed out")
        return _retry_later("The database did not answer in time", "database_timeout")
    if isinstance(exc, (OperationalError, InterfaceError)):
        # The database is away (restart, failover, too many connections): the client
        # keeps its events and retries; nothing was committed.
        logger.warning("database unavailable: %s", exc.__class__.__name__)
        return _retry_later("The database is unavailable", "database_unavailable")
    if isinstance(exc, DataError):
        # SQLSTATE class 22: a value the client sent that the database cannot hold or
        # compare (a NUL in a filter, a time-zone offset past ±15:59). Retrying the same
        # request would fail the same way, so it is the client's 400, not a 503.
        logger.info("value refused by the database: %s", exc.__class__.__name__)
        return Response(
            error_body("A value in the request is out of range", "invalid_value"),
            status=status.HTTP_400_BAD_REQUEST,
        )
    logger.exception("database error")
    return _retry_later("The request could not be stored", "database_error")


def _retry_later(message: str, code: str) -> Response:
    """A 503 in the one error shape, with the ``Retry-After`` a client waits before
    sending the same request again (nothing of it was committed)."""
    return Response(
        error_body(f"{message}; retry later", code),
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": _retry_after()},
    )


def _cancelled_by_timeout(exc: DatabaseError | InterfaceError) -> bool:
    """Whether PostgreSQL cancelled the statement (SQLSTATE 57014, query_canceled, which
    psycopg raises and Django wraps): its statement_timeout, or an operator's
    ``pg_cancel_backend``; either way nothing was committed and a retry may succeed."""
    return getattr(exc.__cause__, "sqlstate", None) == "57014"


def _drf_error_body(exc: Exception) -> dict[str, Any]:
    """The one error shape for what DRF itself raised (validation, throttling, auth...)."""
    if isinstance(exc, exceptions.ValidationError):
        return error_body("Invalid input", "invalid", {"fields": exc.detail})
    if isinstance(exc, exceptions.Throttled):
        return error_body(
            "Too many requests",
            "throttled",
            {"retry_after_seconds": exc.wait and int(exc.wait)},  # type: ignore[attr-defined]
        )
    if isinstance(exc, exceptions.APIException):
        detail = exc.detail
        message = str(detail) if not isinstance(detail, (list, dict)) else "Request failed"
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        return error_body(message, str(code))
    return error_body("Request failed", "error")  # pragma: no cover - DRF answers only those


def json_error(message: str, code: str, status_code: int, **headers: str) -> JsonResponse:
    """The same error shape for plain Django views and middleware."""
    response = JsonResponse(error_body(message, code), status=status_code)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def json_response(data: Any, status_code: int = 200) -> HttpResponse:
    """A JSON answer as the API's DRF views render theirs: compact, UTF-8, U+2028 and
    U+2029 escaped, ``Content-Type: application/json``. For plain Django views whose
    answers hold strings, numbers and lists and dicts of them."""
    content = orjson.dumps(data)
    if b"\xe2\x80\xa8" in content or b"\xe2\x80\xa9" in content:
        content = content.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    return HttpResponse(content, status=status_code, content_type="application/json")


def error_response(exc: Exception, request: HttpRequest) -> HttpResponse:
    """What :func:`api_exception_handler` answers to ``exc`` (status, body, ``Retry-After``,
    ``WWW-Authenticate``), for a plain Django view; re-raises what it does not map."""
    handled = api_exception_handler(exc, {"request": request})
    if handled is None:
        raise exc
    response = json_response(handled.data, handled.status_code)
    for name, value in handled.items():
        if name.lower() != "content-type":
            response[name] = value
    return response


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler404``: a URL no route matches answers in the one error shape under /api/
    (a gateway must never have to parse an HTML page), and as Django's page elsewhere."""
    if request.path.startswith("/api/"):
        path = request.path
        if path.endswith("/") and len(path) > len("/api/"):
            # The API's paths have no trailing slash: say so rather than a bare 404.
            bare = path.rstrip("/")
            try:
                routed = resolve(bare).url_name != "api-not-found"
            except Resolver404:
                routed = False
            if routed:
                body = error_body(
                    f"No such resource; the API's paths end without a slash: {bare}",
                    "not_found",
                    {"path": bare},
                )
                return JsonResponse(body, status=status.HTTP_404_NOT_FOUND)
        return json_error("No such resource", "not_found", status.HTTP_404_NOT_FOUND)
    return page_not_found(request, exception or Http404())


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler400``: what Django refuses before any view runs (a ``Host`` outside
    ``ALLOWED_HOSTS``, too many fields) answers in the one error shape under /api/."""
    if request.path.startswith("/api/"):
        if isinstance(exception, DisallowedHost):
            return json_error("Host not allowed", "disallowed_host", status.HTTP_400_BAD_REQUEST)
        return json_error("Bad request", "bad_request", status.HTTP_400_BAD_REQUEST)
    return django_bad_request(request, exception or SuspiciousOperation())


# Statuses any API operation can answer, on top of what each view documents itself.
_ERROR_STATUSES = {
    "400": "Malformed or invalid input",
    "401": "Missing, malformed, unknown or revoked token",
    "403": "The token lacks the scope this operation needs",
    "404": "No such object in the token's team",
    "413": "Body or batch past the limit",
    "415": "Body is not application/json",
    "429": "Too many requests for this token; see Retry-After",
    "503": "The database is unavailable; see Retry-After",
}


def document_error_responses(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular post-processing hook: every operation documents the error statuses
    it can answer (all in the one error shape), so clients and contract tests see them."""
    components = result.setdefault("components", {}).setdefault("schemas", {})
    # The views name ApiErrorSerializer in their documented responses, which publishes it.
    if "ApiError" not in components:
        raise ImproperlyConfigured("no operation documents the ApiError component")
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/ApiError"}}}
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            wanted = {"503"}
            if operation.get("security"):
                wanted |= {"401", "403", "429"}
            parameters = operation.get("parameters", [])
            # A path names an object; a stale or forged pagination cursor is a 404 too.
            if any(p.get("in") == "path" or p.get("name") == "cursor" for p in parameters):
                wanted.add("404")
            if any(p.get("in") == "query" for p in parameters) or "requestBody" in operation:
                wanted.add("400")
            if method in ("post", "put", "patch"):
                wanted |= {"400", "413", "415"}
            for code in sorted(wanted):
                operation["responses"].setdefault(
                    code, {"description": _ERROR_STATUSES[code], "content": body}
                )
    return result
