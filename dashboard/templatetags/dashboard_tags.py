"""Small formatting helpers for the dashboard's templates."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone

from dashboard import costs

register = template.Library()


@register.filter
def duration(seconds: Any) -> str:
    """Seconds as a short human duration: ``45 s``, ``12 min``, ``3 h 05 min``, ``2 d 4 h``."""
    if seconds is None or seconds == "":
        return "—"
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    total = round(float(seconds))
    if total < 60:
        return f"{total} s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s" if minutes < 10 and secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


@register.filter
def score(value: Any) -> str:
    """A score or a score part with two decimals."""
    try:
        return f"{float(value):.2f}"
    except (TypeError, ValueError):
        return "—"


@register.filter
def percent(value: Any) -> str:
    """A 0 to 1 score as a width percentage (of the score bar)."""
    try:
        return f"{max(0.0, min(1.0, float(value))) * 100:.0f}%"
    except (TypeError, ValueError):
        return "0%"


@register.filter
def since(value: datetime | None) -> str:
    """How long ago, in one short unit."""
    if value is None:
        return "—"
    return duration((timezone.now() - value).total_seconds()) + " ago"


@register.filter
def short_id(value: Any) -> str:
    """The first block of a UUID or the first characters of an external id."""
    text = str(value)
    return text.split("-", 1)[0] if len(text) == 36 else text[:12]


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    """``mapping[key]`` in a template, or None."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def pretty_json(value: Any) -> str:
    """A JSON value indented for reading (escaped by the template as usual)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def mcp_arguments(value: Any) -> str:
    """A tool call's arguments on one line (escaped by the template as usual)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)[:300]


@register.filter
def intcomma_plain(value: Any) -> str:
    """An integer with thousands separators (1,234,567); anything else as it is."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def session_cost(session: Any) -> float | None:
    """A session's estimated cost in USD (its model's prices), None when unpriced."""
    return costs.cost(
        session.model or "",
        input=session.input_tokens,
        output=session.output_tokens,
        cache_read=session.cache_read_tokens,
        cache_write=session.cache_write_tokens,
    )
