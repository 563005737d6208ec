"""Relevance on PostgreSQL: the lexemes kept per process give the answers PostgreSQL's own
``to_tsvector('english', doc) @@ plainto_tsquery('english', term)`` gives, and a document
is turned into lexemes once."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifecycle.models import Session
from memory import relevance
from memory.models import SessionFeatures

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the lexemes are PostgreSQL's text search"
    ),
]

# Words that stem together or apart, stop words, hyphens, paths, dotted names, case, digits.
WORDS = [
    "migrations", "migrate", "migrating", "the", "only", "read-only", "Read", "x-ray-3",
    "foo.bar/baz_qux", "invoices", "invoice", "billing's", "PostgreSQL", "postgres", "a",
    "and", "retries", "retry", "café", "naïve", "2026-11-26", "v1.2.3", "TODO:", "task-12",
    "don't", "websocket", "web-socket", "backoff", "back-off", "it's", "ÜBER", "über",
]  # fmt: skip


def postgres_says(document: str, term: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT to_tsvector('english', %s) @@ plainto_tsquery('english', %s)",
            [document, term],
        )
        return bool(cursor.fetchone()[0])


def matched(documents: dict[uuid.UUID, dict[str, str]], terms: list[str]) -> dict[uuid.UUID, set]:
    texts = relevance.session_texts(list(documents), terms, {}, documents)
    return {pk: text.matched for pk, text in texts.items()}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    document=st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join),
    terms=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True),
)
def test_a_term_matches_a_document_exactly_when_postgres_says_so(
    document: str, terms: list[str]
) -> None:
    pk = uuid.uuid4()
    found = matched({pk: {"request": document}}, terms)[pk]
    assert found == {term for term in terms if postgres_says(document, term)}


def test_a_document_is_turned_into_lexemes_once_and_again_when_it_changes() -> None:
    relevance._LEXEMES.clear()
    first, second = uuid.uuid4(), uuid.uuid4()
    documents = {
        first: {"request": "Run the invoices migrations", "completed": "Backfill done."},
        second: {"request": "Polish the pricing page"},
    }
    with CaptureQueriesContext(connection) as queries:
        assert matched(documents, ["migrate", "pricing"]) == {
            first: {"migrate"},
            second: {"pricing"},
        }
    assert len(queries) == 1  # the terms and both documents in one statement

    with CaptureQueriesContext(connection) as queries:
        assert matched(documents, ["migrate", "pricing"])[first] == {"migrate"}
    assert len(queries) == 0  # all seen before

    # A rewritten summary is a new text: its own lexemes, never the old ones'.
    documents[first] = {"request": "Tune the pricing query"}
    with CaptureQueriesContext(connection) as queries:
        assert matched(documents, ["migrate", "pricing"])[first] == {"pricing"}
    assert len(queries) == 1


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relevance, "_LEXEMES_MAX", 5)
    relevance._LEXEMES.clear()
    documents = {uuid.uuid4(): {"request": f"session {n} about billing"} for n in range(3)}
    matched(documents, ["billing"])
    assert len(relevance._LEXEMES) == 4  # three documents and the term
    more = {uuid.uuid4(): {"request": f"another {n} about billing"} for n in range(2)}
    assert all(m == {"billing"} for m in matched(more, ["billing"]).values())
    assert len(relevance._LEXEMES) == 2  # full: emptied, then the two new documents


# --- the stored documents ------------------------------------------------------------------

TEXTS = [
    "Run the invoices migrations on src/ledger/migrate.py",
    "Don't retry the web-socket back-off; read-only PostgreSQL replica",
    "x-ray-3 café naïve ÜBER v1.2.3 task-12 foo.bar/baz_qux key=value C:\\tmp\\file",
]


def test_the_stored_documents_hold_the_lexemes_of_the_texts(team: Any) -> None:
    """What PostgreSQL keeps in the generated columns is what the request-time path turns
    the same texts into: continuity's document and the MCP search's (paths split)."""
    from memory import search
    from memory.continuity.data import SUMMARY_SECTIONS
    from tests.factories import SessionFactory, SummaryFactory

    for n, text in enumerate(TEXTS):
        session = SessionFactory(agent__team=team)
        topics = ["Ledger.Migrate", "web-socket", "invoices", f"topic{n}"]
        summary = SummaryFactory(
            session=session,
            request=text,
            learned=TEXTS[n - 1],
            investigated="the investigated part: billing/schema.sql",
            final_message="final words about src/app.py",
        )
        SessionFeatures.objects.create(team=team, session=session, hot_topics=topics)
        sections = {c: getattr(summary, c) for c in SUMMARY_SECTIONS}
        relevance._LEXEMES.clear()
        expected_text = relevance._document(sections, topics)
        stored = relevance.stored_lexemes({session.pk: (sections, json.dumps(topics))})
        assert stored == {session.pk: relevance._lexemes([expected_text])[expected_text]}

        row = search._rows(Session.objects.filter(pk=session.pk))[session.pk]
        document = search._document(row)
        assert row.lexemes == relevance._lexemes([document])[document]


def test_a_candidate_changed_since_its_window_was_read_is_matched_from_its_text(
    team: Any,
) -> None:
    from memory.continuity.data import SUMMARY_SECTIONS
    from tests.factories import SessionFactory, SummaryFactory

    session = SessionFactory(agent__team=team)
    summary = SummaryFactory(session=session, request="Tune the pricing query")
    sections = {c: getattr(summary, c) for c in SUMMARY_SECTIONS}
    assert set(relevance.stored_lexemes({session.pk: (sections, None)})) == {session.pk}
    # Read before the rewrite: the stored lexemes are newer than the window's texts.
    old = {**sections, "request": "Run the invoices migrations"}
    assert relevance.stored_lexemes({session.pk: (old, None)}) == {}
    assert relevance.stored_lexemes({session.pk: (sections, "[]")}) == {}  # topics now
    texts = relevance.session_texts([session.pk], ["migrate"], {}, {session.pk: old}, {})
    assert texts[session.pk].matched == {"migrate"}
