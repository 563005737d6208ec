"""Pins through the API: list, create, update, unpin; the cap of active pins and unique
labels as clear 409s (also under concurrent requests); other teams see 404; scopes; and
secrets in a pin never stored."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from django.conf import settings
from rest_framework.test import APIClient

from memory.models import Pin
from sessionhub.models import Team
from tests.factories import GenericAgentFactory, LiveSessionFactory, PinFactory

GITHUB_TOKEN = "ghp_76dEyTzAeKOmXRrvftva9AW7hipTgadDZFlR"


def pins_url(agent: Any) -> str:
    return f"/api/v1/agents/{agent.pk}/pins"


def create(api: APIClient, agent: Any, **body: Any) -> Any:
    return api.post(pins_url(agent), body, format="json")


@pytest.fixture
def agent(team: Team) -> Any:
    return GenericAgentFactory(team=team)


@pytest.mark.django_db
class TestPinLifecycle:
    def test_create_list_update_unpin(self, api: APIClient, agent: Any) -> None:
        session = LiveSessionFactory(agent=agent)
        response = create(
            api,
            agent,
            label="deploy freeze",
            content="No deploys until task-88 is merged",
            priority="critical",
            origin_session=str(session.pk),
        )
        assert response.status_code == 201, response.content
        body = response.json()
        pin = Pin.objects.get(pk=body["id"])
        assert (pin.label, pin.content, pin.priority) == (
            "deploy freeze",
            "No deploys until task-88 is merged",
            "critical",
        )
        assert pin.origin_session_id == session.pk
        assert pin.team_id == agent.team_id
        assert body["is_active"] is True
        assert body["origin_session"] == str(session.pk)

        listed = api.get(pins_url(agent)).json()
        assert [p["id"] for p in listed] == [pin.pk]

        response = api.patch(
            f"/api/v1/pins/{pin.pk}",
            {"content": "Deploys allowed again", "priority": "normal"},
            format="json",
        )
        assert response.status_code == 200, response.content
        pin.refresh_from_db()
        assert (pin.label, pin.content, pin.priority) == (
            "deploy freeze",
            "Deploys allowed again",
            "normal",
        )

        response = api.delete(f"/api/v1/pins/{pin.pk}")
        assert response.status_code == 200
        assert response.json()["is_active"] is False
        pin.refresh_from_db()
        unpinned_at = pin.unpinned_at
        assert unpinned_at is not None
        # Unpinned pins leave the default listing but stay for provenance.
        assert api.get(pins_url(agent)).json() == []
        assert [p["id"] for p in api.get(f"{pins_url(agent)}?all=1").json()] == [pin.pk]
        # Unpinning twice is a no-op; an unpinned pin cannot be edited.
        assert api.delete(f"/api/v1/pins/{pin.pk}").status_code == 200
        pin.refresh_from_db()
        assert pin.unpinned_at == unpinned_at
        response = api.patch(f"/api/v1/pins/{pin.pk}", {"content": "x"}, format="json")
        assert response.status_code == 409
        assert response.json()["code"] == "pin_unpinned"

    def test_cap_of_active_pins_is_a_clear_409(self, api: APIClient, agent: Any) -> None:
        cap = settings.SESSIONHUB["MAX_ACTIVE_PINS"]
        assert cap == 10
        ids = [create(api, agent, label=f"pin {i}").json()["id"] for i in range(cap)]
        response = create(api, agent, label="one too many", content="dropped?")
        assert response.status_code == 409
        body = response.json()
        assert body["code"] == "pin_cap_reached"
        assert str(cap) in body["message"]
        assert body["extra"]["cap"] == cap
        # Nothing was stored, and nothing else was pushed out to make room.
        assert not Pin.objects.filter(label="one too many").exists()
        assert set(
            Pin.objects.filter(unpinned_at__isnull=True).values_list("pk", flat=True)
        ) == set(ids)
        # Unpinned pins do not count: after one unpin, one more fits.
        assert api.delete(f"/api/v1/pins/{ids[0]}").status_code == 200
        assert create(api, agent, label="one too many").status_code == 201
        assert create(api, agent, label="and another").status_code == 409

    def test_cap_is_per_agent(self, api: APIClient, agent: Any, team: Team) -> None:
        for i in range(10):
            PinFactory(agent=agent, label=f"pin {i}")
        other = GenericAgentFactory(team=team)
        assert create(api, other, label="pin 0").status_code == 201

    def test_duplicate_label_is_a_409(self, api: APIClient, agent: Any) -> None:
        first = create(api, agent, label="Release plan").json()
        response = create(api, agent, label="Release plan", content="second")
        assert response.status_code == 409
        assert response.json()["code"] == "pin_label_taken"
        assert Pin.objects.filter(label="Release plan").count() == 1
        # Renaming another pin onto the label is refused the same way.
        other = create(api, agent, label="Other").json()
        response = api.patch(
            f"/api/v1/pins/{other['id']}", {"label": "Release plan"}, format="json"
        )
        assert response.status_code == 409
        assert response.json()["code"] == "pin_label_taken"
        assert Pin.objects.get(pk=other["id"]).label == "Other"
        # Once unpinned, the label is free again.
        api.delete(f"/api/v1/pins/{first['id']}")
        assert create(api, agent, label="Release plan").status_code == 201

    @pytest.mark.parametrize(
        "body",
        [
            {"label": ""},
            {"label": "x" * 201},
            {"label": "ok", "priority": "urgent"},
            {"label": "ok", "content": "x" * 4001},
            {"content": "no label"},
        ],
    )
    def test_invalid_input_is_a_400(self, api: APIClient, agent: Any, body: dict) -> None:
        response = create(api, agent, **body)
        assert response.status_code == 400, response.content
        assert response.json()["code"] == "invalid"
        assert not Pin.objects.exists()

    def test_origin_session_must_be_the_agents(
        self, api: APIClient, agent: Any, team: Team
    ) -> None:
        elsewhere = LiveSessionFactory(agent=GenericAgentFactory(team=team))
        response = create(api, agent, label="x", origin_session=str(elsewhere.pk))
        assert response.status_code == 404
        assert not Pin.objects.exists()


@pytest.mark.django_db
class TestOtherTeams:
    def test_another_teams_agent_is_not_found(self, stranger: APIClient, agent: Any) -> None:
        PinFactory(agent=agent, label="ours")
        assert stranger.get(pins_url(agent)).status_code == 404
        response = stranger.post(pins_url(agent), {"label": "theirs"}, format="json")
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"
        assert list(Pin.objects.values_list("label", flat=True)) == ["ours"]

    def test_another_teams_pin_is_not_found(self, stranger: APIClient, agent: Any) -> None:
        pin = PinFactory(agent=agent, label="ours", content="keep")
        assert (
            stranger.patch(
                f"/api/v1/pins/{pin.pk}", {"content": "changed"}, format="json"
            ).status_code
            == 404
        )
        assert stranger.delete(f"/api/v1/pins/{pin.pk}").status_code == 404
        pin.refresh_from_db()
        assert (pin.content, pin.unpinned_at) == ("keep", None)

    def test_unknown_ids_are_not_found(self, api: APIClient) -> None:
        assert api.get("/api/v1/agents/not-a-uuid/pins").status_code == 404
        assert (
            api.get("/api/v1/agents/6f1c1d0e-0000-4000-8000-000000000000/pins").status_code == 404
        )
        assert api.patch("/api/v1/pins/999999", {"content": "x"}, format="json").status_code == 404


@pytest.mark.django_db
def test_read_only_token_cannot_write(
    team: Team, make_token: Any, client_for: Any, agent: Any
) -> None:
    reader = client_for(make_token(team, scopes=("read",), name="reader")[1])
    pin = PinFactory(agent=agent)
    assert reader.get(pins_url(agent)).status_code == 200
    assert reader.post(pins_url(agent), {"label": "x"}, format="json").status_code == 403
    assert (
        reader.patch(f"/api/v1/pins/{pin.pk}", {"content": "x"}, format="json").status_code == 403
    )
    assert reader.delete(f"/api/v1/pins/{pin.pk}").status_code == 403
    assert Pin.objects.get().unpinned_at is None


@pytest.mark.django_db
def test_secrets_in_a_pin_are_redacted(api: APIClient, agent: Any) -> None:
    response = create(
        api, agent, label=f"token {GITHUB_TOKEN}", content=f"push with {GITHUB_TOKEN} please"
    )
    assert response.status_code == 201
    assert GITHUB_TOKEN not in response.content.decode()
    pin = Pin.objects.get()
    assert GITHUB_TOKEN not in pin.label + pin.content
    assert "[REDACTED:" in pin.content and "push with" in pin.content and "please" in pin.content

    response = api.patch(
        f"/api/v1/pins/{pin.pk}",
        {"content": f"AWS AKIA29326ML64LG2TJF8 {GITHUB_TOKEN}"},
        format="json",
    )
    assert response.status_code == 200
    pin.refresh_from_db()
    assert "AKIA29326ML64LG2TJF8" not in pin.content and GITHUB_TOKEN not in pin.content
    assert "AKIA29326ML64LG2TJF8" not in response.content.decode()
    listed = api.get(f"{pins_url(agent)}?all=1").content.decode()
    assert GITHUB_TOKEN not in listed and "AKIA29326ML64LG2TJF8" not in listed


@pytest.mark.django_db(transaction=True)
def test_cap_holds_under_concurrent_requests(live_server: Any, token: str, team: Team) -> None:
    """Twenty simultaneous creates: exactly ten land, the rest are told why."""
    agent = GenericAgentFactory(team=team)
    url = f"{live_server.url}/api/v1/agents/{agent.pk}/pins"

    def post(i: int) -> requests.Response:
        return requests.post(
            url,
            json={"label": f"pin {i % 15}", "content": str(i)},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )

    with ThreadPoolExecutor(max_workers=10) as pool:
        responses = list(pool.map(post, range(20)))
    codes = sorted(r.status_code for r in responses)
    assert codes.count(201) == 10, [r.text for r in responses if r.status_code != 201]
    assert set(codes) == {201, 409}
    assert {r.json()["code"] for r in responses if r.status_code == 409} <= {
        "pin_cap_reached",
        "pin_label_taken",
    }
    active = Pin.objects.filter(agent=agent, unpinned_at__isnull=True)
    assert active.count() == 10
    assert active.values("label").distinct().count() == 10


@pytest.mark.django_db
def test_label_that_grows_when_redacted_still_fits(api: APIClient, agent: Any) -> None:
    """A label at the length limit whose secret becomes a longer marker is stored, not
    refused by the database (which the API would report as a 503 to retry forever)."""
    label = "x" * 180 + " password=hunter2x"
    assert len(label) <= 200
    response = create(api, agent, label=label)
    assert response.status_code == 201, response.content
    pin = Pin.objects.get()
    assert "hunter2x" not in pin.label
    assert len(pin.label) <= 200

    other = create(api, agent, label="short").json()
    response = api.patch(f"/api/v1/pins/{other['id']}", {"label": label + "y"}, format="json")
    assert response.status_code in (200, 409), response.content
    assert "hunter2x" not in Pin.objects.get(pk=other["id"]).label


@pytest.mark.django_db(transaction=True)
def test_concurrent_renames_onto_one_label(live_server: Any, token: str, team: Team) -> None:
    """Ten pins renamed to the same label at once: one wins, the others get a clear 409."""
    agent = GenericAgentFactory(team=team)
    pins = [PinFactory(agent=agent, label=f"pin {i}") for i in range(10)]

    def rename(pin: Pin) -> requests.Response:
        return requests.patch(
            f"{live_server.url}/api/v1/pins/{pin.pk}",
            json={"label": "the one"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )

    with ThreadPoolExecutor(max_workers=10) as pool:
        responses = list(pool.map(rename, pins))
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] + [409] * 9, [r.text for r in responses]
    assert {r.json()["code"] for r in responses if r.status_code == 409} == {"pin_label_taken"}
    assert Pin.objects.filter(agent=agent, label="the one").count() == 1
