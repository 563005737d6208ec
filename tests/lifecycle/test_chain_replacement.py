"""A start that replaces a session of its key, when the replaced session does not stay
closed: its log goes on past the start (a resume stamped later reopens it), or it was
replaced once already and reopened since. A later start of the same batch still sees it
open, as it would one event at a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lifecycle import services
from lifecycle.adapters import canonical
from lifecycle.models import EndReason, LifecycleEvent, Session, SessionStatus
from sessionhub.models import Team

pytestmark = pytest.mark.django_db
# Within the crash horizon, so that no session is closed as crashed on the way.
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)


def event(n: int, kind: str, minute: int, sid: str, **extra: Any) -> dict[str, Any]:
    return {
        "event_id": f"ev-{n}",
        "kind": kind,
        "occurred_at": (T0 + timedelta(minutes=minute)).isoformat(),
        "agent_id": "agent",
        "session_id": sid,
        "session_key": "main",
        **extra,
    }


def deliver(team: Team, *batches: list[dict[str, Any]]) -> dict[str, Session]:
    for batch in batches:
        results = services.events_ingest(
            team=team, bodies=batch, adapter=lambda body, now: canonical.adapt(body, now=now)
        )
        assert {r.status for r in results} == {services.ACCEPTED}
    return {s.external_id: s for s in Session.objects.filter(team=team)}


def replaced_ends(session: Session) -> int:
    return LifecycleEvent.objects.filter(
        session=session, event_id=f"sessionhub:replaced:{session.pk}"
    ).count()


def test_a_session_its_replacement_reopens_is_followed_by_the_next_start(team: Team) -> None:
    sessions = deliver(
        team,
        [
            event(0, "session_start", 0, "s0"),
            event(1, "session_start", 10, "s1"),
            event(2, "session_end", 12, "s1", reason="other"),
            event(3, "session_start", 15, "s2"),
            event(4, "session_resume", 20, "s0"),  # stamped after s1's start
        ],
    )
    s0, s1, s2 = sessions["s0"], sessions["s1"], sessions["s2"]
    # s1's start closed s0 at minute 10; s0's resume at minute 20 reopened it.
    assert s0.status == SessionStatus.ACTIVE
    assert replaced_ends(s0) == 1
    assert s1.previous_session_id == s0.pk
    # s2 finds s0 open: its close does nothing more, and s2 follows it.
    assert s2.previous_session_id == s0.pk
    assert s2.status == SessionStatus.ACTIVE


def test_a_session_replaced_in_an_earlier_request_and_reopened_stays_open(team: Team) -> None:
    sessions = deliver(
        team,
        [event(0, "session_start", 0, "s0")],
        [event(1, "session_start", 10, "s1"), event(2, "session_end", 12, "s1", reason="other")],
        [event(3, "session_resume", 20, "s0")],
        [event(4, "session_start", 30, "s2"), event(5, "session_start", 40, "s3")],
    )
    s0, s2, s3 = sessions["s0"], sessions["s2"], sessions["s3"]
    assert s0.status == SessionStatus.ACTIVE  # its replaced end is stored already
    assert replaced_ends(s0) == 1
    assert s2.previous_session_id == s0.pk
    assert s2.status == SessionStatus.ENDED and s2.end_reason == EndReason.REPLACED
    # s3's start finds s0 and s2 open and follows the first in id order.
    assert s3.previous_session_id == min(s0.pk, s2.pk)
