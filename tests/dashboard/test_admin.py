"""The admin: every model's pages render; the event log, continuity records and the
audit log are read-only; the session actions say what they did and leave LogEntry rows."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import reverse

from lifecycle.models import EventKind, LifecycleEvent, Session, SessionStatus
from memory.models import ContinuityRecord, Summary
from sessionhub.models import ApiToken, Team
from sessionhub.text.redaction import RULES_VERSION
from tests.factories import (
    AgentFactory,
    ContinuityRecordFactory,
    EventFactory,
    PinFactory,
    SessionFactory,
    session_with_story,
)

pytestmark = pytest.mark.django_db
CHANGELIST = reverse("admin:lifecycle_session_changelist")


@pytest.fixture
def story(team: Team, make_token: Any) -> dict[str, Any]:
    make_token(team)
    source = session_with_story(team, external_id="source-session")
    PinFactory(agent=source.agent, label="keep the API stable", origin_session=source)
    target = SessionFactory(
        team=team,
        agent=AgentFactory(team=team),
        external_id="target-session",
        status=SessionStatus.ACTIVE,
    )
    EventFactory(session=target, kind=EventKind.SESSION_START)
    ContinuityRecordFactory(session=target)
    return {"source": source, "target": target}


def log_of(obj: Any) -> list[str]:
    entries = LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(type(obj)), object_id=str(obj.pk)
    ).order_by("id")
    return [e.change_message for e in entries]


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_every_model_page_renders(admin_client: Client, story: dict[str, Any]) -> None:
    LogEntry.objects.log_actions(
        user_id=admin_client.session["_auth_user_id"],
        queryset=[story["source"]],
        action_flag=CHANGE,
        change_message="seen",
    )
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        assert admin_client.get(changelist).status_code == 200, changelist
        assert admin_client.get(changelist, {"q": "x"}).status_code == 200, changelist
        obj = model._default_manager.first()
        if obj is not None:
            change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
            assert admin_client.get(change).status_code == 200, change
        if model_admin.date_hierarchy:
            assert admin_client.get(changelist, {"o": "1"}).status_code == 200


def test_the_logs_and_records_are_read_only(admin_client: Client, story: dict[str, Any]) -> None:
    event = LifecycleEvent.objects.first()
    record = ContinuityRecord.objects.first()
    for name, pk in (
        ("lifecycle_lifecycleevent", event.pk),
        ("memory_continuityrecord", record.pk),
    ):
        assert admin_client.get(reverse(f"admin:{name}_add")).status_code == 403
        assert admin_client.get(reverse(f"admin:{name}_delete", args=[pk])).status_code == 403
        page = admin_client.get(reverse(f"admin:{name}_change", args=[pk])).content.decode()
        assert 'type="submit" value="Save"' not in page
    assert admin_client.get(reverse("admin:admin_logentry_add")).status_code == 403


def run(client: Client, action: str, sessions: list[Session], **extra: Any) -> Any:
    data = {"action": action, "_selected_action": [str(s.pk) for s in sessions], **extra}
    return client.post(CHANGELIST, data, follow=True)


def test_resummarize(
    admin_client: Client, story: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    source = story["source"]
    Summary.objects.filter(session=source).update(request="stale")
    with django_capture_on_commit_callbacks(execute=True):
        response = run(admin_client, "resummarize", [source, story["target"]], index=0)
    # Queued, not done inside the request (an LLM may be slow); tasks run in-process
    # after commit here, as in the embedded default.
    assert "Queued a summary rebuild for 2 session(s)" in messages_of(response)[0]
    assert Summary.objects.get(session=source).request == "Fix the flaky invoice export"
    assert log_of(source) == ["Re-summarize queued"]
    assert log_of(story["target"]) == ["Re-summarize queued"]


def test_export_json(admin_client: Client, story: dict[str, Any]) -> None:
    source = story["source"]
    response = admin_client.post(
        CHANGELIST, {"action": "export_json", "_selected_action": [str(source.pk)], "index": 0}
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="session-{source.pk}.json"'
    document = json.loads(response.content)
    assert [s["id"] for s in document["sessions"]] == [str(source.pk)]
    assert len(document["sessions"][0]["events"]) == 5
    assert log_of(source) == ["Exported as JSON"]

    both = admin_client.post(
        CHANGELIST,
        {
            "action": "export_json",
            "_selected_action": [str(source.pk), str(story["target"].pk)],
            "index": 0,
        },
    )
    assert len(json.loads(both.content)) == 2


def test_reredact(
    admin_client: Client, story: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    for model in apps.get_models():
        if any(f.name == "redaction_version" for f in model._meta.fields):
            model.objects.update(redaction_version=RULES_VERSION)
    LifecycleEvent.objects.filter(session=story["source"]).update(redaction_version=0)
    with django_capture_on_commit_callbacks(execute=True):
        response = run(admin_client, "reredact", [story["source"]], index=0)
    [message] = messages_of(response)
    assert message.startswith("Queued re-redaction of 1 session(s) under rules v")
    old = LifecycleEvent.objects.filter(redaction_version__lt=RULES_VERSION)
    assert not old.exists()  # the task ran after commit: the 5 events are redacted again
    assert log_of(story["source"])[0].startswith("Re-redaction queued")


def test_reredact_touches_only_the_selected_sessions(
    admin_client: Client, story: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    source, target = story["source"], story["target"]
    LifecycleEvent.objects.update(redaction_version=0)
    with django_capture_on_commit_callbacks(execute=True):
        run(admin_client, "reredact", [target], index=0)
    assert not LifecycleEvent.objects.filter(session=target, redaction_version=0).exists()
    assert LifecycleEvent.objects.filter(session=source, redaction_version=0).count() == 5


def test_continue_from_asks_for_the_target_then_records_it(
    admin_client: Client, story: dict[str, Any]
) -> None:
    source, target = story["source"], story["target"]
    ask = run(admin_client, "continue_from", [source], index=0)
    body = ask.content.decode()
    assert "The session you choose will inherit from" in body
    assert f'<option value="{target.pk}">' in body
    assert f'<option value="{source.pk}">' not in body
    assert "at its next prompt" in body  # what a continue does

    # The target is another agent's session: the admin says what will happen and asks.
    asked = run(admin_client, "continue_from", [source], apply="1", target=str(target.pk))
    warning = asked.content.decode()
    assert "This continue crosses agents" in warning and "Tick the box to confirm" in warning
    assert not ContinuityRecord.objects.filter(session=target, trigger="manual").exists()

    done = run(
        admin_client, "continue_from", [source], apply="1", target=str(target.pk), confirm="on"
    )
    [message] = messages_of(done)
    assert "handed to the session at its next prompt" in message
    assert f"Session {target} now continues from {source}" in message
    assert "1 pin(s) inherited" in message
    record = ContinuityRecord.objects.get(session=target, trigger="manual")
    assert list(record.sources.all()) == [source]
    assert record.requested_by_user is not None
    assert record.inherited_pins[0]["label"] == "keep the API stable"
    source.refresh_from_db()
    assert source.continued_by_id == target.pk
    assert log_of(target) == [
        f"Continued from session {source} (continuity record {record.pk}; 1 pin(s) inherited)"
    ]
    assert log_of(source) == [f"Continued into session {target} (continuity record {record.pk})"]

    # The log is visible in the admin.
    entries = admin_client.get(reverse("admin:admin_logentry_changelist")).content.decode()
    assert "Continued from session" in entries and "Continued into session" in entries


def test_continue_by_external_id_and_its_refusals(
    admin_client: Client, story: dict[str, Any], other_team: Team
) -> None:
    source, target = story["source"], story["target"]
    foreign = SessionFactory(team=other_team, agent=AgentFactory(team=other_team))
    refused = run(admin_client, "continue_from", [source], apply="1", target_id=str(foreign.pk))
    assert "No session" in refused.content.decode()
    assert not ContinuityRecord.objects.filter(session=foreign).exists()
    itself = run(admin_client, "continue_from", [source], apply="1", target_id=str(source.pk))
    assert "cannot continue itself" in itself.content.decode()
    two = run(admin_client, "continue_from", [source, target], index=0)
    assert "Select exactly one session to continue from." in messages_of(two)

    ok = run(
        admin_client,
        "continue_from",
        [source],
        apply="1",
        target_id="target-session",
        confirm="on",
    )
    assert "now continues from" in messages_of(ok)[0]

    # An ended session is neither offered nor taken by its id.
    ended = SessionFactory(team=source.team, agent=source.agent, external_id="ended-one")
    ask = run(admin_client, "continue_from", [source], index=0).content.decode()
    assert f'<option value="{ended.pk}">' not in ask
    refused = run(admin_client, "continue_from", [source], apply="1", target_id="ended-one")
    assert "has ended: a continue is handed to a running session" in refused.content.decode()
    assert not ContinuityRecord.objects.filter(session=ended).exists()


def test_the_continue_form_names_sessions_by_first_prompt_and_agent(
    admin_client: Client, story: dict[str, Any]
) -> None:
    source, target = story["source"], story["target"]
    EventFactory(session=target, kind=EventKind.PROMPT, facts={"text": "Speed up the ledger"})
    body = run(admin_client, "continue_from", [source], index=0).content.decode()
    label = f"“Speed up the ledger” · {target.agent} · Active"
    assert f'<option value="{target.pk}">{label}' in body


def test_revoking_tokens_is_logged(admin_client: Client, story: dict[str, Any]) -> None:
    token = ApiToken.objects.get()
    response = admin_client.post(
        reverse("admin:sessionhub_apitoken_changelist"),
        {"action": "revoke", "_selected_action": [str(token.pk)], "index": 0},
        follow=True,
    )
    assert "Revoked 1 token(s)." in messages_of(response)
    assert log_of(token) == ["Revoked"]
