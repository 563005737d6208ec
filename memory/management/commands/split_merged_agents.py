"""``manage.py split_merged_agents``: undo the agents that redaction merged.

Before identifiers were keyed, a Claude Code agent id (``<gateway label>:<project>``) was
redacted before it was stored, and ``first-token:/home/alice/src/api-v2`` read as a
``token: value`` assignment: every such project of a team became one agent,
``first-token:[REDACTED:secret_assignment]``. The raw id is gone, but each session kept
its project (the remote, credentials stripped, or the working directory), which is what
the identity is made of: so each session is moved to the agent its project names today,
with the pins it made. Sessions whose stored project is itself redacted (or empty) cannot
be told apart; they stay where they are, and the command lists them.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from lifecycle.adapters.claude_code import agent_identity
from lifecycle.models import Agent, Session, Source
from lifecycle.services import agent_delete_if_unused, session_agent_move
from memory.models import Pin
from sessionhub.text.redaction import KEYED_SEPARATOR

_MARKER = "[REDACTED:"


def is_merged(agent: Agent) -> bool:
    """A Claude Code agent whose stored identity is a redacted string, not a keyed one."""
    if agent.source != Source.CLAUDE_CODE or _MARKER not in agent.external_id:
        return False
    _head, separator, digest = agent.external_id.rpartition(KEYED_SEPARATOR)
    keyed = separator and len(digest) == 20 and all(c in "0123456789abcdef" for c in digest)
    return not keyed


class Command(BaseCommand):
    help = "Split Claude Code agents that older versions merged by redacting their ids."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dry-run", action="store_true", help="say what would move")

    def handle(self, *args: Any, **options: Any) -> None:
        dry_run = options["dry_run"]
        moved = created = 0
        stuck: list[Session] = []
        merged = [a for a in Agent.objects.filter(external_id__contains=_MARKER) if is_merged(a)]
        for agent in merged:
            label = agent.external_id.split(":", 1)[0]
            with transaction.atomic():
                for session in Session.objects.filter(agent=agent).order_by("created_at"):
                    project = session.project or session.cwd
                    if not project or _MARKER in project:
                        stuck.append(session)
                        continue
                    external_id, name, shown = agent_identity(
                        gateway=label, cwd=project, git_remote=""
                    )
                    if external_id == agent.external_id:
                        continue
                    if dry_run:
                        self.stdout.write(f"would move {session.external_id} to {external_id}")
                        moved += 1
                        continue
                    created += session_agent_move(
                        session, external_id=external_id, name=name, project=shown
                    )
                    Pin.objects.filter(agent=agent, origin_session=session).update(
                        agent=session.agent
                    )
                    moved += 1
                if not dry_run and not Pin.objects.filter(agent=agent).exists():
                    agent_delete_if_unused(agent)
        verb = "would move" if dry_run else "moved"
        self.stdout.write(
            f"{len(merged)} merged agent(s) found; {moved} session{'s' * (moved != 1)} {verb}, "
            f"{created} agent(s) created"
        )
        plural = "session could not be split" if len(stuck) == 1 else "sessions could not be split"
        self.stdout.write(f"{len(stuck)} {plural} (project stored redacted or empty):")
        for session in stuck:
            self.stdout.write(
                f"  team {session.team_id} session {session.pk} ({session.external_id}) "
                f"stays with agent {session.agent_id}"
            )
