"""A continuity request from end to end: read → decide → render → record.

``continuity_answer`` is what ``POST /api/v1/continuity`` runs (the event it carries
stored first, adapted once); ``continuity_build`` the automatic answer of a session at
its start and at its first prompt, ``continuity_continue`` a manual continue, and
``manual_continue_deliver`` hands a manual continue over at the session's next prompt.
The stages live in ``memory.continuity``; this module holds the transaction, the locks,
the order of the stages and the cache of candidate windows.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from lifecycle.adapters import EventInvalid
from lifecycle.models import OPEN_STATUSES, Agent, Session, Source
from lifecycle.services import REJECTED, adapter_for, events_ingest, session_for_continuity
from sessionhub.exceptions import Conflict, NotFound, ValidationFailed
from sessionhub.models import ApiToken
from sessionhub.text.redaction import redact_text

from ..continuity import decide, read, record, render
from ..continuity.data import knobs
from ..models import ContinuityRecord, Pin
from ..statements import automatic_record, row_lock


class SessionClosed(Conflict):
    code = "session_closed"


# --- the request ---------------------------------------------------------------------------


def continuity_answer(*, token: ApiToken, values: dict[str, Any]) -> dict[str, Any]:
    """The answer to a continuity request (``values``: the validated body): the carried
    event stored, the session found (or made with its agent), then either what waits for
    it (``pending``) or its automatic preamble with any manual continue waiting."""
    if "event" in values:
        ingest_carried_event(token, values["source"], values["session_id"], values["event"])
    session = session_for_continuity(
        team=token.team,
        source=values["source"],
        external_id=values["session_id"],
        # Asking what waits makes no session: one that is not there has nothing waiting.
        agent_external_id="" if values["pending"] else values.get("agent_id", ""),
        gateway=token.gateway_name,
        instance=values.get("gateway", ""),
    )
    if values["pending"]:
        waiting = manual_continue_deliver([str(session.pk)]) if session is not None else []
        return {
            "session_id": str(session.pk) if session is not None else None,
            "trigger": ContinuityRecord.Trigger.MANUAL,
            "preamble": "\n\n".join(w["preamble"] for w in waiting),
            "record_ids": [pk for w in waiting for pk in w["record_ids"]],
        }
    if session is None:
        raise NotFound("No such session: post its start event first, or name its agent_id")
    built = continuity_build(
        session=session,
        keywords=values.get("keywords"),
        prompt=values.get("prompt", ""),
        requested_by=f"token:{token.prefix}",
    )
    answer = record.record_as_dict(built)
    # A manual continue made before this moment goes with it (once). The hook client
    # (Claude Code, Codex CLI, Gemini CLI) gets it in the answer to the prompt's own
    # post, just before it asks here: only the other gateways are looked up for.
    waiting = (
        manual_continue_deliver([str(session.pk)])
        if values["source"] in (Source.OPENCLAW, Source.GENERIC)
        else []
    )
    if waiting:
        answer["preamble"] = "\n\n".join(
            [p for p in (answer["preamble"], *(w["preamble"] for w in waiting)) if p]
        )
        answer["delivered_records"] = [pk for w in waiting for pk in w["record_ids"]]
    return answer


def ingest_carried_event(token: ApiToken, source: str, session_id: str, event: Any) -> None:
    """Store the event a continuity request carries, through the ingest path itself (same
    adapter, redaction, identity and idempotency), so the session exists with its agent
    even when its own start event is still spooled; the start, arriving later with the same
    event id, is answered as a duplicate. A 400 names the field when it is no valid event.

    The event is adapted once: checked to be of this session before anything is stored
    (an event of another session changes nothing), and that same adapted event stored.
    """
    if not isinstance(event, dict):
        raise ValidationFailed(
            "event must be a JSON object", code="invalid", extra={"field": "event"}
        )
    adapter = adapter_for(source, token)
    try:
        adapted = adapter(event, timezone.now())
    except EventInvalid as exc:
        raise ValidationFailed(
            f"event.{exc.field}: {exc.reason}", code=exc.code, extra={"field": f"event.{exc.field}"}
        ) from exc
    if adapted.session_external_id != session_id:
        raise ValidationFailed(
            "event belongs to another session than session_id",
            code="session_mismatch",
            extra={"field": "event"},
        )
    (result,) = events_ingest(team=token.team, bodies=[event], adapter=lambda _body, _now: adapted)
    if result.status == REJECTED:  # not expected after the check above; never stored
        raise ValidationFailed(
            f"event.{result.field}: {result.reason}",
            code=result.code or "invalid",
            extra={"field": f"event.{result.field}"},
        )


# --- the candidate windows -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Window:
    """An agent's candidates as read, and what follows from them alone."""

    found: read.Window
    prepared: decide.Prepared


# Windows by the rows they were built from. An agent's candidate rows change when one of
# its sessions ends or leaves the lookback, or when a candidate's features or summary are
# rebuilt; the rows then differ and a new window is built from them. Until then every
# session the agent starts asks about the same rows (at its start and at its first
# prompt), and the window is taken again rather than built anew. The rows are read on
# every request all the same: a window is never taken for rows it was not built from.
_WINDOWS: dict[tuple[tuple[Any, ...], ...], _Window] = {}
_WINDOWS_MAX = 8
_WINDOWS_LOCK = threading.Lock()


def _window(key: tuple[tuple[Any, ...], ...]) -> _Window:
    """The window of these candidate rows, built once per distinct rows."""
    window = _WINDOWS.get(key)
    if window is not None:
        return window
    found = read.window_of(key)
    window = _Window(found, decide.prepare(found.rows, found.summaries))
    with _WINDOWS_LOCK:
        while len(_WINDOWS) >= _WINDOWS_MAX:
            _WINDOWS.pop(next(iter(_WINDOWS)))  # the oldest first
        _WINDOWS[key] = window
    return window


# --- the automatic answer ------------------------------------------------------------------


@transaction.atomic
def continuity_build(
    *,
    session: Session,
    keywords: list[str] | None = None,
    prompt: str = "",
    requested_by: str = "",
    user: Any = None,
    now: datetime | None = None,
) -> ContinuityRecord:
    """The automatic continuity of a session; asking again returns the first answer.

    Two moments: the start (no prompt yet: recency and pending work decide) and the first
    prompt (relevance can decide). Each is answered once; the first prompt's answer is
    empty when it keeps the start's choice (``decide.decide``). The record says why.
    """
    # read: the session locked, an earlier answer, the candidates and their words
    row_lock(Session, session.pk)
    prompt = redact_text(prompt) if prompt and prompt.strip() else ""
    stage = ContinuityRecord.Stage.PROMPT if prompt else ContinuityRecord.Stage.START
    existing = automatic_record(session.pk, stage)
    if existing is not None:
        return existing
    now = now or timezone.now()
    k = knobs()
    topics = read.hot_topics_of(session) if not keywords and not prompt else []
    rows = read.candidate_rows(session.agent_id, exclude_pk=session.pk, now=now, k=k)
    window = _window(tuple(rows))
    terms = decide.prompt_terms(prompt) if prompt else []
    texts = read.candidate_texts(window.found, terms)
    start = (
        automatic_record(session.pk, ContinuityRecord.Stage.START)
        if stage == ContinuityRecord.Stage.PROMPT
        else None
    )
    # decide: the scores, the sources
    wanted = decide.current_keywords(keywords, prompt, topics)
    scoring = decide.score_priors(
        window.found.rows,
        window.prepared,
        texts,
        wanted=wanted,
        terms=terms,
        prompt=prompt,
        now=now,
        k=k,
    )
    decision = decide.decide(
        scoring.scored,
        prompt_known=bool(terms),
        k=k,
        predecessor=session.previous_session_id,
        start_sources=record.sources_of(start),
        shared_prompt=scoring.shared_prompt,
    )
    chosen = decision.chosen
    inherit: list[Pin] = []
    if decision.serve and chosen:
        # read: the agent row serializes pin writes (as services.pins.pin_create), taken
        # first; then one read for both: the agent's active pins (the team's among them)
        # and the pins the best source held.
        row_lock(Agent, session.agent_id)
        pins_read = read.pins_with_originals(session.agent_id, chosen[0].session.pk)
        people = decide.curated_among(pins_read, session.agent_id)
        inherit = decide.pins_to_inherit(
            pins_read,
            agent_id=session.agent_id,
            source_pk=chosen[0].session.pk,
            now=now,
            cap=settings.SESSIONHUB["MAX_ACTIVE_PINS"],
            k=k,
        )
    else:
        people = read.curated_pins_of(session.agent_id)
    curated = decide.pins_for_preamble(people, keywords=wanted, prompt=prompt)
    if not decision.serve:  # the start's preamble already told this session
        # ... all but the pins it did not quote (relevant to the prompt, or set since).
        curated = decide.newly_quoted(curated, start.curated_pins if start else None)
    # record (the pins first: the preamble names them), render, record
    pins = record.pins_inherited(session, inherit)
    if not decision.serve:
        preamble = render.render_preamble([], scoring.scored, [], curated=[p for p, _ in curated])
    else:
        preamble = render.render_preamble(
            chosen,
            scoring.scored,
            pins,
            scoring.texts,
            scoring.later,
            curated=[p for p, _ in curated],
            k=k,
        )
    return record.record_write(
        session=session,
        trigger=ContinuityRecord.Trigger.AUTOMATIC,
        stage=stage,
        ranked=decision.ranked,
        chosen=chosen,
        pins=pins,
        keywords=wanted,
        preamble=preamble,
        requested_by=requested_by,
        user=user,
        reason=decision.reason if chosen else "no earlier session scored above the threshold",
        curated=curated,
        k=k,
    )


# --- a manual continue -----------------------------------------------------------------------


@transaction.atomic
def continuity_continue(
    *,
    target: Session,
    source: Session,
    user: Any = None,
    requested_by: str = "",
    now: datetime | None = None,
) -> ContinuityRecord:
    """A manual continue: the target inherits from a chosen session, whatever its score."""

    if target.team_id != source.team_id:
        raise ValidationFailed("Sessions of different teams cannot continue each other")
    if target.pk == source.pk:
        raise ValidationFailed("A session cannot continue itself", code="same_session")
    Session.objects.select_for_update().filter(pk=target.pk).first()
    target.refresh_from_db(fields=["status"])
    if target.status not in OPEN_STATUSES:
        raise SessionClosed(
            f"Session {target.external_id or target.pk} has {target.status}: a continue is "
            "handed to a session at its next prompt, and this one will have no more. Start "
            "a new session of the agent and continue that one.",
            extra={"status": target.status},
        )
    existing = ContinuityRecord.objects.filter(
        session=target, trigger=ContinuityRecord.Trigger.MANUAL, sources=source
    ).first()
    if existing is not None:
        return existing
    now = now or timezone.now()
    k = knobs()
    # read
    wanted = decide.current_keywords(None, "", read.hot_topics_of(target))
    features = read.features_of(source)
    # The agent row serializes pin writes (the same lock as services.pins.pin_create);
    # one read for both: the agent's active pins, and the pins the source held (with the
    # originals they were copied from: the copies point at those, and the record names
    # them).
    row_lock(Agent, target.agent_id)
    pins_read = read.pins_with_originals(target.agent_id, source.pk)
    people = read.curated_pins_of(target.agent_id)
    texts = read.summary_text(source.pk)
    # decide
    candidate = decide.score_session(read.prior_of(source), features, wanted, now, k)
    inherit = decide.pins_to_inherit(
        pins_read,
        agent_id=target.agent_id,
        source_pk=source.pk,
        now=now,
        cap=settings.SESSIONHUB["MAX_ACTIVE_PINS"],
        k=k,
    )
    curated = decide.pins_for_preamble(people, keywords=wanted)
    # record, render, record
    pins = record.pins_inherited(target, inherit)
    preamble = render.render_preamble(
        [candidate], [candidate], pins, texts, curated=[p for p, _ in curated], k=k
    )
    return record.record_write(
        session=target,
        trigger=ContinuityRecord.Trigger.MANUAL,
        ranked=[candidate],
        chosen=[candidate],
        pins=pins,
        keywords=wanted,
        preamble=preamble,
        requested_by=requested_by or (f"user:{user}" if user else ""),
        user=user,
        reason=f"continued by hand from {source.external_id or source.pk}",
        curated=curated,
        delivered=False,
        k=k,
    )


# --- a manual continue of a running session, handed over at its next prompt --------------


def manual_continue_deliver(session_ids: Iterable[str]) -> list[dict[str, Any]]:
    """The manual continues waiting for these sessions (made while they ran), each claimed
    as delivered by a conditional update (two prompts racing hand it over once); one
    entry per session, its preambles joined, oldest first."""
    waiting = list(
        ContinuityRecord.objects.filter(
            session_id__in=list(session_ids),
            trigger=ContinuityRecord.Trigger.MANUAL,
            delivered_at__isnull=True,
        ).order_by("created_at", "id")
    )
    if not waiting:
        return []
    now = timezone.now()
    by_session: dict[uuid.UUID, list[ContinuityRecord]] = {}
    for found in waiting:
        claimed = ContinuityRecord.objects.filter(pk=found.pk, delivered_at__isnull=True).update(
            delivered_at=now
        )
        if claimed == 1 and found.preamble.strip():
            by_session.setdefault(found.session_id, []).append(found)
    return [
        {
            "session_id": str(session_id),
            "record_ids": [r.pk for r in records],
            "trigger": ContinuityRecord.Trigger.MANUAL,
            "preamble": "\n\n".join(r.preamble for r in records),
        }
        for session_id, records in by_session.items()
    ]
