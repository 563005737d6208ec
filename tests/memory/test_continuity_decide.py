"""Which sessions a preamble draws from (memory.continuity.decide), as a pure function: a
continued session first, the first prompt overriding the start's choice only on strong
evidence, a continued session giving way to its continuation."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from memory.continuity import decide as scoring
from memory.continuity.data import Knobs, knobs
from memory.continuity.decide import decide, strong_evidence

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
K: Knobs = knobs()


def cand(
    hours: float,
    *,
    relevance: float = 0.0,
    matched: tuple[str, ...] = (),
    pending: int = 0,
    continues: uuid.UUID | None = None,
) -> scoring.Candidate:
    prior = scoring.Prior(uuid.uuid4(), f"s{hours}", NOW - timedelta(hours=hours), None, continues)
    features = scoring.Features(["x"], pending)
    return scoring.score_session(
        prior, features, set(), NOW, K, relevance=relevance, matched=matched
    )


def pk(c: scoring.Candidate) -> str:
    return str(c.session.pk)


def test_a_continued_session_draws_from_its_predecessor_first() -> None:
    fresh, old = cand(1, pending=2), cand(50)
    decision = decide([fresh, old], prompt_known=False, k=K, predecessor=old.session.pk)
    assert decision.chosen[0] is old and decision.serve
    assert "continues" in decision.reason
    told = decide(
        [fresh, old], prompt_known=False, k=K, predecessor=old.session.pk, start_sources=[pk(old)]
    )
    assert told.chosen[0] is old and not told.serve


def test_the_first_prompt_keeps_the_start_choice_on_weak_evidence() -> None:
    start = cand(1, pending=1)
    one_word = cand(30, relevance=1.0, matched=("history",))
    decision = decide([start, one_word], prompt_known=True, k=K, start_sources=[pk(start)])
    assert decision.chosen[0] is start and not decision.serve
    assert "kept the start's choice" in decision.reason and "1 term" in decision.reason


def test_the_first_prompt_overrides_on_strong_evidence_and_says_why() -> None:
    start = cand(1, pending=1)
    match = cand(100, relevance=0.8, matched=("websocket", "backoff", "notifier"))
    decision = decide([start, match], prompt_known=True, k=K, start_sources=[pk(start)])
    assert decision.chosen[0] is match and decision.serve
    assert "'websocket'" in decision.reason and "0.80" in decision.reason


def test_a_prompt_other_sessions_open_with_never_overrides() -> None:
    start, other = cand(1), cand(5, relevance=0.9, matched=("load", "claude"))
    decision = decide(
        [start, other], prompt_known=True, k=K, start_sources=[pk(start)], shared_prompt=3
    )
    assert decision.chosen[0] is start and not decision.serve
    assert "opens 3 earlier session" in decision.reason


def test_a_session_gives_way_to_the_session_that_continues_it() -> None:
    origin = cand(20, pending=3)
    fork = cand(10, continues=origin.session.pk)
    decision = decide([origin, fork], prompt_known=False, k=K)
    assert decision.chosen[0] is fork
    assert "continued in" in decision.reason


relevances = st.floats(min_value=0, max_value=1, allow_nan=False)


@hsettings(max_examples=200, deadline=None)
@given(
    hours=st.lists(st.floats(min_value=0.1, max_value=160), min_size=1, max_size=6),
    rel=st.lists(relevances, min_size=6, max_size=6),
    terms=st.lists(st.integers(min_value=0, max_value=4), min_size=6, max_size=6),
    start_index=st.integers(min_value=0, max_value=5),
    shared=st.integers(min_value=0, max_value=3),
)
def test_only_strong_evidence_replaces_the_start_choice(
    hours: list[float], rel: list[float], terms: list[int], start_index: int, shared: int
) -> None:
    scored = [
        cand(h, relevance=rel[i], matched=tuple(f"t{n}" for n in range(terms[i])))
        for i, h in enumerate(hours)
    ]
    start = scored[start_index % len(scored)]
    decision = decide(
        scored, prompt_known=True, k=K, start_sources=[pk(start)], shared_prompt=shared
    )
    if decision.serve:
        best = decision.chosen[0]
        assert best is not start
        assert not shared
        assert strong_evidence(best, start, K)
    else:
        assert (
            decision.chosen == []
            or decision.chosen[0] is start
            or decision.chosen[0].session.pk == start.session.pk
        )
