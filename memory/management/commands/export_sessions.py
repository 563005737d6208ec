"""``manage.py export_sessions TEAM [--session ID [--chain]] [-o FILE]``."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from lifecycle.models import Session
from lifecycle.selectors import session_chain
from memory.export import document
from sessionhub.models import Team


class Command(BaseCommand):
    help = "Export a team's sessions (or one session, or its chain) as one JSON document."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("team", help="Team slug")
        parser.add_argument("--session", help="A session's SessionHub id (default: all)")
        parser.add_argument("--chain", action="store_true", help="The session's whole chain")
        parser.add_argument("-o", "--output", help="File to write (default: standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        team = Team.objects.filter(slug=options["team"]).first()
        if team is None:
            raise CommandError(f"No team {options['team']!r}")
        if options["session"]:
            session = Session.objects.filter(team=team, pk=options["session"]).first()
            if session is None:
                raise CommandError("No such session in this team")
            sessions = session_chain(session) if options["chain"] else [session]
        else:
            sessions = list(Session.objects.filter(team=team).select_related("agent"))
        with tqdm(total=len(sessions), desc="export", unit="session", file=sys.stderr) as bar:
            doc = document(sessions, team=team, progress=lambda: bar.update(1))
        text = json.dumps(doc, ensure_ascii=False, indent=1)
        if options["output"]:
            with open(options["output"], "w", encoding="utf-8") as handle:
                handle.write(text)
            self.stderr.write(f"Wrote {len(sessions)} session(s) to {options['output']}")
        else:
            self.stdout.write(text)
