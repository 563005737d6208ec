"""An instance's first admin lands on its team's data (issue 12, item 6)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from sessionhub.models import Membership, Team
from sessionhub.services import team_get_or_create

pytestmark = pytest.mark.django_db(transaction=True)  # the join runs after commit


def test_a_superuser_made_on_a_one_team_instance_joins_it_as_admin() -> None:
    team = team_get_or_create(slug="first", name="First")
    call_command(
        "createsuperuser", "--noinput", "--username", "root", "--email", "root@example.org"
    )
    root = get_user_model().objects.get(username="root")
    membership = Membership.objects.get(user=root)
    assert (membership.team, membership.role) == (team, Membership.Role.ADMIN)
    client = Client()
    client.force_login(root)
    assert "You are not in a team yet" not in client.get("/").content.decode()


def test_the_first_team_made_after_the_superuser_takes_them_in() -> None:
    root = get_user_model().objects.create_superuser("root", password="pw-root-123456")
    assert not Membership.objects.filter(user=root).exists()
    team = team_get_or_create(slug="first", name="First")
    assert Membership.objects.get(user=root).team == team


def test_with_two_teams_membership_stays_explicit() -> None:
    team_get_or_create(slug="acme", name="Acme")
    team_get_or_create(slug="globex", name="Globex")
    root = get_user_model().objects.create_superuser("root", password="pw-root-123456")
    assert not Membership.objects.filter(user=root).exists()
    plain = get_user_model().objects.create_user("bob", password="pw-bob-1234567")
    Team.objects.filter(slug="globex").delete()
    plain.save()
    assert not Membership.objects.filter(user=plain).exists()
