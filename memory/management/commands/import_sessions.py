"""``manage.py import_sessions TEAM FILE``: idempotent, sessions already present are skipped."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.export import ImportError_, document_import
from sessionhub.services import team_get_or_create


class Command(BaseCommand):
    help = "Import a document made by export_sessions into a team (created when missing)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("team", help="Team slug")
        parser.add_argument("file", help="The JSON document ('-' for standard input)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["file"] == "-":
                doc = json.load(sys.stdin)
            else:
                with open(options["file"], encoding="utf-8") as handle:
                    doc = json.load(handle)
        except (OSError, ValueError) as exc:
            raise CommandError(f"Cannot read {options['file']}: {exc}") from exc
        team = team_get_or_create(slug=options["team"])
        total = len(doc.get("sessions", [])) if isinstance(doc, dict) else 0
        try:
            with tqdm(total=total, desc="import", unit="session", file=sys.stderr) as bar:
                created = document_import(doc, team=team, progress=lambda: bar.update(1))
        except ImportError_ as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Imported {created} new session(s); {total - created} already present.")
