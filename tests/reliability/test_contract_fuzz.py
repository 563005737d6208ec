"""Contract fuzzing: Schemathesis generates requests from SessionHub's own OpenAPI schema
(/api/schema) for every operation, valid and invalid, with a good token and without one,
and sends them in-process to the real WSGI application.

What must hold for every response: never a 5xx; the status is one the schema documents;
the body matches the schema of that status; the Content-Type is the documented one; an
error is the one error shape ``{"message", "code", "extra"}``; a secured operation
refuses a request without a valid token.

Set ``SESSIONHUB_FUZZ_RANDOM=1`` to explore new inputs instead of the fixed seed CI uses.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from lifecycle import services
from lifecycle.models import Agent, Session
from memory.services.pins import pin_create
from sessionhub.models import Team
from tests.conftest import claude_code_hooks

pytestmark = pytest.mark.django_db

# Examples per operation, generation mode and caller; 17 operations put the total well
# past 2,000 requests (the checks send a few more of their own).
EXAMPLES_WITH_TOKEN = 60
EXAMPLES_WITHOUT_TOKEN = 20
MIN_REQUESTS = 2000

# The ingest operations take any JSON object by design (gateways add fields over time),
# so "schema-valid" says nothing about whether an event is acceptable.
FREE_FORM_BODIES = {
    "events_ingest",
    "hooks_claude_code",
    "hooks_openclaw",
    "hooks_codex",
    "hooks_gemini_cli",
}


class CountingApp:
    """The WSGI application, counting the requests it serves."""

    def __init__(self) -> None:
        self.app = get_wsgi_application()
        self.calls: Counter[str] = Counter()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        self.calls[environ["REQUEST_METHOD"]] += 1
        # Each request in its own savepoint: in production every request has its own
        # transaction, so a statement PostgreSQL refuses must not spoil the next request
        # of this test's one transaction.
        savepoint = connection.savepoint()
        try:
            return list(self.app(environ, start_response))
        finally:
            try:
                connection.savepoint_commit(savepoint)
            except DatabaseError:
                connection.savepoint_rollback(savepoint)


@pytest.fixture
def wsgi_app() -> Iterator[CountingApp]:
    """Django's handler closes the connection after each request; inside the test's
    transaction it must not (Django's test client disconnects the same signals)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield CountingApp()
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.fixture
def known_ids(team: Team) -> dict[str, Any]:
    """Real objects of the caller's team, so generated requests also reach past the 404."""
    lines = claude_code_hooks("basic")
    services.events_ingest(
        team=team, bodies=lines, adapter=lambda body, now: _claude_adapter(body, now)
    )
    session = Session.objects.get(team=team, external_id=lines[0]["session_id"])
    agent = Agent.objects.get(pk=session.agent_id)
    pins = [
        pin_create(agent=agent, label=f"pin {i}", content="keep this", priority="normal")
        for i in range(3)
    ]
    return {"session_id": str(session.pk), "agent_id": str(agent.pk), "pin_id": pins[0].pk}


def _claude_adapter(body: Any, now: Any) -> Any:
    from lifecycle.adapters import claude_code

    return claude_code.adapt(body, gateway="fuzz", now=now)


@schemathesis.check
def one_error_shape(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every API error is JSON ``{"message": str, "code": str, "extra": object}``."""
    if response.status_code < 400:
        return None
    try:
        body = json.loads(response.content)
    except ValueError as exc:
        raise AssertionError(
            f"{response.status_code} is not JSON: {response.content[:200]!r}"
        ) from exc
    assert isinstance(body, dict) and set(body) == {"message", "code", "extra"}, body
    assert isinstance(body["message"], str) and body["message"], body
    assert isinstance(body["code"], str) and body["code"], body
    assert isinstance(body["extra"], dict), body
    if response.status_code in (429, 503):
        retry = next(v[0] for k, v in response.headers.items() if k.lower() == "retry-after")
        assert int(retry) >= 1
    return True


# The JSON content rules of sessionhub.parsers, documented in the API description: a
# schema-valid body can still break them (the schema cannot say "no integer past 64 bits").
CONTENT_RULES = {"number_out_of_range", "nul_character", "invalid_unicode", "too_deep"}


def _error_code(response: Any) -> str:
    try:
        return str(json.loads(response.content).get("code", ""))
    except (ValueError, AttributeError):
        return ""


class Findings:
    """Failures found by the checks; schema-valid bodies refused by a documented content
    rule are counted apart (the schema cannot express those rules)."""

    def __init__(self) -> None:
        self.failures: dict[tuple[str, ...], str] = {}
        self.pending: Counter[str] = Counter()
        self.statuses: Counter[int] = Counter()

    def record(self, label: str, case: Any, response: Any, failure: BaseException) -> None:
        name = type(failure).__name__
        status = response.status_code
        if name == "RejectedPositiveData" and status == 400:
            code = _error_code(response)
            if code in CONTENT_RULES:
                self.pending[f"refused by content rule {code}"] += 1
                return
        key = (label, name, str(status))
        if key not in self.failures:
            curl = case.as_curl_command()
            self.failures[key] = (
                f"{failure}\n  request: {curl[:600]}\n  answer: {status} " + (response.text[:300])
            )

    def report(self) -> str:
        return "\n\n".join(f"{' | '.join(k)}\n{v}" for k, v in self.failures.items())


def fuzz(
    wsgi_app: CountingApp,
    known_ids: dict[str, Any],
    headers: dict[str, str],
    examples: int,
) -> Findings:
    schema = schemathesis.openapi.from_wsgi("/api/schema", wsgi_app)
    # Valid data is valid for SessionHub too: no NUL characters (PostgreSQL text cannot
    # hold them, the API refuses them everywhere by contract).
    schema.config.generation.update(allow_x00=False)
    findings = Findings()
    derandomize = not os.environ.get("SESSIONHUB_FUZZ_RANDOM")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 17, [op.label for op in operations]
    for operation in operations:
        path_names = {p.name for p in operation.path_parameters}
        fixed = {name: known_ids[name] for name in path_names if name in known_ids}
        excluded = [negative_data_rejection]
        if operation.definition.raw.get("operationId") in FREE_FORM_BODIES:
            excluded.append(positive_data_acceptance)
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(generation_mode=mode)
            if fixed:
                strategy = st.one_of(
                    strategy, operation.as_strategy(generation_mode=mode, path_parameters=fixed)
                )

            _fuzz_one(operation, strategy, excluded, headers, examples, derandomize, findings)
    return findings


def _fuzz_one(
    operation: Any,
    strategy: Any,
    excluded: list[Any],
    headers: dict[str, str],
    examples: int,
    derandomize: bool,
    findings: Findings,
) -> None:
    @hypothesis_settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=derandomize,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        response = case.call(headers=headers)
        findings.statuses[response.status_code] += 1
        try:
            case.validate_response(
                response,
                headers=headers,
                excluded_checks=excluded,
                additional_checks=[one_error_shape],
            )
        except* Exception as group:  # noqa: BLE001 - every check's failure is recorded
            for failure in _leaves(group):
                findings.record(operation.label, case, response, failure)

    run()


def _leaves(group: BaseException) -> Iterator[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        for inner in group.exceptions:
            yield from _leaves(inner)
    else:
        yield group


def _summary(title: str, wsgi_app: CountingApp, findings: Findings) -> str:
    total = sum(wsgi_app.calls.values())
    lines = [
        f"{title}: {total} requests fuzzed ({dict(wsgi_app.calls)}), "
        f"statuses {dict(sorted(findings.statuses.items()))}",
    ]
    if findings.pending:
        lines.append(
            f"  refused by content rules (see docs/reliability.md): {dict(findings.pending)}"
        )
    return "\n".join(lines)


FUZZ_TOTALS: Counter[str] = Counter()


def test_fuzz_every_operation_with_a_token(
    wsgi_app: CountingApp, known_ids: dict[str, Any], token: str
) -> None:
    started = timezone.now()
    findings = fuzz(wsgi_app, known_ids, {"Authorization": f"Bearer {token}"}, EXAMPLES_WITH_TOKEN)
    print(_summary("with a token", wsgi_app, findings), f"in {timezone.now() - started}")
    FUZZ_TOTALS["with_token"] = sum(wsgi_app.calls.values())
    assert not findings.failures, findings.report()
    assert not any(status >= 500 for status in findings.statuses)


def test_fuzz_every_operation_without_a_valid_token(
    wsgi_app: CountingApp, known_ids: dict[str, Any]
) -> None:
    findings = fuzz(wsgi_app, known_ids, {}, EXAMPLES_WITHOUT_TOKEN)
    print(_summary("without a valid token", wsgi_app, findings))
    FUZZ_TOTALS["without_token"] = sum(wsgi_app.calls.values())
    assert not findings.failures, findings.report()
    # Nothing but the schema itself is open: every generated request was refused.
    assert set(findings.statuses) <= {401, 404}, findings.statuses
    assert not any(status >= 500 for status in findings.statuses)


def test_fuzz_made_enough_requests() -> None:
    """Runs after the two above (file order): the suite's total is the figure we publish."""
    total = sum(FUZZ_TOTALS.values())
    if len(FUZZ_TOTALS) < 2:
        pytest.skip("run the whole module to count its requests")
    print(f"contract fuzzing: {total} requests in all")
    assert total >= MIN_REQUESTS


def test_schema_documents_the_error_statuses(client: Any) -> None:
    document = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert {"401", "403", "429", "503"} <= codes, (method, path, codes)
            if "{" in path:
                assert "404" in codes, (method, path, codes)
    ingest = document["paths"]["/api/v1/events"]["post"]["responses"]
    assert {"400", "413", "415"} <= set(ingest)
    assert "ApiError" in document["components"]["schemas"]


@pytest.mark.parametrize("debug", [False, True])
def test_unrouted_api_paths_answer_json(settings: Any, debug: bool) -> None:
    """With DEBUG on too (Django's own 404 page would be HTML), and for a POST without a
    CSRF token (a gateway has none)."""
    from django.test import Client

    settings.DEBUG = debug
    client = Client(enforce_csrf_checks=True)
    for path in ("/api/v1/pins/not-a-number", "/api/v1/nothing-here", "/api/v2/events"):
        for response in (client.get(path), client.post(path, {}, content_type="application/json")):
            assert response.status_code == 404
            assert response.json()["code"] == "not_found"


def test_the_404_handler_itself(rf: Any) -> None:
    """The handler the urlconf names: JSON under /api/, Django's page elsewhere."""
    from sessionhub.errors import not_found

    api = not_found(rf.get("/api/v1/pins/x"))
    assert api.status_code == 404 and json.loads(api.content)["code"] == "not_found"
    page = not_found(rf.get("/no/such/page"))
    assert page.status_code == 404 and "json" not in page["Content-Type"]
