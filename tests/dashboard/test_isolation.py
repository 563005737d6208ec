"""A member of one team never sees another team's sessions, agents, pins or continuity
records on any page: another team's object is a 404 (never a 403, never a 200)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from memory.models import Pin
from sessionhub.models import Team
from tests.factories import (
    ContinuityRecordFactory,
    MembershipFactory,
    PinFactory,
    UserFactory,
    session_with_story,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def foreign(other_team: Team) -> dict[str, Any]:
    session = session_with_story(other_team, external_id="globex-secret-session")
    session.agent.name = "globex-agent"
    session.agent.save()
    pin = PinFactory(agent=session.agent, label="globex-pin")
    record = ContinuityRecordFactory(session=session, preamble="GLOBEX PREAMBLE")
    return {"session": session, "pin": pin, "record": record, "agent": session.agent}


def test_another_teams_objects_are_not_found(member_client: Client, foreign: dict[str, Any]):
    session, agent, pin = foreign["session"], foreign["agent"], foreign["pin"]
    for url in (
        reverse("dashboard:session", args=[session.pk]),
        reverse("dashboard:agent", args=[agent.pk]),
        reverse("dashboard:live-session", args=[session.pk]),
    ):
        assert member_client.get(url).status_code == 404, url

    edit = member_client.post(
        reverse("dashboard:pin-edit", args=[pin.pk]),
        {f"pin{pin.pk}-label": "hijacked", f"pin{pin.pk}-priority": "normal"},
    )
    unpin = member_client.post(reverse("dashboard:pin-unpin", args=[pin.pk]))
    create = member_client.post(
        reverse("dashboard:agent", args=[agent.pk]),
        {"new-label": "planted", "new-priority": "normal"},
    )
    assert (edit.status_code, unpin.status_code, create.status_code) == (404, 404, 404)
    pin.refresh_from_db()
    assert pin.label == "globex-pin" and pin.unpinned_at is None
    assert not Pin.objects.filter(label="planted").exists()


def test_lists_search_and_overview_show_only_the_members_teams(
    member_client: Client, team: Team, foreign: dict[str, Any]
) -> None:
    own = session_with_story(team, external_id="acme-session")
    pages = {
        "list": member_client.get(reverse("dashboard:sessions")),
        # Both sessions' final messages mention the changelog.
        "search": member_client.get(reverse("dashboard:sessions"), {"q": "changelog"}),
        "overview": member_client.get(reverse("dashboard:overview")),
        "agents": member_client.get(reverse("dashboard:agents")),
        "own session": member_client.get(reverse("dashboard:session", args=[own.pk])),
        "own agent": member_client.get(reverse("dashboard:agent", args=[own.agent_id])),
    }
    for name, response in pages.items():
        body = response.content.decode()
        assert response.status_code == 200, name
        for secret in ("globex-secret-session", "globex-agent", "globex-pin", "GLOBEX PREAMBLE"):
            assert secret not in body, (name, secret)
    assert "acme-session" in pages["search"].content.decode()
    assert pages["overview"].context["data"].counts["sessions"] == 1

    live = member_client.get(
        reverse("dashboard:live-sessions"), {"ids": f"{own.pk},{foreign['session'].pk}"}
    ).json()
    assert [s["id"] for s in live["sessions"]] == [str(own.pk)]


def test_a_record_pointing_at_another_teams_session_does_not_reveal_it(
    member_client: Client, team: Team, foreign: dict[str, Any]
) -> None:
    own = session_with_story(team)
    stray = foreign["session"]
    record = ContinuityRecordFactory(
        session=own,
        candidates=[{"session_id": str(stray.pk), "external_id": "", "score": 0.9, "used": True}],
    )
    record.sources.add(stray)
    body = member_client.get(reverse("dashboard:session", args=[own.pk])).content.decode()
    assert str(stray.pk) not in body
    assert "globex-secret-session" not in body


def test_staff_see_no_more_than_their_memberships(client: Client, foreign: dict[str, Any]):
    boss = UserFactory(username="boss", is_staff=True, is_superuser=True)
    client.force_login(boss)
    overview = client.get(reverse("dashboard:overview"))
    assert "You are not in a team yet" in overview.content.decode()
    assert client.get(reverse("dashboard:session", args=[foreign["session"].pk])).status_code == 404


def test_the_switcher_offers_only_the_users_teams(
    member: Any, team: Team, other_team: Team, foreign: dict[str, Any]
) -> None:
    third = Team.objects.create(slug="initech", name="Initech")
    MembershipFactory(team=third, user=member)
    client = Client()
    client.force_login(member)
    page = client.get(reverse("dashboard:sessions")).content.decode()
    assert 'value="initech"' in page and 'value="acme"' in page
    assert 'value="globex"' not in page

    refused = client.post(reverse("dashboard:team-switch"), {"team": "globex"})
    assert refused.status_code == 404
    switched = client.post(
        reverse("dashboard:team-switch"), {"team": "initech", "next": "/sessions/"}
    )
    assert switched.status_code == 302 and switched["Location"] == "/sessions/"
    assert client.get(reverse("dashboard:sessions")).context["team"] == third
    outside = client.post(
        reverse("dashboard:team-switch"), {"team": "acme", "next": "https://evil.example/"}
    )
    assert outside["Location"] == reverse("dashboard:overview")

    # A link may name the team (?team=slug): only one of the user's own.
    assert client.get(reverse("dashboard:sessions"), {"team": "initech"}).context["team"] == third
    assert client.get(reverse("dashboard:sessions"), {"team": "globex"}).context["team"] == third
    assert client.get(reverse("dashboard:overview")).context["team"] == third


def test_anonymous_visitors_are_sent_to_log_in(client: Client, team: Team) -> None:
    session = session_with_story(team)
    for name, args in (
        ("dashboard:overview", []),
        ("dashboard:sessions", []),
        ("dashboard:session", [session.pk]),
        ("dashboard:agents", []),
        ("dashboard:agent", [session.agent_id]),
    ):
        response = client.get(reverse(name, args=args))
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    live = client.get(reverse("dashboard:live-session", args=[session.pk]))
    assert live.status_code == 401 and live.json()["code"] == "not_authenticated"


def test_login_page_labels_every_input(client: Client) -> None:
    body = client.get(reverse("login")).content.decode()
    assert '<label for="id_username">' in body and 'id="id_username"' in body
    assert '<label for="id_password">' in body and 'id="id_password"' in body
