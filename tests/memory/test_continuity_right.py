"""Continuity that is right (issue 12): no secret stored or echoed through continuity, no
finished work handed back as to-do, pins scanned at the end, relevance of the first
prompt, sources in score order, the session started by the continuity request itself."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from lifecycle.models import LifecycleEvent, Session
from memory.continuity import decide as preamble
from memory.continuity import decide as scoring
from memory.models import ContinuityRecord, SessionFeatures, Summary
from memory.services.pins import pin_create
from tests.conftest import FIXTURES, read_jsonl

from .test_continuity import NOW, ask, event, run_session
from .test_secrets_end_to_end import database_rows, strings_in

pytestmark = pytest.mark.django_db(transaction=True)

# Rows of kind "identifier" hold a secret only an identifier's position gives away (a
# random run in a session id or a folder name); the identifier tests send them where they
# belong. Here every text goes through free-text fields too.
CASES = [c for c in read_jsonl(FIXTURES / "secrets.jsonl") if c.get("kind") != "identifier"]


def sources(answer: dict[str, Any]) -> list[str]:
    return [s["external_id"] for s in answer["sources"]]


# --- item 0: secrets ------------------------------------------------------------------------


def test_no_secret_of_the_corpus_is_stored_or_echoed_through_continuity(api: APIClient) -> None:
    """Each text of the corpus through every field of the continuity request: the prompt,
    the keywords (whole, and split into words as a client might), the session key, and the
    event it carries; then the answers and the whole database, case-insensitively."""
    run_session(api, "prior", ended_hours_ago=2, prompt="Tune the orders query")
    answers: list[Any] = []
    for i, case in enumerate(CASES):
        name = f"new-{i}"
        run_session(api, name, ended_hours_ago=0, end=False)
        text = case["text"]
        words = [w[:100] for w in text.split() if w.strip()][:150]
        carried = event("prompt", name, 0, 50 + i, text=text, session_key=f"k-{i}")
        body = {
            "source": "generic",
            "session_id": name,
            "prompt": text,
            "session_key": text[:300],
            "event": carried,
        }
        response = api.post("/api/v1/continuity", body, format="json")
        assert response.status_code == 200, response.content
        answers.append(response.json())
        # A keywords-only request asks for the start (a separate record of its own).
        keyed = api.post(
            "/api/v1/continuity",
            {"source": "generic", "session_id": name, "keywords": [text[:100], *words]},
            format="json",
        )
        assert keyed.status_code == 200, keyed.content
        answers.append(keyed.json())
        session = Session.objects.get(external_id=name)
        listed = api.get(f"/api/v1/sessions/{session.pk}/continuity")
        assert listed.status_code == 200
        answers.append(listed.json())

    secrets = [s.lower() for case in CASES for s in case["secrets"]]
    served = [t.lower() for t in strings_in(answers)]
    leaks = [s for s in secrets for t in served if s in t]
    assert leaks == []
    stored = [(table, t.lower()) for table, row in database_rows() for t in strings_in(row)]
    leaks = [f"{table}: {s}" for s in secrets for table, t in stored if s in t]
    assert leaks == []
    # The keywords kept what was not secret.
    assert any("aws" in " ".join(a.get("keywords", [])) for a in answers if isinstance(a, dict))


def test_redaction_markers_never_become_keywords_or_hot_topics(api: APIClient) -> None:
    run_session(
        api,
        "leaky",
        ended_hours_ago=1,
        prompt="Deploy with AKIAYS7BUZSBKMUIV3NR and password=Sup3rS3cretPw! then check logs",
    )
    topics = SessionFeatures.objects.get(session__external_id="leaky").hot_topics
    assert not {"redacted", "aws_access_key", "password_assignment"} & set(topics)
    assert "deploy" in topics
    run_session(api, "now", ended_hours_ago=0, end=False)
    answer = ask(api, "now", prompt="token ghp_76dEyTzAeKOmXRrvftva9AW7hipTgadDZFlR deploy")
    assert "redacted" not in answer["keywords"] and "github_token" not in answer["keywords"]
    assert "deploy" in answer["keywords"]
    assert "redacted" not in answer["preamble"].lower().split("hot topics:")[-1]


# --- item 2: finished work is never handed back as to-do -----------------------------------


def test_a_later_turn_supersedes_an_earlier_intention(api: APIClient) -> None:
    events = [
        event("session_start", "pr", 3, 0, cwd="/src/pr"),
        event("prompt", "pr", 2.9, 1, text="Prepare the release PR for the exporter"),
        event(
            "turn_end",
            "pr",
            2.8,
            2,
            final_message="Tests pass.",
            reasoning="The exporter works. Remaining: update the changelog. TODO: task-6001",
        ),
        event(
            "turn_end",
            "pr",
            2.5,
            3,
            final_message="Changelog updated and PR #148 opened. task-6001 done.",
        ),
        event("session_end", "pr", 2.4, 4, reason="new"),
    ]
    assert api.post("/api/v1/events", events, format="json").status_code == 200
    summary = Summary.objects.get(session__external_id="pr")
    assert "changelog" not in summary.next_steps.lower()
    assert "task-6001" not in summary.next_steps
    features = SessionFeatures.objects.get(session__external_id="pr")
    assert features.pending_tasks == []

    run_session(api, "next", ended_hours_ago=0, end=False)
    preamble = ask(api, "next")["preamble"]
    assert "Changelog updated" in preamble
    assert "Remaining" not in preamble and "TODO" not in preamble


def test_work_a_newer_session_finished_is_neither_quoted_nor_scored(api: APIClient) -> None:
    run_session(
        api,
        "old",
        ended_hours_ago=30,
        prompt="Migrate the invoices table",
        final="Schema drafted. Next: backfill the invoices archive. TODO: task-7301 backfill.",
    )
    before = SessionFeatures.objects.get(session__external_id="old")
    assert [t["id"] for t in before.pending_tasks if t["id"].startswith("task-")] == ["task-7301"]
    run_session(
        api,
        "newer",
        ended_hours_ago=5,
        prompt="Finish the invoices work",
        final="Backfilled the invoices archive; task-7301 done and merged.",
    )
    run_session(api, "now", ended_hours_ago=0, end=False)
    answer = ask(api, "now", prompt="invoices archive backfill")
    record = ContinuityRecord.objects.get(session__external_id="now")
    old = next(c for c in record.candidates if c["external_id"] == "old")
    assert old["pending_finished_later"] >= 1
    assert old["parts"]["pending"] == 0  # the finished task adds nothing to its score
    preamble = answer["preamble"]
    assert "[task-7301]" not in preamble and "TODO: task-7301" not in preamble
    assert "Next: backfill" not in preamble and "task-7301 done" in preamble


# --- item 3: pins at the end ---------------------------------------------------------------


def test_a_pending_task_held_in_a_pin_survives_the_end(api: APIClient) -> None:
    session = run_session(api, "pinned", ended_hours_ago=2, prompt="Rework auth", end=False)
    pin_create(
        agent=session.agent,
        label="task-8701 rotate the signing keys",
        content="keys one to three rotated, the rest left",
        origin_session=session,
    )
    api.post("/api/v1/events", [event("session_end", "pinned", 1, 9, reason="new")], format="json")
    features = SessionFeatures.objects.get(session=session)
    assert [t["id"] for t in features.pending_tasks] == ["task-8701"]
    run_session(api, "after", ended_hours_ago=0, end=False)
    assert "task-8701" in ask(api, "after")["preamble"]


# --- item 4: relevance ---------------------------------------------------------------------


def test_an_old_exact_match_beats_a_fresh_irrelevant_session(api: APIClient) -> None:
    run_session(
        api,
        "websocket",
        ended_hours_ago=6 * 24,
        prompt="Fix the websocket reconnect backoff in the notifier",
        final="Reconnect backoff now jittered. Next: cover the notifier heartbeat.",
    )
    run_session(
        api,
        "css",
        ended_hours_ago=1,
        prompt="Polish the pricing page styles",
        final="Pricing page spacing fixed. TODO: task-9901 dark mode colours.",
    )
    run_session(api, "now", ended_hours_ago=0, end=False)
    start = ask(api, "now")  # no prompt yet: recency decides
    assert sources(start)[0] == "css"
    answer = ask(api, "now", prompt="the notifier websocket keeps dropping: check the backoff")
    assert answer["stage"] == "prompt"
    assert sources(answer) == ["websocket"]
    assert "EARLIER SESSION (6d ago" in answer["preamble"]
    assert "task-9901" not in answer["preamble"]
    parts = answer["sources"][0]
    assert parts["relevance"] >= 0.45 and "websocket" in parts["matched_terms"]
    css = next(
        c
        for c in ContinuityRecord.objects.get(stage="prompt").candidates
        if c["external_id"] == "css"
    )
    assert css["relevance"] == 0 and css["score"] < parts["score"]
    assert sum(parts["parts"].values()) == pytest.approx(parts["score"], abs=0.001)
    # Asked again: the same answer.
    assert ask(api, "now", prompt="something else entirely")["record_id"] == answer["record_id"]


def test_the_first_prompt_does_not_repeat_the_start(api: APIClient) -> None:
    run_session(api, "only", ended_hours_ago=2, prompt="Tune the orders query", final="Done.")
    run_session(api, "now", ended_hours_ago=0, end=False)
    assert sources(ask(api, "now")) == ["only"]
    again = ask(api, "now", prompt="orders query plan again")
    assert sources(again) == ["only"] and again["preamble"] == ""


# --- item 5: the request starts the session ------------------------------------------------


def test_continuity_carrying_the_start_event_starts_the_session(api: APIClient) -> None:
    run_session(api, "before", ended_hours_ago=2, prompt="Tune the orders query")
    start = event("session_start", "late", 0.01, 0, cwd="/src/late")
    answer = ask(api, "late", event=start, prompt="orders query")
    assert sources(answer) == ["before"]
    session = Session.objects.get(external_id="late")
    assert session.has_start and session.agent.external_id == "research"
    # The start itself, arriving later, is a duplicate: one event, one session.
    late = api.post("/api/v1/events", [start], format="json").json()
    assert late["results"][0]["status"] == "duplicate"
    assert LifecycleEvent.objects.filter(session=session).count() == 1


def test_a_carried_event_of_another_session_changes_nothing(api: APIClient) -> None:
    response = api.post(
        "/api/v1/continuity",
        {"session_id": "mine", "event": event("session_start", "other", 0.01, 0)},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "event"
    bad = api.post(
        "/api/v1/continuity",
        {"session_id": "mine", "event": {"kind": "session_start"}},
        format="json",
    )
    assert bad.status_code == 400
    assert not Session.objects.exists() and not LifecycleEvent.objects.exists()


# --- item 6: order and naming --------------------------------------------------------------


def test_sources_are_in_score_order_and_last_session_is_the_newest(api: APIClient) -> None:
    run_session(
        api,
        "busy",
        ended_hours_ago=10,
        prompt="TODO: task-1 a. TODO: task-2 b. TODO: task-3 c. TODO: task-4 d.",
    )
    run_session(api, "fresh", ended_hours_ago=1, prompt="Read the docs")
    run_session(api, "now", ended_hours_ago=0, end=False)
    answer = ask(api, "now")
    scores = [s["score"] for s in answer["sources"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 2
    assert sources(answer)[0] == "busy"
    assert "LAST SESSION" not in answer["preamble"]
    assert "EARLIER SESSION (10h ago" in answer["preamble"]


def test_score_parts_add_up() -> None:
    prior = scoring.Prior(pk=None, external_id="x", ended_at=NOW)  # type: ignore[arg-type]
    features = scoring.Features(["a", "b"], 2, pending_tasks=[{"id": "task-1"}, {"id": "n"}])
    c = scoring.score_session(
        prior, features, {"a"}, NOW, relevance=0.5, finished_later=frozenset({"task-1"})
    )
    entry = c.as_dict()
    assert entry["pending_tasks"] == 1 and entry["pending_finished_later"] == 1
    assert sum(entry["parts"].values()) == pytest.approx(entry["score"], abs=0.001)


@pytest.mark.parametrize(
    ("step", "later"),
    [
        ("Remaining: update the changelog", ["Changelog updated and PR #148 opened."]),
        ("Next: add tests for the parser", ["Fixed the parser crash."]),
        ("TODO: task-6001 wire it", ["Shipped it: task-6001 done."]),
        ("TODO: task-6001 wire it", ["task-6002 done."]),
        ("write the rollout runbook for the flags", ["Rollout runbook for the flags written."]),
        ("invalidate entries on price changes", ["Stale cache headers removed."]),
        ("mention the change in RELEASE_NOTES.md", ["Release notes updated and pushed."]),
        ("mention the change in RELEASE_NOTES.md", ["Changes added and pushed."]),
        ("Document the webhook setup", ["Added webhook signature checks."]),
        ("add a metric for replayed events", ["Replayed events get a 200."]),
        ("update the changelog", ["CHANGELOG_ENTRIES updated."]),
    ],
)
def test_the_indexed_evidence_answers_as_the_plain_rule(step: str, later: list[str]) -> None:
    from memory import features

    facts = features.completion_facts(features.completion_sentences(later))
    evidence = preamble.Evidence()
    evidence.add(facts)
    plain = features.superseded(step, facts)
    assert evidence.covers(step, evidence.count) == plain
    assert evidence.covers(step, 0) is False  # none of them is newer
