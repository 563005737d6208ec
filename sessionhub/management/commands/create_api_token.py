"""``manage.py create_api_token TEAM --scopes ingest,read``: a token for a team.

A team that does not exist yet is made only on an empty instance or with
``--create-team``: a mistyped team would otherwise take the events of its token where no
member of the real team sees them.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.text import slugify

from sessionhub.models import Team
from sessionhub.services import InvalidScope, api_token_create, team_get_or_create


class Command(BaseCommand):
    help = (
        "Create an API token for a team; prints it once. A new team is made only on an "
        "empty instance or with --create-team."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("team", help="Team slug (see the existing ones in the admin)")
        parser.add_argument("--scopes", default="ingest,read", help="Comma-separated scopes")
        parser.add_argument("--name", default="", help="Token name (default: <team>-token)")
        parser.add_argument("--gateway", default="", help="Gateway label (default: the name)")
        parser.add_argument(
            "--create-team",
            action="store_true",
            help="Make the team when it does not exist (needed once other teams exist)",
        )
        parser.add_argument(
            "--quiet", action="store_true", help="Print only the token, for scripts"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug = slugify(options["team"])[:64]
        existing = list(Team.objects.values_list("slug", flat=True))
        new_team = slug not in existing
        if new_team and existing and not options["create_team"]:
            raise CommandError(
                f"There is no team {slug!r}. Existing teams: {', '.join(existing)}.\n"
                f"A token of a new team sends its events where members of the other teams "
                f"do not see them. To make the new team anyway, add --create-team."
            )
        team = team_get_or_create(slug=slug)
        try:
            token, raw = api_token_create(
                team=team,
                name=options["name"] or f"{team.slug}-token",
                gateway=options["gateway"],
                scopes=options["scopes"].split(","),
            )
        except InvalidScope as exc:
            if new_team:
                team.delete()
            raise CommandError(str(exc)) from exc
        if new_team:
            others = f" Other teams: {', '.join(existing)}." if existing else ""
            # On stderr too, so that --quiet scripts still show it to a person.
            self.stderr.write(
                self.style.WARNING(f"NEW TEAM {team.slug!r} was created for this token.{others}")
            )
        if options["quiet"]:
            self.stdout.write(raw)
            return
        self.stdout.write(
            f"Team {team.slug}: token {token.name} ({', '.join(token.scopes)})\n"
            f"{raw}\n"
            "Store it now: only its hash is kept."
        )
