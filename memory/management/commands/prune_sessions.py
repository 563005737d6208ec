"""``manage.py prune_sessions [--days N] [--dry-run]``: archive, then delete, old sessions."""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.retention import expired_count, retention_apply


class Command(BaseCommand):
    help = "Archive closed sessions older than the retention age to gzipped JSON, then delete them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=None, help="Age in days (default: setting)")
        parser.add_argument("--archive-dir", default=None, help="Where archives go")
        parser.add_argument("--dry-run", action="store_true", help="Only count")

    def handle(self, *args: Any, **options: Any) -> None:
        days = (
            options["days"]
            if options["days"] is not None
            else settings.SESSIONHUB["RETENTION_DAYS"]
        )
        if not days or days <= 0:
            raise CommandError("No retention age: pass --days N or set SESSIONHUB_RETENTION_DAYS")
        total = expired_count(days=days)
        with tqdm(total=total, desc="prune", unit="session", file=sys.stderr) as bar:
            result = retention_apply(
                days=days,
                archive_dir=options["archive_dir"],
                dry_run=options["dry_run"],
                progress=lambda: bar.update(1),
            )
        verb = "Would archive" if options["dry_run"] else "Archived"
        self.stdout.write(f"{verb} {result.archived} session(s), deleted {result.deleted}.")
