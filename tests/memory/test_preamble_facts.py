"""The preamble as a person reads it (memory.continuity.render.render_preamble): each fact on one
line and once, no internal keys, the project named once, never a word cut in two, an
unfinished session said to be unfinished, and "inherited from N" counting what it shows."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory.continuity import decide as scoring
from memory.continuity.render import clip_words, render_preamble
from memory.relevance import SessionText

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)


def candidate(
    hours: float, *, tasks: list[dict[str, Any]] | None = None, **features: Any
) -> scoring.Candidate:
    prior = scoring.Prior(uuid.uuid4(), f"s-{hours}", NOW - timedelta(hours=hours))
    found = scoring.Features(
        features.get("topics", ["webhook"]),
        len(tasks or []),
        active_projects=features.get("projects", ["git.example.com/acme/api"]),
        pending_tasks=tasks or [],
        done_tasks=[],
    )
    return scoring.score_session(prior, found, set(), NOW)


def render(chosen: list[scoring.Candidate], texts: dict[Any, SessionText]) -> str:
    return render_preamble(chosen, chosen, [], texts, None)


def test_a_stopped_session_says_so_and_files_no_intention_as_completed() -> None:
    best = candidate(3, tasks=[{"id": "list#2", "text": "Add tests for rejected signatures"}])
    texts = {
        best.session.pk: SessionText(
            request="load claude.md / Add webhook signature checks",
            completed="Signature checks are in. Now let me run the webhook suite.",
            next_steps="Add tests for rejected signatures. Document the webhook setup.",
            outcome="stopped",
            outcome_detail="Now let me run the webhook suite.",
        )
    }
    text = render([best], texts)
    lines = text.splitlines()
    assert "- completed: Signature checks are in." in lines
    assert "- stopped while: Now let me run the webhook suite." in lines
    # The pending task is said once, under PENDING TASKS, not again as a next step.
    assert "- next: Document the webhook setup." in lines
    assert "- Add tests for rejected signatures (3h ago)" in lines
    assert text.count("rejected signatures") == 1
    assert "list#" not in text and "note:" not in text
    assert text.startswith("[SESSION CONTINUITY — inherited from 1 prior session(s)]")


def test_a_failed_session_says_it_failed() -> None:
    best = candidate(2)
    texts = {
        best.session.pk: SessionText(
            request="Rotate the keys",
            outcome="failed",
            outcome_detail="API error: overloaded (HTTP 529)",
        )
    }
    assert "- failed: API error: overloaded (HTTP 529)" in render([best], texts).splitlines()


@pytest.mark.django_db
def test_inherited_from_counts_the_sessions_shown_and_the_project_is_named_once() -> None:
    best = candidate(1, projects=["github.com/acme/web", "/home/dev/src/web"])
    other = candidate(5, projects=["github.com/acme/web"])
    silent = candidate(9)  # no summary at all: nothing to show of it
    texts = {
        best.session.pk: SessionText(request="Fix the date picker", completed="Fixed it."),
        other.session.pk: SessionText(request="Build the usage chart", outcome="stopped"),
    }
    text = render([best, other, silent], texts)
    assert text.startswith("[SESSION CONTINUITY — inherited from 2 prior session(s)]")
    assert "- Build the usage chart (5h ago, stopped before it finished)" in text
    assert "ACTIVE PROJECTS: github.com/acme/web\n" in text + "\n"
    assert "/home/dev/src/web" not in text


def test_tasks_of_two_sessions_are_listed_once_and_without_markers() -> None:
    a = candidate(
        1, tasks=[{"id": "note:todo: add an alert", "text": "TODO: add an alert for replays."}]
    )
    b = candidate(
        4,
        tasks=[
            {"id": "note:next: add an alert", "text": "add an alert for replays"},
            {"id": "task-12", "text": "TODO: task-12 rotate the key"},
        ],
    )
    texts = {a.session.pk: SessionText(request="Replays", completed="Replays answered.")}
    text = render([a, b], texts)
    tasks = text.split("PENDING TASKS:\n")[1].split("\n\n")[0].splitlines()
    assert tasks == [
        "- add an alert for replays. (1h ago)",
        "- [task-12] TODO: task-12 rotate the key (4h ago)",
    ]


def test_nothing_is_cut_inside_a_word_and_a_long_report_keeps_its_end() -> None:
    best = candidate(1)
    report = " ".join(f"Stage {n} timing is stable across nights." for n in range(60))
    report += " The nightly run drops from 48 to 19 minutes."
    texts = {best.session.pk: SessionText(request="Profile the job " * 30, completed=report)}
    text = render([best], texts)
    assert "48 to 19 minutes" in text
    for line in text.splitlines():
        for word in re.findall(r"\S+…", line):
            assert word == "…" or word[:-1] in texts[best.session.pk].request + report, word
    assert clip_words("alpha beta gamma", 12) == "alpha beta…"
    assert len(text) <= 960
