"""``manage.py bootstrap``: on an empty installation, a first team and token to start with."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from sessionhub.models import Team
from sessionhub.services import api_token_create, team_get_or_create


class Command(BaseCommand):
    help = "Create a 'default' team and an ingest+read token when no team exists yet."

    def handle(self, *args: Any, **options: Any) -> None:
        slugs = list(Team.objects.order_by("pk").values_list("slug", flat=True)[:6])
        if slugs:
            first = slugs[0]
            more = f" (teams: {', '.join(slugs[:5])}{', …' if len(slugs) > 5 else ''})"
            self.stdout.write(
                f"SessionHub is set up. New token for team {first}: python manage.py "
                f"create_api_token {first} (installed: sessionhub create_api_token {first})"
                f"{more if len(slugs) > 1 else ''}; admin user: make superuser "
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
