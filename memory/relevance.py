"""Relevance of a new session's first prompt to prior sessions, beyond the reference formula.

The reference score (recency, Jaccard overlap of keywords with hot topics, pending tasks)
cannot tell a six-day-old session about exactly this work from an hour-old session about
something else: recency outweighs a partial topic overlap. With the prompt in hand,
SessionHub also asks, for each candidate, which of the prompt's terms its own words
(summary request, learned, completed and next steps, hot topics) contain:

- on PostgreSQL with full-text search: one statement, ``to_tsvector('english', doc) @@
  plainto_tsquery('english', term)`` per term, so "migrations" finds "migrate";
- elsewhere (SQLite, the embedded default) the same question in Python, with a crude
  suffix-stripping stem on both sides.

``relevance`` is the share of the prompt's terms a candidate matches, each term weighted
by how rare it is among the candidates (``log(1 + n / df)``): a word every session
shares says little. A term no candidate has keeps the weight of a term only one has, so a
prompt about new work stays weakly relevant to everything.

The summary sections come with the candidates (``scoring.candidates_with_summaries``);
continuity also takes the later sessions' reports of finished work from them.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from . import features as feature_lib
from .models import SessionFeatures, Summary
from .scoring import SUMMARY_SECTIONS

MAX_TERMS = 24


def prompt_terms(text: str) -> list[str]:
    """The prompt's distinct keywords (already redacted text), in order, at most 24."""
    return list(feature_lib.keywords([text]))[:MAX_TERMS]


@dataclass(slots=True)
class SessionText:
    """What continuity reads of a candidate's words: summary parts and matched terms."""

    request: str = ""
    completed: str = ""
    next_steps: str = ""
    learned: str = ""
    matched: set[str] = field(default_factory=set)


def _document(row: dict[str, str], topics: list[str]) -> str:
    return " ".join([*(row.get(c) or "" for c in SUMMARY_SECTIONS), " ".join(topics)])


def session_texts(
    pks: Sequence[uuid.UUID],
    terms: Sequence[str],
    topics: dict[uuid.UUID, list[str]],
    summaries: dict[uuid.UUID, dict[str, str]],
) -> dict[uuid.UUID, SessionText]:
    """Every candidate's summary text and which prompt terms it matches, from the
    ``summaries`` read with the candidates; on PostgreSQL with a prompt, one full-text
    statement instead."""
    if not pks:
        return {}
    if terms and connection.vendor == "postgresql":
        return _postgres(pks, terms)
    texts: dict[uuid.UUID, SessionText] = {}
    stems = {term: feature_lib.stem(term) for term in terms}
    for pk in pks:
        row: dict[str, Any] = summaries.get(pk, {})
        text = SessionText(
            request=row.get("request") or "",
            completed=row.get("completed") or "",
            next_steps=row.get("next_steps") or "",
            learned=row.get("learned") or "",
        )
        if terms:
            words = feature_lib.content_stems(_document(row, topics.get(pk, [])))
            words |= {w.lower() for w in topics.get(pk, [])}
            text.matched = {term for term in terms if stems[term] in words or term in words}
        texts[pk] = text
    return texts


def _postgres(pks: Sequence[uuid.UUID], terms: Sequence[str]) -> dict[uuid.UUID, SessionText]:
    """Full text in PostgreSQL: the summary columns and the hot topics as one document."""
    summary = Summary._meta.db_table
    features = SessionFeatures._meta.db_table
    document = " || ' ' || ".join(f"coalesce(s.{c}, '')" for c in SUMMARY_SECTIONS)
    document += " || ' ' || coalesce(f.hot_topics::text, '')"
    tests = ", ".join(["d.v @@ plainto_tsquery('english', %s)"] * len(terms))
    sql = (
        f"SELECT d.id, {', '.join('d.' + c for c in SUMMARY_SECTIONS)}, ARRAY[{tests}] "  # noqa: S608 - constants only
        f"FROM (SELECT c.id, {', '.join('s.' + c for c in SUMMARY_SECTIONS)}, "
        f"to_tsvector('english', {document}) AS v "
        f"FROM unnest(%s::uuid[]) AS c(id) "
        f"LEFT JOIN {summary} s ON s.session_id = c.id "
        f"LEFT JOIN {features} f ON f.session_id = c.id) AS d"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*terms, list(pks)])
        rows = cursor.fetchall()
    texts = {}
    for pk, request, learned, completed, next_steps, hits in rows:
        texts[pk] = SessionText(
            request=request or "",
            learned=learned or "",
            completed=completed or "",
            next_steps=next_steps or "",
            matched={term for term, hit in zip(terms, hits, strict=True) if hit},
        )
    return texts


def relevance_scores(
    terms: Sequence[str], matched: dict[uuid.UUID, set[str]]
) -> dict[uuid.UUID, float]:
    """Each candidate's share of the prompt's terms, weighted by how rare each term is."""
    if not terms or not matched:
        return {pk: 0.0 for pk in matched}
    n = len(matched)
    df = {term: sum(1 for hits in matched.values() if term in hits) for term in terms}
    weight = {term: math.log(1 + n / max(1, df[term])) for term in terms}
    total = sum(weight.values())
    return {pk: sum(weight[t] for t in hits) / total for pk, hits in matched.items()}
