"""``manage.py reredact``: apply the current redaction rules to rows stored under older ones."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand
from tqdm import tqdm

from memory.pipeline import reredact_everything
from sessionhub.text.redaction import RULES_VERSION


def _advance(bar: tqdm[Any], note: str) -> None:
    bar.set_postfix_str(note)
    bar.update(1)


class Command(BaseCommand):
    help = "Re-redact every stored row written under older redaction rules."

    def handle(self, *args: Any, **options: Any) -> None:
        with tqdm(desc=f"re-redact (rules v{RULES_VERSION})", unit="table", file=sys.stderr) as bar:
            changed = reredact_everything(
                progress=lambda name, count: _advance(bar, f"{name}: {count}")
            )
        for name, count in changed.items():
            self.stdout.write(f"{name}: {count} row(s) re-redacted")
