"""The shape of the code: which module may use what of which.

- lifecycle stays below memory in the import graph (the read side lives in memory).
- A private name (a leading underscore) stays in its package: a module of sessionhub,
  lifecycle, memory or dashboard imports ``_name`` from another module, or reads
  ``module._name`` of a module it imported, only where that module's package holds the
  importer too (the same package, or one of its subpackages). What two packages share is
  public API and is named so.
- The dashboard's presenters shape rows they are handed: the queries are the selectors'.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dashboard import presenters, selectors
from lifecycle.models import EventKind
from sessionhub.models import Team
from tests.factories import (
    AgentFactory,
    ContinuityRecordFactory,
    EventFactory,
    PinFactory,
    SessionFactory,
    session_with_story,
)
from tests.source import parse

ROOT = Path(__file__).resolve().parents[1]
APPS = ("sessionhub", "lifecycle", "memory", "dashboard")


def _modules(app: str) -> list[Path]:
    return [p for p in sorted((ROOT / app).rglob("*.py")) if "migrations" not in p.parts]


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _is_package(dotted: str) -> bool:
    return (ROOT.joinpath(*dotted.split(".")) / "__init__.py").is_file()


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass(frozen=True)
class PrivateUse:
    """``user`` (line ``line``) uses ``name``, a private name of module ``owner``."""

    user: str
    line: int
    owner: str
    name: str

    def __str__(self) -> str:
        return f"{self.user}:{self.line} uses {self.owner}.{self.name}"


def private_uses(module: str, is_package: bool, source: str) -> list[PrivateUse]:
    """Every private name of another module that this module imports or reads as an
    attribute of a module it imported."""
    package = module if is_package else module.rpartition(".")[0]
    tree = parse(source)
    modules: dict[str, str] = {}  # local name -> the module it is bound to
    uses: list[PrivateUse] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                owner = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                owner = node.module or ""
            for alias in node.names:
                if _is_module(f"{owner}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{owner}.{alias.name}"
                if _is_private(alias.name):
                    uses.append(PrivateUse(module, node.lineno, owner, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    modules[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    modules[top] = top
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain: list[str] = []
        base: ast.expr = node
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in modules:
            continue
        owner = modules[base.id]
        chain.reverse()
        for i, attr in enumerate(chain):
            if _is_module(f"{owner}.{attr}"):
                owner = f"{owner}.{attr}"
                continue
            if i == len(chain) - 1 and _is_private(attr):
                uses.append(PrivateUse(module, node.lineno, owner, attr))
            break
    return uses


def crosses_a_package(use: PrivateUse) -> bool:
    """Whether the user stands outside the package of the module the name belongs to."""
    if use.owner.split(".")[0] not in APPS:
        return False  # a library's private name is that library's business
    home = use.owner if _is_package(use.owner) else use.owner.rpartition(".")[0]
    user_package = use.user if _is_package(use.user) else use.user.rpartition(".")[0]
    return not (user_package == home or user_package.startswith(home + "."))


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def test_no_private_name_crosses_a_package() -> None:
    crossing = [
        str(use)
        for app in APPS
        for path in _modules(app)
        for use in private_uses(*_module_name(path), path.read_text())
        if crosses_a_package(use)
    ]
    assert crossing == []


@pytest.mark.parametrize(
    ("module", "source", "crossing"),
    [
        # Another app's private function, imported or read off its module.
        ("memory.relevance", "from lifecycle.services import _fold\n", True),
        ("memory.relevance", "from lifecycle import services\nservices._fold()\n", True),
        ("memory.relevance", "import lifecycle.services as s\ns._fold()\n", True),
        ("memory.relevance", "import lifecycle.services\nlifecycle.services._fold()\n", True),
        # A subpackage's private name, from its parent package.
        ("sessionhub.logs", "from sessionhub.text.redaction.rules import _RULES\n", True),
        # Within one package, and from a package into its subpackages: allowed.
        ("sessionhub.text.redaction.engine", "from .rules import _RULES\n", False),
        ("lifecycle.ingest.quick", "from lifecycle.services import _fold\n", False),
        # Public names, and a library's private ones, are not this test's concern.
        ("memory.relevance", "from lifecycle.services import events_ingest\n", False),
        ("memory.relevance", "import os\nos._exit(0)\n", False),
    ],
)
def test_the_scan_tells_a_crossing_private_name(module: str, source: str, crossing: bool) -> None:
    uses = private_uses(module, False, source)
    assert any(crosses_a_package(use) for use in uses) is crossing


def test_lifecycle_imports_nothing_of_memory() -> None:
    """The read side lives in memory: lifecycle stays below it in the import graph."""
    found = []
    for path in sorted((ROOT / "lifecycle").rglob("*.py")):
        for node in ast.walk(parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "memory"]
    assert found == []


def test_the_dashboards_presenters_import_no_query_tools() -> None:
    source = (ROOT / "dashboard" / "presenters.py").read_text()
    found = []
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("django.db"):
            found.append(f"line {node.lineno}: from {node.module} import ...")
        if isinstance(node, ast.Attribute) and node.attr in {"objects", "_default_manager"}:
            found.append(f"line {node.lineno}: .{node.attr}")
    assert found == []


@pytest.mark.django_db
def test_the_dashboards_presenters_shape_their_rows_without_a_query(
    team: Team, django_assert_num_queries: Any
) -> None:
    agent = AgentFactory(team=team)
    session = session_with_story(team, agent=agent)
    PinFactory(agent=agent)
    ContinuityRecordFactory(
        session=session, candidates=[{"session_id": str(session.pk), "used": True}]
    )
    later = SessionFactory(agent=agent, previous_session=session)
    EventFactory(session=later, kind=EventKind.PROMPT, facts={"text": "go on"})
    overview_rows = selectors.overview_rows(team)
    session_rows = selectors.session_rows(team, session)
    with django_assert_num_queries(0):
        overview = presenters.overview(overview_rows)
        detail = presenters.session_detail(session_rows)
    assert overview.counts["sessions"] == 2
    assert detail.items and detail.pins and detail.records
    assert [s.pk for s in detail.following] == [later.pk]
