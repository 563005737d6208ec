"""The admin for staff who are not superusers: every model's list, change pages, foreign
key choices and team filters show only the teams they belong to. Superusers see all."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from lifecycle.models import Agent, LifecycleEvent, Session
from memory.models import LlmUsage, TaskFailure
from sessionhub.models import ApiToken, Membership, Team
from sessionhub.services import api_token_create
from tests.factories import (
    AgentFactory,
    ContinuityRecordFactory,
    MembershipFactory,
    PinFactory,
    UserFactory,
    session_with_story,
)

pytestmark = pytest.mark.django_db

PROJECT_APPS = {"sessionhub", "lifecycle", "memory"}


def _world(team: Team, other_team: Team) -> dict[str, Any]:
    made: dict[str, Any] = {}
    for which, t in (("mine", team), ("theirs", other_team)):
        agent = AgentFactory(team=t, external_id=f"{which}-agent", name=f"{which}-agent")
        session = session_with_story(t, agent=agent, external_id=f"{which}-session")
        PinFactory(agent=agent, label=f"{which}-pin", origin_session=session)
        ContinuityRecordFactory(session=session)
        api_token_create(team=t, name=f"{which}-token", scopes=["ingest"])
        LlmUsage.objects.create(team=t, day=session.started_at.date(), tokens=1, calls=1)
        MembershipFactory(team=t, user=UserFactory(username=f"{which}-user"))
        made[which] = session
    TaskFailure.objects.create(task_name="theirs-task", task_id="t-1", exception="boom")
    return made


@pytest.fixture
def staff(team: Team) -> Any:
    user = UserFactory(username="staffer", is_staff=True, is_superuser=False)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label__in=PROJECT_APPS | {"admin"})
    )
    MembershipFactory(team=team, user=user)
    return user


@pytest.fixture
def staff_client(staff: Any) -> Client:
    client = Client()
    client.force_login(staff)
    return client


def _project_admins() -> list[tuple[Any, Any]]:
    return [
        (model, model_admin)
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in PROJECT_APPS
    ]


def test_staff_see_only_their_teams_objects(
    staff_client: Client, team: Team, other_team: Team
) -> None:
    world = _world(team, other_team)
    admins = _project_admins()
    assert {m for m, _ in admins} >= {Team, Membership, ApiToken, Agent, Session, LifecycleEvent}
    for model, _ in admins:
        opts = model._meta
        changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        page = staff_client.get(changelist)
        assert page.status_code == 200, changelist
        html = page.content.decode()
        assert "theirs-" not in html and other_team.slug not in html, changelist
        shown = page.context["cl"].result_list
        for obj in shown:
            assert _team_of(obj) == team.pk, (changelist, obj)
        # Their objects cannot be opened by id either.
        for obj in model._default_manager.all():
            if _team_of(obj) in (team.pk,):
                continue
            change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
            answer = staff_client.get(change, follow=True)
            assert "theirs-" not in answer.content.decode(), change
            assert answer.redirect_chain and answer.redirect_chain[-1][0] == "/admin/", change
    # Their own objects are there.
    mine = staff_client.get(reverse("admin:lifecycle_session_changelist")).content.decode()
    assert world["mine"].external_id in mine


def _team_of(obj: Any) -> int | None:
    if isinstance(obj, Team):
        return obj.pk
    return getattr(obj, "team_id", None)


def test_foreign_key_choices_and_filters_are_their_teams(
    staff_client: Client, team: Team, other_team: Team
) -> None:
    _world(team, other_team)
    form = staff_client.get(reverse("admin:sessionhub_apitoken_add"))
    assert form.status_code == 200
    choices = {str(pk) for pk, _ in form.context["adminform"].form.fields["team"].choices if pk}
    assert choices == {str(team.pk)}
    # A forged choice of their team is refused and nothing is made.
    staff_client.post(
        reverse("admin:sessionhub_apitoken_add"),
        {"team": other_team.pk, "name": "sneaky", "scopes": ["read"]},
    )
    assert not ApiToken.objects.filter(name="sneaky").exists()
    # Team filters list only their teams.
    page = staff_client.get(reverse("admin:lifecycle_session_changelist")).content.decode()
    assert other_team.name not in page and other_team.slug not in page
    # They cannot add a team.
    assert staff_client.get(reverse("admin:sessionhub_team_add")).status_code == 403


def test_audit_log_and_task_failures(
    staff: Any, staff_client: Client, team: Team, other_team: Team
):
    world = _world(team, other_team)
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    for user, session in ((root, world["theirs"]), (staff, world["mine"])):
        LogEntry.objects.log_actions(
            user_id=user.pk, queryset=[session], action_flag=CHANGE, change_message="seen"
        )
    log = staff_client.get(reverse("admin:admin_logentry_changelist"))
    assert [e.user_id for e in log.context["cl"].result_list] == [staff.pk]
    failures = staff_client.get(reverse("admin:memory_taskfailure_changelist"))
    assert list(failures.context["cl"].result_list) == []


def test_superusers_see_every_team(team: Team, other_team: Team) -> None:
    _world(team, other_team)
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(root)
    page = client.get(reverse("admin:lifecycle_session_changelist")).content.decode()
    assert "mine-session" in page and "theirs-session" in page
    assert apps.get_model("memory", "TaskFailure").objects.count() == 1
    failures = client.get(reverse("admin:memory_taskfailure_changelist"))
    assert len(failures.context["cl"].result_list) == 1
