"""Continuity goes one way: read → decide → render → record.

Each stage of ``memory.continuity`` imports only the stages before it (and their data),
the deciding and rendering stages import nothing that queries (no ``django.db``, no
models at run time, no reading code, not even through the memory modules they use), and
run on plain data they make no query at all.
"""

from __future__ import annotations

import ast
import importlib.util
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory.continuity import decide, render
from memory.continuity.data import Features, Prior, knobs
from memory.models import Pin
from memory.relevance import SessionText
from tests.source import parse

ROOT = Path(__file__).resolve().parents[2]
STAGES = ["data", "read", "decide", "render", "record"]
PACKAGE = "memory.continuity"
NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)

# What may never be reached from the pure stages: the database, the models, the stages
# and memory modules that query.
QUERYING = (
    "django.db",
    "memory.models",
    "memory.continuity.read",
    "memory.continuity.record",
    "memory.relevance",
    "memory.statements",
    "memory.selectors",
    "memory.services",
    "lifecycle",
    "sessionhub.models",
    "sessionhub.db",
)


def _path(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, module
    return Path(spec.origin)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(module: str) -> set[str]:
    """The modules ``module`` imports when it runs (imports for type checkers only, under
    ``if TYPE_CHECKING:``, left out), as absolute names; ``from x import y`` counts as
    ``x.y`` too, since ``y`` may be a module."""
    path = _path(module)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _type_checking(node):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    origin = ".".join([*base, node.module] if node.module else base)
                else:
                    origin = node.module or ""
                found.add(origin)
                found.update(f"{origin}.{alias.name}" for alias in node.names)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    visit(inner)

    visit(parse(path.read_text()).body)
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def reached(module: str) -> set[str]:
    """Every project module ``module`` imports at run time, directly or through others."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        for name in runtime_imports(current):
            if name in seen:
                continue
            seen.add(name)
            project = name.split(".")[0] in {"memory", "lifecycle", "sessionhub", "dashboard"}
            if project and _is_module(name) and (ROOT / name.split(".")[0]).exists():
                todo.append(name)
    return seen


def _hits(names: set[str], forbidden: tuple[str, ...]) -> set[str]:
    return {n for n in names if any(n == f or n.startswith(f + ".") for f in forbidden)}


def test_each_stage_imports_only_the_stages_before_it() -> None:
    for index, stage in enumerate(STAGES):
        imported = runtime_imports(f"{PACKAGE}.{stage}")
        later = tuple(f"{PACKAGE}.{s}" for s in STAGES[index + 1 :])
        assert not _hits(imported, later), (stage, _hits(imported, later))
        assert not _hits(imported, ("memory.services",)), stage


def test_read_imports_none_of_the_later_stages() -> None:
    imported = runtime_imports(f"{PACKAGE}.read")
    assert not _hits(imported, tuple(f"{PACKAGE}.{s}" for s in ("decide", "render", "record")))


def test_decide_and_render_reach_no_query_code() -> None:
    for stage in ("data", "decide", "render"):
        found = _hits(reached(f"{PACKAGE}.{stage}"), QUERYING)
        assert not found, (stage, found)


def test_render_imports_neither_read_nor_record() -> None:
    imported = runtime_imports(f"{PACKAGE}.render")
    assert not _hits(imported, (f"{PACKAGE}.read", f"{PACKAGE}.record"))


def test_the_request_runs_the_stages_in_order() -> None:
    """The orchestration names the stages, and no stage names it."""
    imported = runtime_imports("memory.services.continuity")
    assert {f"{PACKAGE}.{s}" for s in ("read", "decide", "render", "record")} <= imported
    for stage in STAGES:
        assert not _hits(reached(f"{PACKAGE}.{stage}"), ("memory.services", "memory.apis"))


def test_the_check_sees_a_forbidden_import() -> None:
    """The checks above can fail: a module that imports the database is caught."""
    assert _hits(runtime_imports(f"{PACKAGE}.read"), ("django.db",))
    assert _hits(reached("memory.services.continuity"), QUERYING)


# --- decide and render make no query -------------------------------------------------------


def _prior(hours: float, continues: uuid.UUID | None = None) -> tuple[Prior, Features]:
    prior = Prior(uuid.uuid4(), f"s-{hours}", NOW - timedelta(hours=hours), None, continues)
    features = Features(
        ["orders", "billing"],
        2,
        active_projects=["git.example.com/acme/shop"],
        pending_tasks=[
            {"id": f"task-{int(hours)}1", "text": f"TODO: task-{int(hours)}1 add the index"},
            {"id": "list#1", "text": "Backfill the orders table"},
        ],
        done_tasks=["task-51"] if hours < 5 else [],
    )
    return prior, features


def _pin(label: str, priority: str, hours: float, **links: Any) -> Pin:
    return Pin(
        agent_id=links.pop("agent_id"),
        label=label,
        content=f"{label} matters for orders",
        priority=priority,
        pinned_at=NOW - timedelta(hours=hours),
        pinned_by="alice",
        **links,
    )


@pytest.mark.django_db
def test_decide_and_render_on_data_make_no_query(django_assert_num_queries: Any) -> None:
    rows = [_prior(h) for h in (2, 5, 30, 90)]
    summaries = {
        prior.pk: {
            "request": f"Tune the orders query {n}",
            "learned": "",
            "completed": "Added the orders index. task-51 is done.",
            "next_steps": "Backfill the orders table.",
            "outcome": "finished",
            "outcome_detail": "",
        }
        for n, (prior, _) in enumerate(rows)
    }
    texts = {
        prior.pk: SessionText(
            request=s["request"], completed=s["completed"], next_steps=s["next_steps"]
        )
        for prior, s in ((p, summaries[p.pk]) for p, _ in rows)
    }
    texts[rows[2][0].pk].matched = {"orders", "index"}
    agent, source = uuid.uuid4(), rows[0][0].pk
    pins = [
        _pin("orders table", "critical", 3, agent_id=uuid.uuid4(), origin_session_id=source),
        _pin("billing flag", "normal", 4, agent_id=uuid.uuid4(), origin_session_id=source),
        _pin("deploy rule", "normal", 200, agent_id=agent),
    ]
    k = knobs()
    with django_assert_num_queries(0):
        prepared = decide.prepare(rows, summaries)
        terms = decide.prompt_terms("the orders index again")
        wanted = decide.current_keywords(None, "the orders index again")
        scoring = decide.score_priors(
            rows,
            prepared,
            texts,
            wanted=wanted,
            terms=terms,
            prompt="the orders index again",
            now=NOW,
            k=k,
        )
        decision = decide.decide(scoring.scored, prompt_known=True, k=k)
        inherit = decide.pins_to_inherit(
            pins, agent_id=agent, source_pk=source, now=NOW, cap=10, k=k
        )
        curated = decide.pins_for_preamble(
            decide.curated_among(pins, agent), keywords=wanted, prompt="orders"
        )
        preamble = render.render_preamble(
            decision.chosen,
            scoring.scored,
            inherit,
            scoring.texts,
            scoring.later,
            curated=[p for p, _ in curated],
            k=k,
        )
    assert decision.chosen and preamble.startswith("[SESSION CONTINUITY")
    assert [p.label for p in inherit] == ["orders table", "billing flag"]
    assert "PINNED BY YOUR TEAM" in preamble and "deploy rule" in preamble
    assert "WORKING MEMORY RESTORED: 2 pins inherited" in preamble


# --- the carried event is adapted once ------------------------------------------------------


@pytest.mark.django_db
def test_the_carried_event_is_adapted_once_and_stored(
    api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lifecycle.models import LifecycleEvent, Session
    from lifecycle.services import adapter_for as real
    from memory.services import continuity as service

    calls: list[str] = []

    def counting(source: str, token: Any) -> Any:
        adapt = real(source, token)

        def adapter(body: Any, now: datetime) -> Any:
            calls.append(str(body.get("event_id")))
            return adapt(body, now)

        return adapter

    monkeypatch.setattr(service, "adapter_for", counting)
    start = {
        "event_id": "carried-0",
        "kind": "session_start",
        "agent_id": "research",
        "session_id": "carried",
    }
    body = {"source": "generic", "session_id": "carried", "event": start}
    response = api.post("/api/v1/continuity", body, format="json")
    assert response.status_code == 200, response.content
    assert calls == ["carried-0"]
    session = Session.objects.get(external_id="carried")
    assert LifecycleEvent.objects.filter(session=session, event_id="carried-0").count() == 1
    # Delivered again (the start's own post after a retry): a duplicate, adapted once more.
    again = api.post("/api/v1/continuity", body, format="json")
    assert again.status_code == 200 and calls == ["carried-0", "carried-0"]
    assert LifecycleEvent.objects.filter(session=session, event_id="carried-0").count() == 1


# --- the knobs ---------------------------------------------------------------------------------


def test_the_knobs_are_the_settings_typed_none_left_out() -> None:
    """Every key of ``SESSIONHUB["CONTINUITY"]`` is a field of the knobs and the other way
    round (a setting added without its field would be dropped silently), with its value;
    the knobs cannot be changed once made."""
    from dataclasses import FrozenInstanceError, fields

    from django.conf import settings

    from memory.continuity.data import Knobs

    values = settings.SESSIONHUB["CONTINUITY"]
    assert {f.name.upper() for f in fields(Knobs)} == set(values)
    k = knobs()
    assert {key: getattr(k, key.lower()) for key in values} == values
    with pytest.raises(FrozenInstanceError):
        k.threshold = 0.0  # type: ignore[misc]
