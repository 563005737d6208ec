"""Agents, sessions and the append-only log of their lifecycle events."""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models
from django.db.models import Q

from sessionhub.models import Team


class Source(models.TextChoices):
    """Which gateway an agent, session or event came from."""

    CLAUDE_CODE = "claude-code", "Claude Code"
    OPENCLAW = "openclaw", "OpenClaw"
    CODEX = "codex", "Codex CLI"
    GEMINI_CLI = "gemini-cli", "Gemini CLI"
    GENERIC = "generic", "Generic API"
    SESSIONHUB = "sessionhub", "SessionHub"


class EventKind(models.TextChoices):
    """The canonical kinds every gateway's hooks map onto."""

    SESSION_START = "session_start", "Session start"
    SESSION_RESUME = "session_resume", "Session resume"
    SESSION_SUSPEND = "session_suspend", "Session suspend"
    SESSION_END = "session_end", "Session end"
    COMPACTION_BEFORE = "compaction_before", "Compaction (before)"
    COMPACTION_AFTER = "compaction_after", "Compaction (after)"
    PROMPT = "prompt", "Prompt"
    TOOL_USE = "tool_use", "Tool use"
    TURN_END = "turn_end", "Turn end"
    NOTIFICATION = "notification", "Notification"
    COMMAND = "command", "Command"
    OTHER = "other", "Other"


class SessionStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    SUSPENDED = "suspended", "Suspended"
    ENDED = "ended", "Ended"
    CRASHED = "crashed", "Crashed"


# A session is open while it may still take events as a running session.
OPEN_STATUSES = (SessionStatus.ACTIVE, SessionStatus.SUSPENDED)


class EndReason(models.TextChoices):
    """Why a session ended: the gateways' reasons plus SessionHub's own."""

    # OpenClaw
    NEW = "new", "New session"
    RESET = "reset", "Reset"
    IDLE_TIMEOUT = "idle_timeout", "Idle timeout"
    DAILY_RESET = "daily_reset", "Daily reset"
    COMPACTION = "compaction", "Compaction"
    DELETED = "deleted", "Deleted"
    # Claude Code
    CLEAR = "clear", "Cleared"
    LOGOUT = "logout", "Logout"
    PROMPT_INPUT_EXIT = "prompt_input_exit", "Exited at prompt"
    BYPASS_PERMISSIONS_DISABLED = "bypass_permissions_disabled", "Bypass permissions disabled"
    # Gemini CLI (and Codex CLI) when the CLI exits
    EXIT = "exit", "Exited"
    # Either, and SessionHub
    USER_COMMAND = "user_command", "User command"
    COMPACTION_FAILURE = "compaction_failure", "Compaction failure"
    ROLE_ORDERING_CONFLICT = "role_ordering_conflict", "Role ordering conflict"
    PRUNED = "pruned", "Pruned"
    REPLACED = "replaced", "Replaced by a newer session"
    CRASHED = "crashed", "Crashed"
    OTHER = "other", "Other"
    UNKNOWN = "unknown", "Unknown"


class Agent(models.Model):
    """An agent identity in a team: an OpenClaw agent, or a coding CLI's gateway + project."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="agents")
    source = models.CharField(max_length=20, choices=Source.choices)
    external_id = models.CharField(max_length=300)
    name = models.CharField(max_length=300, blank=True)
    project = models.CharField(max_length=500, blank=True)
    developer = models.CharField(
        max_length=200, blank=True, help_text="Who ran its first session (user@host or token)"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(
        null=True, blank=True, help_text="Its latest event, to the minute"
    )
    redaction_version = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["name"]
        constraints: ClassVar = [
            models.UniqueConstraint(
                fields=["team", "source", "external_id"], name="agent_unique_external_id"
            )
        ]

    def __str__(self) -> str:
        return self.name or self.external_id


USER_TRIGGER = "user"

# The field lists other code is built from (the state fold's own are lifecycle.state's
# FOLD_FIELDS): a new field is added here once, not in every place that lists fields.
SESSION_IDENTITY_FIELDS = ("external_id", "source")
# Where and how a session runs, as its events tell (ingestion keeps them up to date).
SESSION_CONTEXT_FIELDS = ("session_key", "channel", "cwd", "project", "developer")
# The session chain by the gateway's ids (kept when the linked row is not there).
SESSION_LINK_FIELDS = ("previous_external_id", "successor_external_id")
# An event as the API shows it and an export carries it; its row adds the team, the
# session, the redaction version and the orphan key.
EVENT_FIELDS = (
    "event_id",
    "kind",
    "source",
    "hook",
    "phase",
    "occurred_at",
    "received_at",
    "facts",
    "payload",
)
FOREGROUND_TRIGGERS = ("", USER_TRIGGER)


def foreground_q() -> Q:
    """Sessions with at least one run of the user's (or no word on it)."""
    return Q(trigger__in=FOREGROUND_TRIGGERS)


class Session(models.Model):
    """One agent session, its current state and its place in the session chain."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Both are served by the composite indexes below (team first, agent first): indexes of
    # their own would only cost every insert.
    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, related_name="sessions", db_index=False
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="sessions", db_index=False
    )
    source = models.CharField(max_length=20, choices=Source.choices)
    external_id = models.CharField(max_length=200)
    session_key = models.CharField(max_length=300, blank=True)
    channel = models.CharField(max_length=100, blank=True)
    cwd = models.CharField(max_length=1000, blank=True)
    project = models.CharField(max_length=500, blank=True)
    developer = models.CharField(
        max_length=200,
        blank=True,
        help_text="Who ran it: the OS user@host its client reports, else the token's gateway",
    )
    model = models.CharField(max_length=200, blank=True)
    trigger = models.CharField(
        max_length=40,
        blank=True,
        help_text="What set its runs off: 'user' once any run was the user's, else the "
        "gateway's word for a background run (heartbeat, cron...); blank when not said",
    )

    status = models.CharField(
        max_length=16, choices=SessionStatus.choices, default=SessionStatus.ACTIVE
    )
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    suspended_at = models.DateTimeField(null=True, blank=True)
    first_event_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=40, choices=EndReason.choices, blank=True)
    end_detail = models.CharField(max_length=100, blank=True, help_text="The gateway's own word")
    recovered = models.BooleanField(
        default=False, help_text="Closed by the crash sweep, end time estimated"
    )

    has_start = models.BooleanField(default=False)
    in_compaction = models.BooleanField(default=False)
    suspend_count = models.PositiveIntegerField(default=0)
    suspended_seconds = models.FloatField(default=0)
    event_count = models.PositiveIntegerField(default=0)
    prompt_count = models.PositiveIntegerField(default=0)
    turn_count = models.PositiveIntegerField(default=0)
    tool_use_count = models.PositiveIntegerField(default=0)
    compaction_count = models.PositiveIntegerField(default=0)
    reported_message_count = models.PositiveIntegerField(null=True, blank=True)
    token_count = models.BigIntegerField(null=True, blank=True)
    # Token usage of its turns as the gateways report it (Claude Code's transcript,
    # OpenClaw's agent_end), summed by the state fold.
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)

    previous_session = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="next_sessions"
    )
    previous_external_id = models.CharField(max_length=200, blank=True)
    successor_external_id = models.CharField(max_length=200, blank=True)
    continued_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="continued_from"
    )

    # The outbox: set in the same transaction as new events, cleared by the worker that
    # processed them; the periodic sweep re-queues what stays set too long.
    memory_dirty_at = models.DateTimeField(null=True, blank=True)
    # Derived by the database; the sweeps find marked sessions by it. Indexing the flag
    # rather than the time keeps a session's update per event a heap-only (HOT) update on
    # PostgreSQL: no indexed column changes, so no index takes a new entry.
    memory_dirty = models.GeneratedField(
        expression=models.ExpressionWrapper(
            Q(memory_dirty_at__isnull=False), output_field=models.BooleanField()
        ),
        output_field=models.BooleanField(),
        db_persist=True,
    )
    memory_cursor = models.BigIntegerField(default=0)
    # When a worker last brought the session's memory up to date (and cleared the mark):
    # ingestion paces the next run of a busy session from it (MEMORY_BUSY_SECONDS).
    memory_run_at = models.DateTimeField(null=True, blank=True)
    redaction_version = models.PositiveSmallIntegerField(default=0)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-started_at"]
        constraints: ClassVar = [
            models.UniqueConstraint(
                fields=["team", "source", "external_id"], name="session_unique_external_id"
            )
        ]
        indexes: ClassVar = [
            models.Index(fields=["team", "-started_at"], name="session_team_started"),
            models.Index(fields=["agent", "-ended_at"], name="session_agent_ended"),
            models.Index(fields=["team", "session_key"], name="session_team_key"),
            # The dashboard's views per developer and per project.
            models.Index(fields=["team", "developer"], name="session_team_developer"),
            models.Index(fields=["team", "project"], name="session_team_project"),
            # The crash sweep's open sessions. Neither index holds a column that a quiet
            # event moves (last_event_at, memory_dirty_at), so those updates stay HOT.
            models.Index(
                fields=["status"],
                name="session_open",
                condition=Q(status__in=["active", "suspended"]),
            ),
            models.Index(
                fields=["memory_dirty"], name="session_marked", condition=Q(memory_dirty=True)
            ),
            # The chain's lookups at a session's start and end (lifecycle/ingest/chain.py):
            # the session that names this one as its successor, the stored sessions that
            # name this one as where they resumed from. Without them each start read every
            # session of the team. Only the few sessions that name one take an entry.
            models.Index(
                fields=["team", "source", "successor_external_id"],
                name="session_successor_named",
                condition=~Q(successor_external_id=""),
            ),
            models.Index(
                fields=["team", "source", "previous_external_id"],
                name="session_previous_named",
                condition=~Q(previous_external_id=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source}:{self.external_id}"

    @property
    def is_background(self) -> bool:
        """Only background runs (a heartbeat...): no preamble, no continuity source, no charts."""
        return self.trigger not in FOREGROUND_TRIGGERS

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATUSES

    @property
    def message_count(self) -> int:
        """What the gateway reported, else prompts plus assistant turns seen."""
        if self.reported_message_count is not None:
            return self.reported_message_count
        return self.prompt_count + self.turn_count

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.ended_at or self.last_event_at
        if end is None:
            return None
        return max(0.0, (end - self.started_at).total_seconds())


class LifecycleEvent(models.Model):
    """One event as received: append-only, never edited, deleted only by retention."""

    id = models.BigAutoField(primary_key=True)
    # Served by event_team_received and event_session_time: no indexes of their own.
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="events", db_index=False)
    session = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
    )
    event_id = models.CharField(max_length=200, help_text="The client's idempotency key")
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    source = models.CharField(max_length=20, choices=Source.choices)
    hook = models.CharField(max_length=100, blank=True, help_text="The gateway's hook name")
    phase = models.CharField(max_length=8, blank=True, help_text="pre/post for tool uses")
    occurred_at = models.DateTimeField(help_text="Client clock")
    received_at = models.DateTimeField(help_text="Server clock")
    facts = models.JSONField(default=dict, blank=True, help_text="Normalized facts")
    payload = models.JSONField(default=dict, blank=True, help_text="Redacted payload")
    redaction_version = models.PositiveSmallIntegerField(default=0)
    orphan_key = models.CharField(
        max_length=300,
        blank=True,
        help_text="Session key of an event that arrived before any session with that key",
    )

    class Meta:
        ordering = ["occurred_at", "id"]
        constraints: ClassVar = [
            models.UniqueConstraint(fields=["team", "event_id"], name="event_unique_client_id")
        ]
        indexes: ClassVar = [
            models.Index(fields=["session", "occurred_at", "id"], name="event_session_time"),
            models.Index(fields=["team", "received_at"], name="event_team_received"),
            models.Index(fields=["team", "kind", "occurred_at"], name="event_team_kind_time"),
            models.Index(
                fields=["team", "source", "orphan_key"],
                name="event_orphans",
                condition=~Q(orphan_key=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.event_id}"
