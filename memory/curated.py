"""Curated memory: the pins people set for an agent (dashboard, admin, API), and which of
them a preamble quotes.

A critical pin is quoted in every preamble of its agent until it is unpinned; a normal
pin when it is relevant to the session (it shares a content word with what the session
is about: its first prompt, the keywords its gateway sent, else its topics). Each line
names who pinned it and when. Pins a session made or inherited are working memory of
that session and travel by inheritance (``memory.inheritance``), not here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.utils import timezone

from . import features as feature_lib
from .models import Pin

# What the preamble keeps of one pin's content; the label and the attribution come on top.
CONTENT_CHARS = 180
CRITICAL, RELEVANT = "critical", "relevant"


def curated_pins_of(agent_id: uuid.UUID) -> list[Pin]:
    """The agent's active pins set by people, critical first, then oldest first."""
    pins = Pin.objects.filter(
        agent_id=agent_id,
        unpinned_at__isnull=True,
        inherited_from__isnull=True,
        inherited_into__isnull=True,
    ).order_by("pinned_at", "id")
    return sorted(pins, key=lambda p: p.priority != Pin.Priority.CRITICAL)


def curated_among(pins: Iterable[Pin], agent_id: uuid.UUID) -> list[Pin]:
    """``curated_pins_of`` picked out of pins already read (the agent's active ones among
    them), in the same order."""
    found = [p for p in pins if p.agent_id == agent_id and p.unpinned_at is None and p.is_curated]
    found.sort(key=lambda p: (p.pinned_at, p.pk))
    return sorted(found, key=lambda p: p.priority != Pin.Priority.CRITICAL)


def _about(words: Iterable[str], prompt: str) -> frozenset[str]:
    return feature_lib.content_stems(" ".join([*words, prompt]))


def relevant(pin: Pin, about: frozenset[str]) -> bool:
    """Whether a normal pin shares a content word with what the session is about."""
    return bool(about) and bool(feature_lib.content_stems(f"{pin.label} {pin.content}") & about)


def pins_for_preamble(
    pins: list[Pin], *, keywords: Iterable[str], prompt: str = ""
) -> list[tuple[Pin, str]]:
    """The pins a preamble quotes and why: every critical one, the relevant normal ones."""
    about = _about(keywords, prompt)
    chosen = []
    for pin in pins:
        if pin.priority == Pin.Priority.CRITICAL:
            chosen.append((pin, CRITICAL))
        elif relevant(pin, about):
            chosen.append((pin, RELEVANT))
    return chosen


def attribution(pin: Pin) -> str:
    """ "pinned by alice on 2026-11-27" (or "pinned on ..." when nobody is named)."""
    when = timezone.localtime(pin.pinned_at).strftime("%Y-%m-%d")
    return f"pinned by {pin.pinned_by} on {when}" if pin.pinned_by else f"pinned on {when}"


def as_record(chosen: list[tuple[Pin, str]]) -> list[dict[str, Any]]:
    """The record's account of the pins a preamble quoted."""
    return [
        {
            "uid": str(pin.uid),
            "label": pin.label,
            "content": pin.content[:CONTENT_CHARS],
            "priority": pin.priority,
            "pinned_by": pin.pinned_by,
            "pinned_at": pin.pinned_at.isoformat(),
            "why": why,
        }
        for pin, why in chosen
    ]


def pinned_by_of(user: Any = None, token: Any = None) -> str:
    """How a pin's author is named: the user's name, or the API token's name (its prefix
    when it has none)."""
    if user is not None and getattr(user, "pk", None):
        return str(user.get_username())[:200]
    if token is not None:
        return f"token {token.name or token.prefix}"[:200]
    return ""


def newly_quoted(
    chosen: list[tuple[Pin, str]], before: list[dict[str, Any]] | None
) -> list[tuple[Pin, str]]:
    """The pins of ``chosen`` an earlier preamble of the session did not quote."""
    told = {entry.get("uid") for entry in before or []}
    return [(pin, why) for pin, why in chosen if str(pin.uid) not in told]
