"""A tool call's input read by the database (``tool_input_sql``) is the input ``tool_io``
finds in the whole payload, for every gateway, on PostgreSQL and on SQLite; and the JSON
helpers under it give a value's own JSON text whatever its type."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import NotSupportedError
from django.db.models import TextField
from django.db.models.functions import Cast
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifecycle.adapters import tool_input_sql, tool_io
from lifecycle.models import EventKind, LifecycleEvent, Source
from memory.pipeline import _decoded
from sessionhub.db.json import JSONAt, JSONHas
from tests.factories import EventFactory, SessionFactory

pytestmark = pytest.mark.django_db

SOURCES = [Source.CLAUDE_CODE, Source.OPENCLAW, Source.CODEX, Source.GEMINI_CLI, Source.GENERIC]


def as_read(text: str | None) -> Any:
    """A column's JSON text as the memory pipeline decodes it."""
    return None if text is None else _decoded(text)


def same(a: Any, b: Any) -> bool:
    """Equal as JSON: True is not 1, and 1 is not 1.0."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def both_reads(source: str, payloads: list[Any]) -> list[tuple[Any, Any]]:
    """Per payload, stored as a tool use of ``source``: (tool_io's input of the whole
    payload as read back, the input read by ``tool_input_sql``)."""
    session = SessionFactory(source=source)
    events = [
        EventFactory(session=session, kind=EventKind.TOOL_USE, payload=payload)
        for payload in payloads
    ]
    rows = dict(
        (pk, (whole, narrow))
        for pk, whole, narrow in LifecycleEvent.objects.filter(
            pk__in=[e.pk for e in events]
        ).values_list("pk", Cast("payload", output_field=TextField()), tool_input_sql())
    )
    return [(tool_io(source, as_read(rows[e.pk][0]))[0], as_read(rows[e.pk][1])) for e in events]


CASES: list[tuple[str, Any]] = [
    (Source.CLAUDE_CODE, {"tool_input": {"command": "ls -la"}, "tool_response": {"stdout": "x"}}),
    (Source.CLAUDE_CODE, {"tool_input": {"file_path": "/a/b.py", "old_string": "é ☃ 中文"}}),
    (Source.CLAUDE_CODE, {"tool_input": None, "error": "boom"}),
    (Source.CLAUDE_CODE, {"tool_response": "no input at all"}),
    (Source.CLAUDE_CODE, {"tool_input": "a bare string"}),
    (Source.CLAUDE_CODE, {"tool_input": 0.30000000000000004}),
    (Source.CLAUDE_CODE, {"tool_input": True}),
    (Source.CLAUDE_CODE, {"tool_input": [1, "two", {"three": [None, False]}]}),
    (Source.CLAUDE_CODE, {"tool_input": 'quotes " and \\ backslashes \n newlines'}),
    (Source.CODEX, {"tool_input": {"command": ["bash", "-lc", "pytest"]}}),
    (Source.GEMINI_CLI, {"tool_input": {"path": "a"}, "tool_response": {"llmContent": "x"}}),
    (Source.OPENCLAW, {"event": {"params": {"path": "a"}, "result": "ok"}, "ctx": {}}),
    (Source.OPENCLAW, {"event": {"result": "no params"}}),
    (Source.OPENCLAW, {"event": None}),
    (Source.OPENCLAW, {"event": ["not", "an", "object"]}),
    (Source.OPENCLAW, {"params": {"at": "the wrong level"}}),
    (Source.GENERIC, {"input": "q", "output": "r"}),
    (Source.GENERIC, {"params": {"q": 1}, "result": "r"}),
    (Source.GENERIC, {"input": None, "params": "input is present, though null"}),
    (Source.GENERIC, {"input": {"both": 1}, "params": {"input": "wins"}}),
    (Source.GENERIC, {}),
    (Source.GENERIC, ["a payload", "that is a list"]),
    (Source.GENERIC, "a payload that is a string"),
]


@pytest.mark.parametrize(("source", "payload"), CASES)
def test_the_input_read_by_the_database_is_tool_ios(source: str, payload: Any) -> None:
    [(whole, narrow)] = both_reads(source, [payload])
    assert same(narrow, whole), (narrow, whole)


# Payloads near each gateway's shape: the keys every path goes through, and others.
_KEYS = st.sampled_from(["tool_input", "input", "params", "event", "result", "x", "中文", "a.b"])
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    # PostgreSQL's jsonb holds no NUL character and no lone surrogate (ingestion refuses both).
    | st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=20)
)
_JSON = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    source=st.sampled_from(SOURCES),
    payloads=st.lists(st.dictionaries(_KEYS, _JSON, max_size=4), min_size=1, max_size=5),
)
def test_any_payload_gives_the_same_input_both_ways(source: str, payloads: list[Any]) -> None:
    for whole, narrow in both_reads(source, payloads):
        assert same(narrow, whole), (narrow, whole)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("plain",), {"k": [1, 2.5, None, True]}),
        (("a.b",), "a dot is part of the key"),
        (("dash-key",), 7),
        (("space key", "inner"), "nested"),
        (("text",), "ünïcödé ☃ 中文"),
        (("null",), None),
        (("missing",), None),
    ],
)
def test_json_at_and_json_has_read_any_key(path: tuple[str, ...], value: Any) -> None:
    payload: dict[str, Any] = {"a": 1, "space key": {"inner": "nested"}}
    if path != ("missing",) and len(path) == 1:
        payload[path[0]] = value
    event = EventFactory(kind=EventKind.TOOL_USE, payload=payload)
    text, present = (
        LifecycleEvent.objects.filter(pk=event.pk)
        .values_list(JSONAt("payload", path), JSONHas("payload", path))
        .get()
    )
    assert same(as_read(text), value)
    assert bool(present) is (path != ("missing",))


def test_a_path_needs_a_key() -> None:
    with pytest.raises(ValueError, match="at least one key"):
        JSONAt("payload", ())


@pytest.mark.parametrize("key", ['q"uote', "back\\slash", "中文", "0", ""])
def test_a_key_both_databases_cannot_read_alike_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match="keys are ASCII"):
        JSONHas("payload", ("event", key))


def test_other_databases_are_told_plainly() -> None:
    with pytest.raises(NotSupportedError, match="PostgreSQL and SQLite"):
        JSONAt("payload", ("a",)).as_sql(compiler=None, connection=None)
