"""Errors services raise: each carries a stable code and an HTTP status.

Kept free of DRF imports so any layer (parsers included) can raise them; the API's
exception handler in ``sessionhub.errors`` turns them into responses.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error with a stable code, an HTTP status and optional details."""

    status_code = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, extra: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.extra = extra or {}


class ValidationFailed(ApiError):
    code = "invalid"


class NotFound(ApiError):
    status_code = 404
    code = "not_found"


class Conflict(ApiError):
    status_code = 409
    code = "conflict"


class PayloadTooLarge(ApiError):
    status_code = 413
    code = "payload_too_large"


class UnsupportedEncoding(ApiError):
    status_code = 415
    code = "unsupported_encoding"


class ServiceUnavailable(ApiError):
    status_code = 503
    code = "service_unavailable"
