"""Continuity, last stage: what an answer writes, and how a record reads back.

The pins the asking session inherits (one INSERT), then the record of everything served:
its candidates, sources, pins, keywords, preamble and why, with each source marked
continued by the asking session (one statement on PostgreSQL, ``statements.record_insert``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.utils import timezone

from lifecycle.models import Session
from sessionhub.text.redaction import RULES_VERSION

from ..models import ContinuityRecord, Pin
from ..statements import record_insert
from .data import Knobs, knobs
from .decide import Candidate
from .render import CONTENT_CHARS

# The record explains the best ranked candidates part by part (every source among them, the
# runners-up a reader compares them with) and keeps only the session and the score of the
# rest: a breakdown of every candidate would make the record, written on every request,
# grow with the candidates.
RECORD_EXPLAINED = 20


def record_entries(
    ranked: list[Candidate], used: Iterable[uuid.UUID], k: Knobs | None = None
) -> list[dict[str, Any]]:
    """The record's candidates, best first: the first ``RECORD_EXPLAINED`` and every source
    (``used``, in the order the preamble quotes them) with the parts of their score, the
    others with their score alone."""
    k = k or knobs()
    order = {pk: rank for rank, pk in enumerate(used)}
    entries = []
    for rank, c in enumerate(ranked):
        source = order.get(c.session.pk)
        if rank < RECORD_EXPLAINED or source is not None:
            # The candidate's parts (``Candidate.as_dict``) and whether it is a source: a
            # source also has its ``source_rank`` (0: the session the preamble quotes
            # first, which need not have the best score: a session continued, the start's
            # choice kept).
            entry = {**c.as_dict(k), "used": source is not None}
            if source is not None:
                entry["source_rank"] = source
        else:  # ranked below the ones it explains: which session, and its score
            entry = {
                "session_id": str(c.session.pk),
                "external_id": c.session.external_id,
                "score": round(c.score, 4),
            }
        entries.append(entry)
    return entries


def _source_order(entry: dict[str, Any]) -> tuple[int, float]:
    """Sources in the order the preamble quotes them (records made before that order was
    kept: by score)."""
    rank = entry.get("source_rank")
    return (rank if isinstance(rank, int) else 1_000, -float(entry.get("score") or 0))


def sources_of(record: ContinuityRecord | None) -> list[str] | None:
    """A record's sources, best first (None without a record)."""
    if record is None:
        return None
    used = sorted((c for c in record.candidates if c.get("used")), key=_source_order)
    return [c["session_id"] for c in used]


def curated_as_record(chosen: list[tuple[Pin, str]]) -> list[dict[str, Any]]:
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


def pins_inherited(target: Session, chosen: list[Pin]) -> list[Pin]:
    """Copy the ``chosen`` pins (``decide.pins_to_inherit``) into the target's agent, in
    one INSERT (none when nothing is chosen); the new pins. The caller holds the agent's
    row lock since before it read them."""
    return Pin.objects.bulk_create(
        [
            Pin(
                team_id=target.team_id,
                agent_id=target.agent_id,
                label=pin.label,
                content=pin.content,
                priority=pin.priority,
                # The knowledge is as old as the original pin: inheriting it again and
                # again must not make it look fresh to the decay filter.
                pinned_at=pin.pinned_at,
                origin_session=None,
                inherited_from=pin.inherited_from or pin,
                inherited_into=target,
                redaction_version=pin.redaction_version,
            )
            for pin in chosen
        ]
    )


def record_write(
    *,
    session: Session,
    trigger: str,
    ranked: list[Candidate],
    chosen: list[Candidate],
    pins: list[Pin],
    keywords: set[str],
    preamble: str,
    requested_by: str,
    user: Any,
    stage: str = "",
    reason: str = "",
    curated: list[tuple[Pin, str]] | None = None,
    delivered: bool = True,
    k: Knobs | None = None,
) -> ContinuityRecord:
    """The record of one answer, its sources linked and each marked continued: one
    statement."""
    used = [c.session.pk for c in chosen]
    created = timezone.now()
    record = ContinuityRecord(
        team_id=session.team_id,
        session=session,
        trigger=trigger,
        stage=stage,
        candidates=record_entries(ranked, used, k),
        inherited_pins=[
            {
                "uid": str(p.uid),
                "label": p.label,
                "priority": p.priority,
                "inherited_from": str(p.inherited_from.uid) if p.inherited_from else None,
                "origin_session": str(p.inherited_from.origin_session_id)
                if p.inherited_from and p.inherited_from.origin_session_id
                else None,
            }
            for p in pins
        ],
        keywords=sorted(keywords),
        preamble=preamble,
        reason=reason,
        curated_pins=curated_as_record(curated or []),
        # An automatic preamble is handed over in the answer that carries it; a manual
        # continue waits for the session's next prompt (``manual_continue_deliver``).
        delivered_at=created if delivered else None,
        requested_by=requested_by[:200],
        requested_by_user=user if getattr(user, "pk", None) else None,
        redaction_version=RULES_VERSION,
        created_at=created,
    )
    record_insert(record, used)
    return record


def record_as_dict(record: ContinuityRecord) -> dict[str, Any]:
    """The API's answer for a continuity record: its sources best first, with their parts."""
    used = sorted((c for c in record.candidates if c.get("used")), key=_source_order)
    return {
        "record_id": record.pk,
        "session_id": str(record.session_id),
        "trigger": record.trigger,
        "stage": record.stage,
        "preamble": record.preamble,
        "sources": used,
        "candidates_scored": len(record.candidates),
        "inherited_pins": record.inherited_pins,
        "keywords": record.keywords,
        "reason": record.reason,
        "created_at": record.created_at.isoformat(),
    }
