"""Which of a prompt's terms each document holds: continuity's candidates (read at the
first prompt, ``continuity.read``) and the MCP search's sessions (``search``).

The reference score (recency, Jaccard overlap of keywords with hot topics, pending tasks)
cannot tell a six-day-old session about exactly this work from an hour-old session about
something else: recency outweighs a partial topic overlap. With the prompt in hand,
SessionHub also asks, for each candidate, which of the prompt's terms its own words
(summary request, learned, completed and next steps, hot topics) contain:

- on PostgreSQL with its English text search: a term matches when the document has every
  lexeme of the term (what ``to_tsvector('english', doc) @@ plainto_tsquery('english',
  term)`` asks), so "migrations" finds "migrate". A candidate's lexemes are stored with
  its summary and features (their ``continuity_document``, kept by the database as the
  texts change) and read once per window of candidates
  (``stored_lexemes``); only the prompt's terms are turned into lexemes at request time,
  kept per process by text. A document without stored lexemes (a candidate whose rows
  changed since the window was read) is turned into lexemes the same way as the terms;
- elsewhere (SQLite, the embedded default) the same question in Python, with a crude
  suffix-stripping stem on both sides.

What the matches weigh is decided elsewhere (``continuity.decide.relevance_scores``):
each term by how rare it is among the candidates, so a word every session shares says
little. The summary sections come with the candidates (``continuity.read``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import connection

from . import features as feature_lib
from .continuity.data import SUMMARY_SECTIONS


@dataclass(slots=True)
class SessionText:
    """What continuity reads of a candidate's words: summary parts and matched terms."""

    request: str = ""
    completed: str = ""
    next_steps: str = ""
    learned: str = ""
    outcome: str = ""
    outcome_detail: str = ""
    matched: set[str] = field(default_factory=set)


def _document(row: dict[str, str], topics: list[str]) -> str:
    return " ".join([*(row.get(c) or "" for c in SUMMARY_SECTIONS), " ".join(topics)])


def session_texts(
    pks: Sequence[uuid.UUID],
    terms: Sequence[str],
    topics: dict[uuid.UUID, list[str]],
    summaries: dict[uuid.UUID, dict[str, str]],
    stored: dict[uuid.UUID, frozenset[str]] | None = None,
) -> dict[uuid.UUID, SessionText]:
    """Every candidate's summary text, from the ``summaries`` read with the candidates,
    and which prompt terms it matches (on PostgreSQL, by its text search's lexemes:
    ``stored``, a candidate's stored lexemes, where given)."""
    if not pks:
        return {}
    postgres = bool(terms) and connection.vendor == "postgresql"
    stored = (stored or {}) if postgres else {}
    # Words of the Latin scripts, accents and all (``café``, ``ÜBER``), are matched by
    # lexemes as PostgreSQL matches them; CJK terms by their characters.
    cjk = [term for term in terms if feature_lib.has_cjk(term)]
    latin = [term for term in terms if not feature_lib.has_cjk(term)]
    # Only a prompt asks what the documents hold (the start stage has no terms); the text
    # is built where the stored lexemes do not answer, or for CJK terms.
    documents = (
        {
            pk: _document(summaries.get(pk, {}), topics.get(pk, []))
            for pk in pks
            if cjk or pk not in stored
        }
        if terms
        else {}
    )
    unstored = [text for pk, text in documents.items() if pk not in stored]
    lexemes = _lexemes([*latin, *unstored]) if postgres else {}
    texts: dict[uuid.UUID, SessionText] = {}
    stems = {term: feature_lib.stem(term) for term in terms}
    for pk in pks:
        row: dict[str, Any] = summaries.get(pk, {})
        text = SessionText(
            request=row.get("request") or "",
            completed=row.get("completed") or "",
            next_steps=row.get("next_steps") or "",
            learned=row.get("learned") or "",
            outcome=row.get("outcome") or "",
            outcome_detail=row.get("outcome_detail") or "",
        )
        if postgres:
            # plainto_tsquery(term) is the AND of the term's lexemes: the document
            # matches when it has them all (a term of stop words alone matches nothing).
            have = stored[pk] if pk in stored else lexemes[documents[pk]]
            text.matched = {term for term in latin if lexemes[term] and lexemes[term] <= have}
        elif terms:
            words = feature_lib.content_stems(documents[pk])
            words |= {w.lower() for w in topics.get(pk, [])}
            text.matched = {term for term in latin if stems[term] in words or term in words}
        if cjk:
            # The English text search keeps a run of CJK characters as one word: a pair
            # of them is looked for in the text itself, on every database.
            text.matched |= {term for term in cjk if term in documents[pk]}
        texts[pk] = text
    return texts


# The lexemes of a text, by the text: a candidate's document (its summary and hot topics)
# is the same request after request, so it is turned into a tsvector once per process,
# not at every first prompt. Emptied when full.
_LEXEMES: dict[str, frozenset[str]] = {}
_LEXEMES_MAX = 4096


def _lexemes(texts: Sequence[str]) -> dict[str, frozenset[str]]:
    """Each text's lexemes as PostgreSQL's English text search makes them (one statement
    for the texts not seen before in this process, none when all were)."""
    cache = _LEXEMES
    found = {text: cache.get(text) for text in texts}
    missing = list({text for text, lexemes in found.items() if lexemes is None})
    if missing:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT tsvector_to_array(to_tsvector('english', t)) FROM unnest(%s::text[]) "
                "WITH ORDINALITY AS u(t, n) ORDER BY n",
                [missing],
            )
            rows = cursor.fetchall()
        if len(cache) + len(missing) > _LEXEMES_MAX:
            cache.clear()
        for text, (lexemes,) in zip(missing, rows, strict=True):
            found[text] = cache[text] = frozenset(lexemes)
    return cast(dict[str, frozenset[str]], found)


def stored_lexemes(
    expected: dict[uuid.UUID, tuple[dict[str, str] | None, str | None]],
) -> dict[uuid.UUID, frozenset[str]]:
    """PostgreSQL: the stored lexemes of continuity's document of each candidate (its
    summary's and its hot topics'), in one statement by primary key, for the candidates
    whose summary sections and hot topics (JSON text) are still those ``expected`` (None:
    no row); one that changed since is left out, and its text is turned into lexemes."""
    if not expected:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_STORED_SQL, [list(expected)])
        rows = cursor.fetchall()
    found: dict[uuid.UUID, frozenset[str]] = {}
    for pk, summary_id, *rest in rows:
        sections, topics, lexemes = rest[: len(SUMMARY_SECTIONS)], rest[-2], rest[-1]
        summary, hot = expected[pk]
        now = dict(zip(SUMMARY_SECTIONS, sections, strict=True)) if summary_id else None
        was = {c: summary.get(c) for c in SUMMARY_SECTIONS} if summary is not None else None
        if now == was and topics == hot:
            found[pk] = frozenset(lexemes)
    return found


_STORED_SQL = (
    "SELECT s.id, m.id, " + ", ".join(f"m.{c}" for c in SUMMARY_SECTIONS) + ", f.hot_topics::text, "
    "tsvector_to_array(coalesce(m.continuity_document, ''::tsvector) "
    "|| coalesce(f.continuity_document, ''::tsvector)) "
    "FROM lifecycle_session s "
    "LEFT JOIN memory_summary m ON m.session_id = s.id "
    "LEFT JOIN memory_sessionfeatures f ON f.session_id = s.id "
    "WHERE s.id = ANY(%s::uuid[])"
)


def terms_matched(
    documents: dict[Any, str],
    terms: Sequence[str],
    words: dict[Any, set[str]] | None = None,
    stored: dict[Any, frozenset[str]] | None = None,
) -> dict[Any, set[str]]:
    """Which of ``terms`` each document holds, as ``session_texts`` asks it of continuity's
    candidates: by PostgreSQL's English lexemes (every lexeme of the term; a document's
    from ``stored`` where given, else from its text, cached per text), elsewhere by the
    crude stems; ``words`` are exact words a document also has (hot topics)."""
    if not terms or not documents:
        return {key: set() for key in documents}
    extra = words or {}
    found: dict[Any, set[str]] = {}
    if connection.vendor == "postgresql":
        known = stored or {}
        lexemes = _lexemes([*terms, *(text for key, text in documents.items() if key not in known)])
        for key, text in documents.items():
            have = known[key] if key in known else lexemes[text]
            exact = extra.get(key, set())
            found[key] = {
                t for t in terms if (lexemes[t] and lexemes[t] <= have) or t.lower() in exact
            }
        return found
    stems = {term: feature_lib.stem(term) for term in terms}
    for key, text in documents.items():
        have = feature_lib.content_stems(text) | {w.lower() for w in extra.get(key, set())}
        found[key] = {t for t in terms if stems[t] in have or t in have}
    return found
