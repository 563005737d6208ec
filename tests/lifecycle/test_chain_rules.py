"""The chain's rules as a pure function (lifecycle.ingest.chain_rules.decide): plain
sessions and steps in, links and closes out, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from lifecycle.ingest.chain_rules import (
    Arrival,
    Close,
    Decisions,
    Known,
    Step,
    decide,
    ended_by_replacement,
)
from lifecycle.models import EndReason

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=30)


def session(pk: int, external_id: str = "", **fields: Any) -> Known:
    fields.setdefault("source", "claude-code")
    fields.setdefault("agent_id", 1)
    return Known(pk=pk, external_id=external_id or f"ext-{pk}", **fields)


def start(at: datetime = T0, **facts: Any) -> Step:
    return Step(at=at, starts=True, **facts)


def run(
    batch: list[Arrival],
    stored: list[Known] | None = None,
    siblings: list[Known] | None = None,
) -> Decisions:
    rows = {s.pk: s for s in stored or []}
    for arrival in batch:  # the batch's sessions are read too, as stored
        rows.setdefault(arrival.session.pk, arrival.session)
    return decide(batch, rows, siblings or [], window=WINDOW, nulls_first=True)


def cleared(pk: int, ended_at: datetime, **fields: Any) -> Known:
    return session(
        pk, is_open=False, end_reason=EndReason.CLEAR, ended_at=ended_at, started_at=T0, **fields
    )


# --- resume ----------------------------------------------------------------------------


def test_a_resume_follows_the_session_it_names() -> None:
    earlier = session(1, "abc", started_at=T0 - timedelta(hours=1))
    later = session(2, "def", started_at=T0)
    decisions = run([Arrival(later, (start(resumed_from="abc"),))], stored=[earlier])
    assert decisions.links == {2: 1}
    assert decisions.resumed_from == {2: "abc"}
    assert decisions.closes == ()


def test_a_resume_naming_a_session_not_stored_names_it_and_links_nothing() -> None:
    later = session(2, "def", started_at=T0)
    decisions = run([Arrival(later, (start(resumed_from="gone"),))])
    assert decisions.links == {}
    assert decisions.resumed_from == {2: "gone"}


def test_a_start_follows_the_latest_started_session_naming_it_as_successor() -> None:
    older = session(1, successor_external_id="new", started_at=T0 - timedelta(hours=2))
    newer = session(3, successor_external_id="new", started_at=T0 - timedelta(hours=1))
    new = session(2, "new", started_at=T0)
    decisions = run([Arrival(new, (start(),))], stored=[older, newer])
    assert decisions.links == {2: 3}


def test_an_end_naming_its_successor_links_a_successor_of_the_batch() -> None:
    first = session(1, "one", started_at=T0, is_open=False)
    second = session(2, "two", started_at=T0 + timedelta(seconds=5))
    batch = [
        Arrival(second, (start(T0 + timedelta(seconds=5)),)),
        Arrival(first, (Step(at=T0 + timedelta(seconds=9), starts=False, next_session_id="two"),)),
    ]
    assert run(batch).links == {2: 1}


def test_a_session_stored_as_resuming_from_a_new_one_is_claimed_in_the_batch() -> None:
    # Both in the batch: the later one named the earlier before the earlier was known.
    named = session(1, "one", started_at=T0)
    naming = session(2, "two", previous_external_id="one", started_at=T0 - timedelta(minutes=1))
    batch = [Arrival(naming, ()), Arrival(named, (start(),))]
    assert run(batch).links == {2: 1}


# --- /clear ----------------------------------------------------------------------------


def test_a_clear_start_follows_the_session_cleared_within_the_window() -> None:
    old = cleared(1, T0 - timedelta(seconds=2))
    older = cleared(3, T0 - timedelta(seconds=20))
    new = session(2, started_at=T0)
    decisions = run([Arrival(new, (start(follows_cleared=True),))], stored=[older, old])
    assert decisions.links == {2: 1}


def test_a_clear_start_links_nothing_outside_the_window() -> None:
    old = cleared(1, T0 - WINDOW - timedelta(seconds=1))
    new = session(2, started_at=T0)
    assert run([Arrival(new, (start(follows_cleared=True),))], stored=[old]).links == {}


def test_a_clear_start_links_nothing_to_another_agents_session() -> None:
    old = cleared(1, T0 - timedelta(seconds=2), agent_id=9)
    new = session(2, started_at=T0)
    assert run([Arrival(new, (start(follows_cleared=True),))], stored=[old]).links == {}


def test_a_start_not_said_to_follow_a_clear_links_nothing_to_a_cleared_session() -> None:
    old = cleared(1, T0 - timedelta(seconds=2))
    new = session(2, started_at=T0)
    assert run([Arrival(new, (start(),))], stored=[old]).links == {}


def test_a_cleared_session_something_follows_already_is_not_followed_again() -> None:
    taken = cleared(1, T0 - timedelta(seconds=2), followed=True)
    free = cleared(3, T0 - timedelta(seconds=10))
    new = session(2, started_at=T0)
    decisions = run([Arrival(new, (start(follows_cleared=True),))], stored=[taken, free])
    assert decisions.links == {2: 3}


def test_two_clear_starts_in_one_batch_do_not_follow_the_same_session() -> None:
    old = cleared(1, T0 - timedelta(seconds=2))
    first = session(2, started_at=T0)
    second = session(3, started_at=T0 + timedelta(seconds=1))
    batch = [
        Arrival(first, (start(T0, follows_cleared=True),)),
        Arrival(second, (start(T0 + timedelta(seconds=1), follows_cleared=True),)),
    ]
    assert run(batch, stored=[old]).links == {2: 1}


# --- replacement -----------------------------------------------------------------------


def test_a_start_closes_the_open_session_of_the_same_key_and_follows_it() -> None:
    old = session(1, session_key="main", started_at=T0 - timedelta(hours=1))
    new = session(2, session_key="main", started_at=T0)
    decisions = run([Arrival(new, (start(),))], siblings=[old])
    assert decisions.closes == (Close(pk=1, at=T0, replaced_by=2),)
    assert decisions.links == {2: 1}


def test_every_open_session_of_the_key_is_closed_in_id_order() -> None:
    a = session(5, session_key="main", started_at=T0 - timedelta(hours=2))
    b = session(4, session_key="main", started_at=T0 - timedelta(hours=1))
    new = session(9, session_key="main", started_at=T0)
    decisions = run([Arrival(new, (start(),))], siblings=[a, b])
    assert [c.pk for c in decisions.closes] == [4, 5]
    assert decisions.links == {9: 4}


def test_a_start_closes_nothing_of_another_key_or_started_after_it() -> None:
    other_key = session(1, session_key="side", started_at=T0 - timedelta(hours=1))
    later = session(3, session_key="main", started_at=T0 + timedelta(minutes=1))
    new = session(2, session_key="main", started_at=T0)
    decisions = run([Arrival(new, (start(),))], siblings=[other_key, later])
    assert decisions.closes == ()
    assert decisions.links == {}


def test_a_session_closed_by_one_start_is_not_closed_again_by_the_next() -> None:
    old = session(1, session_key="main", started_at=T0 - timedelta(hours=1))
    first = session(2, session_key="main", started_at=T0)
    second = session(3, session_key="main", started_at=T0 + timedelta(minutes=1))
    batch = [
        Arrival(first, (start(T0),)),
        Arrival(second, (start(T0 + timedelta(minutes=1)),)),
    ]
    decisions = run(batch, siblings=[old])
    assert decisions.closes == (
        Close(pk=1, at=T0, replaced_by=2),
        Close(pk=2, at=T0 + timedelta(minutes=1), replaced_by=3),
    )
    assert decisions.links == {2: 1, 3: 2}


# --- what is never linked --------------------------------------------------------------


def test_a_session_that_follows_one_already_is_not_relinked() -> None:
    earlier = session(1, "abc", started_at=T0 - timedelta(hours=1))
    already = session(2, "def", previous=7, started_at=T0)
    decisions = run(
        [Arrival(already, (start(resumed_from="abc", follows_cleared=True),))],
        stored=[earlier, cleared(3, T0 - timedelta(seconds=1))],
    )
    assert decisions.links == {}
    assert decisions.resumed_from == {2: "abc"}


def test_a_replacing_start_that_follows_one_already_closes_but_keeps_its_link() -> None:
    old = session(1, session_key="main", started_at=T0 - timedelta(hours=1))
    new = session(2, session_key="main", previous=7, started_at=T0)
    decisions = run([Arrival(new, (start(),))], siblings=[old])
    assert decisions.closes == (Close(pk=1, at=T0, replaced_by=2),)
    assert decisions.links == {}


def test_sessions_of_another_source_are_not_linked() -> None:
    earlier = session(1, "abc", source="openclaw", started_at=T0 - timedelta(hours=1))
    naming = session(3, successor_external_id="def", source="openclaw", started_at=T0)
    later = session(2, "def", started_at=T0)
    decisions = run([Arrival(later, (start(resumed_from="abc"),))], stored=[earlier, naming])
    assert decisions.links == {}


def test_nothing_in_nothing_out() -> None:
    assert run([]) == Decisions()
    quiet = session(1, started_at=T0)
    assert run([Arrival(quiet, ())]) == Decisions()


def test_a_session_a_close_leaves_open_is_not_closed_twice_but_is_followed() -> None:
    # What closing leaves is the caller's answer: here the session's log goes on past
    # the first start and its refold leaves it open.
    old = session(1, session_key="main", started_at=T0 - timedelta(hours=1))
    first = session(2, session_key="main", started_at=T0 - timedelta(minutes=5))
    second = session(3, session_key="main", started_at=T0)
    batch = [
        Arrival(first, (start(T0 - timedelta(minutes=5)),)),
        Arrival(second, (start(T0),)),
    ]
    decisions = decide(
        batch,
        {s.pk: s for s in (first, second)},
        [old],
        window=WINDOW,
        nulls_first=True,
        close=lambda s, at: s if s.pk == 1 else ended_by_replacement(s, at),
    )
    assert decisions.closes == (
        Close(pk=1, at=T0 - timedelta(minutes=5), replaced_by=2),
        Close(pk=2, at=T0, replaced_by=3),
    )
    assert decisions.links == {2: 1, 3: 1}


# --- a later event names where the session comes from -------------------------------------


def later_step(name: str, at: datetime = T0) -> Step:
    return Step(at=at, starts=False, resumed_from=name)


def test_an_event_after_the_start_that_names_the_session_it_continues_links_it() -> None:
    """A forked transcript is written at its first turn: the client learns the earlier
    session after the start, and the Stop that says it links the two."""
    earlier = session(1, "abc", started_at=T0 - timedelta(hours=2), is_open=False)
    fork = session(2, "def", started_at=T0 - timedelta(minutes=5))
    decisions = run([Arrival(fork, (later_step("abc"),))], stored=[earlier])
    assert decisions.links == {2: 1}
    assert decisions.resumed_from == {2: "abc"}


def test_a_later_naming_never_moves_a_session_that_follows_one_already() -> None:
    earlier = session(1, "abc")
    other = session(3, "ghi")
    fork = session(2, "def", previous=3, previous_external_id="ghi")
    decisions = run([Arrival(fork, (later_step("abc"),))], stored=[earlier, other])
    assert decisions.links == {} and decisions.resumed_from == {}
