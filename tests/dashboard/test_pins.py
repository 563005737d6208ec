"""Editing an agent's pins from the dashboard: within the cap, unique labels, errors shown
on the form, and every change in the audit log."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.test import Client
from django.urls import reverse

from memory.models import Pin
from sessionhub.models import Team
from tests.factories import AgentFactory, PinFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(team: Team) -> Any:
    return AgentFactory(team=team, name="billing bot")


def add(client: Client, agent: Any, label: str, **extra: str) -> Any:
    data = {
        "new-label": label,
        "new-content": extra.get("content", ""),
        "new-priority": extra.get("priority", "normal"),
    }
    return client.post(reverse("dashboard:agent", args=[agent.pk]), data)


def test_pin_add_edit_and_unpin(member_client: Client, member: Any, agent: Any) -> None:
    response = add(member_client, agent, "deploy window", content="Tuesdays", priority="critical")
    assert response.status_code == 302
    pin = Pin.objects.get(agent=agent)
    assert (pin.label, pin.content, pin.priority) == ("deploy window", "Tuesdays", "critical")

    page = member_client.get(reverse("dashboard:agent", args=[agent.pk])).content.decode()
    assert "deploy window" in page and "1 of 10 active" in page
    assert f'for="id_pin{pin.pk}-label"' in page  # every input has its label

    edit = member_client.post(
        reverse("dashboard:pin-edit", args=[pin.pk]),
        {
            f"pin{pin.pk}-label": "deploy window",
            f"pin{pin.pk}-content": "Wednesdays now",
            f"pin{pin.pk}-priority": "normal",
        },
    )
    assert edit.status_code == 302
    pin.refresh_from_db()
    assert (pin.content, pin.priority) == ("Wednesdays now", "normal")

    assert member_client.post(reverse("dashboard:pin-unpin", args=[pin.pk])).status_code == 302
    pin.refresh_from_db()
    assert pin.unpinned_at is not None

    entries = LogEntry.objects.filter(object_id=str(pin.pk), user=member).order_by("id")
    assert [(e.action_flag, e.change_message) for e in entries] == [
        (ADDITION, "Pinned from the dashboard"),
        (CHANGE, "Changed from the dashboard"),
        (CHANGE, "Unpinned from the dashboard"),
    ]


def test_the_cap_is_shown_as_a_form_error(member_client: Client, agent: Any) -> None:
    for i in range(10):
        PinFactory(agent=agent, label=f"pin {i}")
    page = member_client.get(reverse("dashboard:agent", args=[agent.pk])).content.decode()
    assert "the most it may have" in page
    response = add(member_client, agent, "one too many")
    assert response.status_code == 400
    assert "already has 10 active pins" in response.content.decode()
    assert Pin.objects.filter(agent=agent, unpinned_at__isnull=True).count() == 10


def test_duplicate_labels_and_bad_input_are_form_errors(member_client: Client, agent: Any):
    first = PinFactory(agent=agent, label="alpha")
    second = PinFactory(agent=agent, label="beta")
    dup = add(member_client, agent, "alpha")
    assert dup.status_code == 400 and "already labelled" in dup.content.decode()

    rename = member_client.post(
        reverse("dashboard:pin-edit", args=[second.pk]),
        {f"pin{second.pk}-label": "alpha", f"pin{second.pk}-priority": "normal"},
    )
    assert rename.status_code == 400
    body = rename.content.decode()
    assert "already labelled" in body
    assert "<details open>" in body  # the failing pin's form stays open
    second.refresh_from_db()
    assert second.label == "beta"

    empty = add(member_client, agent, "")
    assert empty.status_code == 400 and "This field is required" in empty.content.decode()
    too_long = add(member_client, agent, "x" * 201)
    assert too_long.status_code == 400
    assert Pin.objects.filter(agent=agent).count() == 2
    assert first.label == "alpha"


def test_editing_an_unpinned_pin_is_refused(member_client: Client, agent: Any) -> None:
    pin = PinFactory(agent=agent, label="gone")
    member_client.post(reverse("dashboard:pin-unpin", args=[pin.pk]))
    response = member_client.post(
        reverse("dashboard:pin-edit", args=[pin.pk]),
        {f"pin{pin.pk}-label": "back", f"pin{pin.pk}-priority": "normal"},
    )
    assert response.status_code == 400
    assert "This pin was unpinned" in response.content.decode()
    pin.refresh_from_db()
    assert pin.label == "gone"


def test_pin_forms_need_post(member_client: Client, agent: Any) -> None:
    pin = PinFactory(agent=agent)
    assert member_client.get(reverse("dashboard:pin-unpin", args=[pin.pk])).status_code == 405
    assert member_client.get(reverse("dashboard:pin-edit", args=[pin.pk])).status_code == 405
