"""The writes of pins: an agent's working memory, at most ``MAX_ACTIVE_PINS`` active,
labels unique; who pinned one; and the release of a session's pins when it closes.

Inheriting pins is part of a continuity answer (``services.continuity``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from lifecycle.models import Agent, Session
from sessionhub.exceptions import Conflict, ValidationFailed
from sessionhub.text.redaction import RULES_VERSION, redact_text

from ..models import Pin
from ..selectors import active_pins, session_pins_q

LABEL_MAX = 200
CONTENT_MAX = 4000


class PinCapReached(Conflict):
    code = "pin_cap_reached"


class PinLabelTaken(Conflict):
    code = "pin_label_taken"


def _clean(label: Any, content: Any, priority: Any) -> tuple[str, str, str]:
    if not isinstance(label, str) or not label.strip():
        raise ValidationFailed("label is required", code="invalid", extra={"field": "label"})
    if len(label) > LABEL_MAX:
        raise ValidationFailed(
            f"label is longer than {LABEL_MAX}", code="invalid", extra={"field": "label"}
        )
    if not isinstance(content, str) or len(content) > CONTENT_MAX:
        raise ValidationFailed(
            f"content must be a string of at most {CONTENT_MAX} characters",
            code="invalid",
            extra={"field": "content"},
        )
    if priority not in Pin.Priority.values:
        raise ValidationFailed(
            "priority must be normal or critical", code="invalid", extra={"field": "priority"}
        )
    # A redaction marker can be longer than the secret it replaces: cut the label back to
    # what the column holds, or a valid request would fail in the database.
    return redact_text(label.strip())[:LABEL_MAX], redact_text(content), priority


@transaction.atomic
def pin_create(
    *,
    agent: Agent,
    label: str,
    content: str = "",
    priority: str = Pin.Priority.NORMAL,
    origin_session: Session | None = None,
    inherited_from: Pin | None = None,
    inherited_into: Session | None = None,
    pinned_by: str = "",
) -> Pin:
    """Pin something for an agent; a clear 409 past the cap or on a duplicate label."""
    label, content, priority = _clean(label, content, priority)
    # The agent row is the lock that serializes pin writes for one agent.
    Agent.objects.select_for_update().filter(pk=agent.pk).first()
    active = active_pins(agent)
    cap = settings.SESSIONHUB["MAX_ACTIVE_PINS"]
    if active.filter(label=label).exists():
        raise PinLabelTaken(f"An active pin is already labelled {label!r}")
    if active.count() >= cap:
        raise PinCapReached(
            f"The agent already has {cap} active pins; unpin one first", extra={"cap": cap}
        )
    try:
        with transaction.atomic():
            return Pin.objects.create(
                team_id=agent.team_id,
                agent=agent,
                label=label,
                content=content,
                priority=priority,
                pinned_at=timezone.now(),
                origin_session=origin_session,
                inherited_from=inherited_from,
                inherited_into=inherited_into,
                pinned_by=pinned_by[:200],
                redaction_version=RULES_VERSION,
            )
    except IntegrityError as exc:
        raise PinLabelTaken(f"An active pin is already labelled {label!r}") from exc


@transaction.atomic
def pin_update(*, pin: Pin, **changes: Any) -> Pin:
    """Change a pin's label, content or priority."""
    if not pin.is_active:
        raise Conflict("This pin was unpinned", code="pin_unpinned")
    label, content, priority = _clean(
        changes.get("label", pin.label),
        changes.get("content", pin.content),
        changes.get("priority", pin.priority),
    )
    # The same lock as pin_create: two renames onto one label must not both pass the check.
    Agent.objects.select_for_update().filter(pk=pin.agent_id).first()
    if label != pin.label and active_pins(pin.agent).filter(label=label).exists():
        raise PinLabelTaken(f"An active pin is already labelled {label!r}")
    pin.label, pin.content, pin.priority = label, content, priority
    pin.redaction_version = RULES_VERSION
    try:
        with transaction.atomic():
            pin.save(
                update_fields=["label", "content", "priority", "redaction_version", "updated_at"]
            )
    except IntegrityError as exc:
        raise PinLabelTaken(f"An active pin is already labelled {label!r}") from exc
    return pin


def pin_unpin(*, pin: Pin) -> Pin:
    """Unpin (kept for provenance, no longer active); unpinning twice is a no-op."""
    if pin.unpinned_at is None:
        pin.unpinned_at = timezone.now()
        pin.save(update_fields=["unpinned_at", "updated_at"])
    return pin


def pins_release(session: Session, at: datetime | None = None) -> int:
    """A session's working memory ends with it: its pins stop being active (kept for provenance)."""
    return (
        Pin.objects.filter(session_pins_q(session))
        .filter(unpinned_at__isnull=True)
        .update(unpinned_at=at or timezone.now())
    )


def pinned_by_of(user: Any = None, token: Any = None) -> str:
    """How a pin's author is named: the user's name, or the API token's name (its prefix
    when it has none)."""
    if user is not None and getattr(user, "pk", None):
        return str(user.get_username())[:200]
    if token is not None:
        return f"token {token.name or token.prefix}"[:200]
    return ""
