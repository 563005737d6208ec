"""``manage.py resummarize [--team T] [--session ID]``: rebuild summaries of closed sessions
(and their features: topics, projects, pending tasks), after the rules that make them
changed."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from lifecycle.models import Session, SessionStatus
from memory.pipeline import summary_build


class Command(BaseCommand):
    help = "Rebuild summaries and features (all closed sessions, a team's, or one session)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", help="Team slug")
        parser.add_argument("--session", help="One session's SessionHub id")

    def handle(self, *args: Any, **options: Any) -> None:
        sessions = Session.objects.select_related("team")
        if options["session"]:
            sessions = sessions.filter(pk=options["session"])
        else:
            sessions = sessions.filter(status__in=[SessionStatus.ENDED, SessionStatus.CRASHED])
        if options["team"]:
            sessions = sessions.filter(team__slug=options["team"])
        ids = list(sessions.values_list("pk", flat=True))
        for pk in tqdm(ids, desc="summarize", unit="session", file=sys.stderr):
            summary_build(Session.objects.select_related("team").get(pk=pk))
        self.stdout.write(f"Rebuilt {len(ids)} summary(ies).")
