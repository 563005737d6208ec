"""A JSON parser that refuses what PostgreSQL or the rest of the stack would choke on.

Checked before anything is stored: no Content-Encoding (415), the size limit (413),
strict UTF-8, JSON syntax, nesting depth, and strings that cannot be stored (NUL bytes,
lone surrogates). Numbers are left to the field validators.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
from django.conf import settings
from rest_framework.parsers import BaseParser

from .exceptions import PayloadTooLarge, UnsupportedEncoding, ValidationFailed

MAX_DEPTH = 64
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def check_json_value(value: Any, path: str = "$", depth: int = 0) -> None:
    """Raise ValidationFailed for values no row may hold; walks iteratively deep enough."""
    stack: list[tuple[Any, str, int]] = [(value, path, depth)]
    while stack:
        item, where, level = stack.pop()
        if level > MAX_DEPTH:
            raise ValidationFailed(
                f"JSON nested deeper than {MAX_DEPTH} levels", code="too_deep", extra={"at": where}
            )
        if isinstance(item, str):
            _check_string(item, where)
        elif isinstance(item, dict):
            for key, sub in item.items():
                _check_string(key, f"{where}.<key>")
                stack.append((sub, f"{where}.{key}", level + 1))
        elif isinstance(item, list):
            for index, sub in enumerate(item):
                stack.append((sub, f"{where}[{index}]", level + 1))
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int) and not INT64_MIN <= item <= INT64_MAX:
            raise ValidationFailed(
                "Integers must fit in 64 bits", code="number_out_of_range", extra={"at": where}
            )
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValidationFailed(
                "Number out of range", code="number_out_of_range", extra={"at": where}
            )


def _check_string(text: str, where: str) -> None:
    if "\x00" in text:
        raise ValidationFailed(
            "Strings may not contain NUL characters", code="nul_character", extra={"at": where}
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationFailed(
            "Strings may not contain lone surrogates", code="invalid_unicode", extra={"at": where}
        ) from exc


def _is_clean(value: Any, *, floats: bool, unicode_checked: bool) -> bool:
    """Whether ``check_json_value`` would accept ``value``, found without building a path
    for every item. False means "look closer", never "invalid": the caller then runs the
    full check, which names the offending value. Anything but the plain JSON types gets
    a closer look too. ``floats``: whether floats may pass; ``unicode_checked``: the
    parser already refused lone surrogates, so strings need only the NUL test."""
    if type(value) not in (dict, list):
        return _scalar_clean(value, floats=floats, unicode_checked=unicode_checked)
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        container, level = stack.pop()
        if level >= MAX_DEPTH and container:
            return False  # its items lie deeper than MAX_DEPTH
        if type(container) is dict:
            for key in container:
                if "\x00" in key or (not unicode_checked and not _utf8_ok(key)):
                    return False
            items = container.values()
        else:
            items = container
        for item in items:
            kind = type(item)
            if kind is str:
                if "\x00" in item or (not unicode_checked and not _utf8_ok(item)):
                    return False
            elif kind is dict or kind is list:
                stack.append((item, level + 1))
            elif not _scalar_clean(item, floats=floats, unicode_checked=unicode_checked):
                return False
    return True


def _scalar_clean(value: Any, *, floats: bool, unicode_checked: bool) -> bool:
    kind = type(value)
    if kind is str:
        return "\x00" not in value and (unicode_checked or _utf8_ok(value))
    if kind is int:
        return bool(INT64_MIN <= value <= INT64_MAX)
    if kind is float:
        return floats and math.isfinite(value)
    return value is None or kind is bool


def _utf8_ok(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_json_bytes(data: bytes) -> Any:
    """Decode strict UTF-8 JSON, then check every value.

    orjson parses first. Its result is taken only when it holds no float at all: orjson
    turns integers too large for 64 bits into floats, which would hide them from the
    64-bit check. Anything else it cannot vouch for (a float, a syntax error, a lone
    surrogate, too deep, a NUL...) goes the standard library's way below, which gives
    the same value or the same error as before orjson was used.
    """
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    else:
        if _is_clean(value, floats=False, unicode_checked=True):
            return value
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationFailed("Body is not valid UTF-8", code="invalid_encoding") from exc
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError as exc:
        raise ValidationFailed(
            f"JSON nested deeper than {MAX_DEPTH} levels", code="too_deep"
        ) from exc
    except ValueError as exc:
        raise ValidationFailed(f"Malformed JSON: {exc}", code="malformed_json") from exc
    if not _is_clean(value, floats=True, unicode_checked=False):
        check_json_value(value)
    return value


class StrictJSONParser(BaseParser):
    """application/json with SessionHub's size and content rules."""

    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.SESSIONHUB["MAX_BODY_BYTES"]
        request = (parser_context or {}).get("request")
        if request is not None:
            # Nothing here decodes a compressed body: taking one as plain JSON would store
            # garbage or refuse it for the wrong reason.
            encoding = request.META.get("HTTP_CONTENT_ENCODING")
            if encoding and encoding.strip().lower() != "identity":
                raise UnsupportedEncoding(
                    "Content-Encoding is not supported; send the body uncompressed",
                    extra={"content_encoding": encoding[:100]},
                )
            try:
                declared = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                declared = 0
            if declared > limit:
                raise PayloadTooLarge(f"Request body is larger than {limit} bytes")
        if stream is None:
            raise ValidationFailed("Request body is empty", code="empty_body")
        data = stream.read(limit + 1)
        if len(data) > limit:
            raise PayloadTooLarge(f"Request body is larger than {limit} bytes")
        if not data.strip():
            raise ValidationFailed("Request body is empty", code="empty_body")
        return parse_json_bytes(data)
