"""The session chain: Claude Code's ``/clear`` links the new session to the one it cleared,
and the chain a run of sessions builds is the same whether its events come in one batch,
one at a time, or cut into any batches in between (Hypothesis)."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifecycle import services
from lifecycle.models import Session, Source
from sessionhub.models import Team
from sessionhub.services import api_token_create

pytestmark = pytest.mark.django_db
# Within the crash horizon: in the embedded default the crash sweep runs from the ingest
# path, and a session silent for hours before its next event is closed as crashed.
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
CWD = "/home/dev/src/billing"


def hook(name: str, sid: str, at: datetime, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": sid,
        "transcript_path": f"/tmp/{sid}.jsonl",
        "cwd": CWD,
        "hook_event_name": name,
        "sessionhub": {"event_id": str(uuid.uuid4()), "occurred_at": at.isoformat()},
        **extra,
    }


def cleared_run(sessions: int, *, resume_last: bool = False) -> list[dict[str, Any]]:
    """``sessions`` sessions of one project, each ended by /clear and followed by the next
    (started with source=clear a second later); optionally the last is resumed later."""
    hooks: list[dict[str, Any]] = []
    at = T0
    ids = [f"run-{n}-{uuid.uuid4().hex[:8]}" for n in range(sessions)]
    for n, sid in enumerate(ids):
        hooks.append(hook("SessionStart", sid, at, source="clear" if n else "startup"))
        hooks.append(hook("UserPromptSubmit", sid, at + timedelta(seconds=2), prompt=f"task {n}"))
        at += timedelta(minutes=5)
        last = n == sessions - 1
        hooks.append(hook("SessionEnd", sid, at, reason="other" if last else "clear"))
        at += timedelta(seconds=1)
    if resume_last:
        hooks.append(hook("SessionStart", ids[-1], at + timedelta(minutes=20), source="resume"))
    return hooks


def deliver(team: Team, batches: list[list[dict[str, Any]]]) -> None:
    token, _ = api_token_create(team=team, name=f"gw-{uuid.uuid4().hex[:6]}", scopes=["ingest"])
    adapter = services.adapter_for(Source.CLAUDE_CODE, token)
    for batch in batches:
        results = services.events_ingest(team=team, bodies=batch, adapter=adapter)
        assert {r.status for r in results} <= {services.ACCEPTED}, [r.as_dict() for r in results]


def chain_of(team: Team) -> dict[str, tuple[str, str | None, str | None]]:
    """Per session (by the order it started): its status, whom it follows, who continues it."""
    sessions = list(
        Session.objects.filter(team=team).select_related("previous_session", "continued_by")
    )
    order = {s.pk: n for n, s in enumerate(sorted(sessions, key=lambda s: s.started_at))}

    def name(s: Session | None) -> str | None:
        return None if s is None else f"#{order[s.pk]}"

    return {
        f"#{order[s.pk]}": (s.status, name(s.previous_session), name(s.continued_by))
        for s in sessions
    }


def test_clear_links_the_new_session_to_the_cleared_one(team: Team) -> None:
    deliver(team, [[h] for h in cleared_run(3)])
    assert chain_of(team) == {
        "#0": ("ended", None, None),
        "#1": ("ended", "#0", None),
        "#2": ("ended", "#1", None),
    }


def test_a_clear_start_with_nothing_cleared_links_to_nothing(team: Team) -> None:
    lone = [h for h in cleared_run(2)][3:]  # the second session only: its start says clear
    deliver(team, [lone])
    assert chain_of(team) == {"#0": ("ended", None, None)}


def _batches(hooks: list[dict[str, Any]], cuts: list[int]) -> list[list[dict[str, Any]]]:
    edges = sorted({0, len(hooks), *(c % (len(hooks) + 1) for c in cuts)})
    return [hooks[a:b] for a, b in itertools.pairwise(edges) if b > a]


@settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    sessions=st.integers(min_value=1, max_value=4),
    resume_last=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=6),
)
def test_batches_or_one_at_a_time_give_the_same_chain(
    db: Any, sessions: int, resume_last: bool, cuts: list[int]
) -> None:
    hooks = cleared_run(sessions, resume_last=resume_last)
    one_by_one = Team.objects.create(name="a", slug=f"a-{uuid.uuid4().hex[:10]}")
    all_at_once = Team.objects.create(name="b", slug=f"b-{uuid.uuid4().hex[:10]}")
    in_batches = Team.objects.create(name="c", slug=f"c-{uuid.uuid4().hex[:10]}")
    deliver(one_by_one, [[h] for h in hooks])
    deliver(all_at_once, [hooks])
    deliver(in_batches, _batches(hooks, cuts))
    expected = chain_of(one_by_one)
    assert chain_of(all_at_once) == expected
    assert chain_of(in_batches) == expected
    assert len(expected) == sessions
