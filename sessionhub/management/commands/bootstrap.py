"""``manage.py bootstrap``: on an empty installation, a first team and token to start with."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from sessionhub.models import Team
from sessionhub.services import api_token_create, team_get_or_create


class Command(BaseCommand):
    help = "Create a 'default' team and an ingest+read token when no team exists yet."

    def handle(self, *args: Any, **options: Any) -> None:
        if Team.objects.exists():
            self.stdout.write(
                "SessionHub is set up. New token: python manage.py create_api_token TEAM "
                "(installed: sessionhub create_api_token TEAM); admin user: make superuser "
                "(installed: sessionhub createsuperuser)"
            )
            return
        team = team_get_or_create(slug="default", name="Default team")
        _, raw = api_token_create(team=team, name="first-token", scopes=["ingest", "read"])
        self.stdout.write(
            self.style.SUCCESS("Created team 'default' and its first API token (shown once):")
        )
        self.stdout.write(f"\n    {raw}\n")
        self.stdout.write(
            "Gateways send it as 'Authorization: Bearer <token>'. "
            "For the dashboard and admin, create a user with: make superuser "
            "(installed: sessionhub createsuperuser)"
        )
