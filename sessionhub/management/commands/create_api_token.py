"""``manage.py create_api_token TEAM --scopes ingest,read``: make a team (if new) and a token."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessionhub.services import InvalidScope, api_token_create, team_get_or_create


class Command(BaseCommand):
    help = "Create an API token for a team (the team is created when missing); prints it once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("team", help="Team slug")
        parser.add_argument("--scopes", default="ingest,read", help="Comma-separated scopes")
        parser.add_argument("--name", default="", help="Token name (default: <team>-token)")
        parser.add_argument("--gateway", default="", help="Gateway label (default: the name)")
        parser.add_argument(
            "--quiet", action="store_true", help="Print only the token, for scripts"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        team = team_get_or_create(slug=options["team"])
        try:
            token, raw = api_token_create(
                team=team,
                name=options["name"] or f"{team.slug}-token",
                gateway=options["gateway"],
                scopes=options["scopes"].split(","),
            )
        except InvalidScope as exc:
            raise CommandError(str(exc)) from exc
        if options["quiet"]:
            self.stdout.write(raw)
            return
        self.stdout.write(
            f"Team {team.slug}: token {token.name} ({', '.join(token.scopes)})\n"
            f"{raw}\n"
            "Store it now: only its hash is kept."
        )
