"""One definition of the state machine: the quiet path's statement
(``lifecycle/ingest/quick.py``) takes what a quiet event does from the fold
(``lifecycle/state.py``), and writes every field the fold can move for it.

These run on both database legs: the statement's text is built on SQLite too, although
only PostgreSQL runs it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from lifecycle import state
from lifecycle.ingest import quick
from lifecycle.models import EventKind, Session

# Columns the statement writes that are the session's, not the fold's: what the first
# event that names them fills in, and the memory and row bookkeeping.
NOT_FOLDED = {
    "session_key",
    "channel",
    "cwd",
    "project",
    "developer",
    "memory_dirty_at",
    "updated_at",
}
PHASES = ("", "pre", "post", "final")
EVERY_FACT = {"model": "m-1", "token_count": 12, "message_count": 3, "run_trigger": "cron"}


def written_columns() -> set[str]:
    """The columns the statement's UPDATE sets."""
    text = quick._statement()
    block = re.split(r"\bSET\b", text.split("UPDATE", 1)[1], maxsplit=1)[1].split("FROM e")[0]
    return set(re.findall(r'^\s*"?(\w+)"?\s*=', block, flags=re.MULTILINE))


def moved_by_fold(kind: str, phase: str, facts: dict[str, Any], in_compaction: bool) -> set[str]:
    session = quick._probe(in_compaction)
    before = {name: getattr(session, name) for name in state.FOLD_FIELDS}
    state.apply(
        session,
        state.FoldEvent(
            kind=kind, occurred_at=quick._PROBE_AT.replace(year=2001), phase=phase, facts=facts
        ),
    )
    return {name for name in state.FOLD_FIELDS if getattr(session, name) != before[name]}


@pytest.fixture(autouse=True)
def _fresh_effects() -> Any:
    quick.effect.cache_clear()
    yield
    quick.effect.cache_clear()


@pytest.mark.parametrize("kind", sorted(quick.QUIET_KINDS))
@pytest.mark.parametrize("phase", PHASES)
def test_the_statement_writes_every_field_the_fold_moves_for_a_quiet_event(
    kind: str, phase: str
) -> None:
    columns = written_columns()
    for in_compaction in (False, True):
        moved = moved_by_fold(kind, phase, EVERY_FACT, in_compaction)
        assert moved <= columns, f"{kind}/{phase}: the fold moves {moved - columns}"


def test_the_statement_writes_nothing_the_fold_does_not_define() -> None:
    extra = written_columns() - set(state.FOLD_FIELDS) - NOT_FOLDED
    assert not extra, f"the statement writes {extra} the fold knows nothing of"


def test_the_counts_are_the_folds() -> None:
    prompt = quick.effect(EventKind.PROMPT, "", False)
    assert prompt is not None
    assert prompt.deltas["event_count"] == 1 and prompt.deltas["prompt_count"] == 1
    assert prompt.ends_compaction
    before_tool = quick.effect(EventKind.TOOL_USE, "pre", False)
    after_tool = quick.effect(EventKind.TOOL_USE, "post", False)
    assert before_tool is not None and after_tool is not None
    assert before_tool.deltas["tool_use_count"] == 0 and after_tool.deltas["tool_use_count"] == 1
    assert not after_tool.ends_compaction  # a late tool result lands inside a compaction


@pytest.mark.parametrize(
    "kind",
    [
        EventKind.SESSION_END,
        EventKind.SESSION_SUSPEND,
        EventKind.COMPACTION_BEFORE,
        EventKind.COMPACTION_AFTER,
    ],
)
def test_an_event_that_moves_the_state_is_not_quiet(kind: str) -> None:
    assert quick.effect(kind, "", False) is None


def test_a_new_rule_in_the_fold_takes_quiet_events_off_the_statement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Should the fold learn to move something else on a tool call, the statement steps
    aside for it rather than store a session the fold would not."""
    original = state._count

    def count_and_flag(session: Session, event: state.FoldEvent) -> None:
        original(session, event)
        if event.kind == EventKind.TOOL_USE:
            session.end_detail = "a tool ran"

    monkeypatch.setattr(state, "_count", count_and_flag)
    assert quick.effect(EventKind.TOOL_USE, "post", False) is None
    assert quick.effect(EventKind.PROMPT, "", False) is not None
