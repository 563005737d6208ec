"""What SessionHub distils from sessions: pins, tails, observations, summaries, features,
and the record of every continuity preamble served."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q

from lifecycle.models import Agent, LifecycleEvent, Session
from sessionhub.models import Team


class Pin(models.Model):
    """A working-memory item of an agent; at most ``MAX_ACTIVE_PINS`` active at once."""

    class Priority(models.TextChoices):
        NORMAL = "normal", "Normal"
        CRITICAL = "critical", "Critical"

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="pins")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="pins")
    label = models.CharField(max_length=200)
    content = models.TextField(blank=True)
    priority = models.CharField(max_length=16, choices=Priority.choices, default=Priority.NORMAL)
    pinned_at = models.DateTimeField()
    # Who set it by hand (a user's name, "token <prefix>"); blank for a pin a session made
    # or inherited. A pin set by a person is curated memory: the preamble quotes it.
    pinned_by = models.CharField(max_length=200, blank=True)
    unpinned_at = models.DateTimeField(null=True, blank=True)
    origin_session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="pins_made"
    )
    inherited_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="inherited_by"
    )
    inherited_into = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="pins_inherited",
        help_text="The session whose continuity brought this pin in",
    )
    redaction_version = models.PositiveSmallIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-pinned_at"]
        constraints: ClassVar = [
            models.UniqueConstraint(
                fields=["agent", "label"],
                condition=Q(unpinned_at__isnull=True),
                name="pin_unique_active_label",
            )
        ]
        indexes: ClassVar = [
            models.Index(fields=["agent", "unpinned_at"], name="pin_agent_active"),
            # A team's active pins (the MCP search reads them): a few per agent among
            # the team's every pin ever made.
            models.Index(
                fields=["team"], name="pin_team_active", condition=Q(unpinned_at__isnull=True)
            ),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def is_active(self) -> bool:
        return self.unpinned_at is None

    @property
    def is_curated(self) -> bool:
        """Set by a person (dashboard, admin, API), not made or inherited by a session."""
        return self.inherited_from_id is None and self.inherited_into_id is None


class StreamTail(models.Model):
    """The last words of the agent's reasoning at one turn end."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="tails")
    # No index of its own: tail_latest (session, -captured_at) serves every lookup by session.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="tails", db_index=False
    )
    event = models.OneToOneField(LifecycleEvent, on_delete=models.CASCADE, related_name="tail")
    text = models.TextField(blank=True)
    final_message = models.TextField(blank=True)
    token_count = models.PositiveIntegerField(default=0)
    captured_at = models.DateTimeField()
    redaction_version = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-captured_at", "-id"]
        indexes: ClassVar = [models.Index(fields=["session", "-captured_at"], name="tail_latest")]

    def __str__(self) -> str:
        return f"tail of {self.session_id} at {self.captured_at:%Y-%m-%d %H:%M}"


class Observation(models.Model):
    """One tool use, with short digests of what went in and came out.

    The worker writes one row per tool use, hundreds at a time. Its foreign keys have no
    constraints in the database: each would check every row at commit, locking the team,
    the session and the event once per row (as much of the database's work as the insert
    itself). The worker's insert (``memory.statements.rows_insert``) locks the session
    once instead and writes nothing once it is gone; the session's, the event's and the
    team's deletion still take their observations with them (Django's cascade).
    """

    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, related_name="observations", db_constraint=False
    )
    # No index of its own: observation_session_time (session, occurred_at) serves every
    # lookup by session, and one index fewer is one write fewer for each tool call.
    session = models.ForeignKey(
        Session,
        on_delete=models.CASCADE,
        related_name="observations",
        db_index=False,
        db_constraint=False,
    )
    event = models.OneToOneField(
        LifecycleEvent, on_delete=models.CASCADE, related_name="observation", db_constraint=False
    )
    tool_name = models.CharField(max_length=200)
    input_digest = models.TextField(blank=True)
    output_digest = models.TextField(blank=True)
    failed = models.BooleanField(default=False)
    occurred_at = models.DateTimeField()
    redaction_version = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["occurred_at", "id"]
        indexes: ClassVar = [
            models.Index(fields=["session", "occurred_at"], name="observation_session_time")
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} in {self.session_id}"


# The separators the MCP search reads as spaces inside paths and names (its ``_JOINERS``):
# PostgreSQL's parser keeps ``src/ledger/migrate.py`` as one token.
JOINERS_PATTERN = r"[/\\._:=-]+"


class Lexemes(models.Func):
    """A stored search document: on PostgreSQL ``to_tsvector('english', …)`` of the texts
    joined by spaces (``joiners``: with the MCP search's separators read as spaces first;
    ``as_text``: of a JSON value's text); NULL on other databases, which match words in
    Python (``memory.relevance``)."""

    output_field = SearchVectorField()

    def __init__(self, *expressions: str, joiners: bool = False, as_text: bool = False) -> None:
        super().__init__(*expressions)
        self.joiners = joiners
        self.as_text = as_text

    def deconstruct(self) -> tuple[str, Any, dict[str, Any]]:
        path, args, kwargs = super().deconstruct()
        return path, args, {**kwargs, "joiners": self.joiners, "as_text": self.as_text}

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> Any:  # type: ignore[override]
        text = "(%(expressions)s)::text" if self.as_text else "%(expressions)s"
        if self.joiners:
            pattern = JOINERS_PATTERN.replace("'", "''")
            text = f"regexp_replace({text}, '{pattern}', ' ', 'g')"
        return super().as_sql(
            compiler,
            connection,
            template=f"to_tsvector('english'::regconfig, {text})",
            arg_joiner=" || ' ' || ",
            **extra,
        )

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return "NULL", []


class Summary(models.Model):
    """A session's summary in five sections, and how it was made."""

    EXTRACTIVE = "extractive"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="summaries")
    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="summary")
    request = models.TextField(blank=True)
    investigated = models.TextField(blank=True)
    learned = models.TextField(blank=True)
    completed = models.TextField(blank=True)
    next_steps = models.TextField(blank=True)
    final_message = models.TextField(blank=True)
    # How the session's last turn ended (memory.outcome): finished, stopped while doing
    # something (the detail says what), failed (the detail names the error); empty when
    # it had no turn.
    outcome = models.CharField(max_length=16, blank=True)
    outcome_detail = models.CharField(max_length=300, blank=True)
    method = models.CharField(max_length=200, default=EXTRACTIVE)
    fallback_reason = models.CharField(max_length=300, blank=True)
    llm_tokens = models.PositiveIntegerField(default=0)
    events_seen = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    redaction_version = models.PositiveSmallIntegerField(default=0)
    # The summary's words as stored search documents, kept by the database whenever the
    # sections change: continuity's (the sections it scores a first prompt against) and
    # the MCP search's (every section and the final message, paths split). A request
    # reads their lexemes instead of turning candidates' texts into lexemes.
    continuity_document = models.GeneratedField(
        expression=Lexemes("request", "learned", "completed", "next_steps"),
        output_field=SearchVectorField(null=True),
        db_persist=True,
    )
    search_document = models.GeneratedField(
        expression=Lexemes(
            "request",
            "investigated",
            "learned",
            "completed",
            "next_steps",
            "final_message",
            joiners=True,
        ),
        output_field=SearchVectorField(null=True),
        db_persist=True,
    )

    class Meta:
        verbose_name_plural = "summaries"

    def __str__(self) -> str:
        return f"summary of {self.session_id}"

    SECTIONS = ("request", "investigated", "learned", "completed", "next_steps")


class SessionFeatures(models.Model):
    """What scoring reads: hot topics, active projects, pending tasks."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="features")
    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="features")
    hot_topics = models.JSONField(default=list, blank=True)
    active_projects = models.JSONField(default=list, blank=True)
    pending_tasks = models.JSONField(default=list, blank=True)
    done_tasks = models.JSONField(default=list, blank=True, help_text="Task ids said to be done")
    updated_at = models.DateTimeField(auto_now=True)
    redaction_version = models.PositiveSmallIntegerField(default=0)
    # The hot topics' lexemes, as ``Summary.continuity_document`` and ``Summary.search_document``.
    continuity_document = models.GeneratedField(
        expression=Lexemes("hot_topics"),
        output_field=SearchVectorField(null=True),
        db_persist=True,
    )
    search_document = models.GeneratedField(
        expression=Lexemes("hot_topics", as_text=True, joiners=True),
        output_field=SearchVectorField(null=True),
        db_persist=True,
    )

    class Meta:
        verbose_name_plural = "session features"

    def __str__(self) -> str:
        return f"features of {self.session_id}"


class LlmUsage(models.Model):
    """Tokens a team's summaries spent on an LLM, per day (the budget's ledger)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="llm_usage")
    day = models.DateField()
    tokens = models.PositiveIntegerField(default=0)
    calls = models.PositiveIntegerField(default=0)

    class Meta:
        constraints: ClassVar = [
            models.UniqueConstraint(fields=["team", "day"], name="llm_usage_unique_day")
        ]

    def __str__(self) -> str:
        return f"{self.team} {self.day}: {self.tokens}"


class TaskFailure(models.Model):
    """A background task that raised: kept so failures are visible in the admin."""

    task_name = models.CharField(max_length=200)
    task_id = models.CharField(max_length=200, blank=True)
    args = models.JSONField(default=list, blank=True)
    exception = models.TextField()
    traceback = models.TextField(blank=True)
    occurred_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-occurred_at"]

    def __str__(self) -> str:
        return f"{self.task_name} at {self.occurred_at:%Y-%m-%d %H:%M}"


class ContinuityRecord(models.Model):
    """Every preamble served: for which session, from what, and why."""

    class Trigger(models.TextChoices):
        AUTOMATIC = "automatic", "Automatic"
        MANUAL = "manual", "Manual continue"

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="continuity_records")
    # No index of its own: continuity_session_trigger (session, trigger) serves every
    # lookup by session.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="continuity_records", db_index=False
    )

    class Stage(models.TextChoices):
        START = "start", "Session start"
        PROMPT = "prompt", "First prompt"

    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    stage = models.CharField(
        max_length=16,
        choices=Stage.choices,
        blank=True,
        default=Stage.START,
        help_text="When an automatic preamble was asked for: at the start, or with the "
        "first prompt (blank for a manual continue)",
    )
    candidates = models.JSONField(default=list, blank=True, help_text="Every session scored")
    sources = models.ManyToManyField(Session, related_name="continuity_given", blank=True)
    inherited_pins = models.JSONField(default=list, blank=True)
    keywords = models.JSONField(default=list, blank=True)
    preamble = models.TextField(blank=True)
    # Why the preamble draws from its sources (a session continued, the first prompt's
    # evidence, the start's choice kept), in a sentence.
    reason = models.TextField(blank=True)
    curated_pins = models.JSONField(
        default=list,
        blank=True,
        help_text="Pins people set that the preamble quotes: critical ones always, normal "
        "ones when relevant to the session",
    )
    delivered_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the agent was handed the preamble (a manual continue of a running "
        "session: at its next prompt)",
    )
    usage = models.JSONField(
        default=dict,
        blank=True,
        help_text="Which items of the preamble the session then used (memory.usage)",
    )
    items_offered = models.PositiveSmallIntegerField(null=True, blank=True)
    items_used = models.PositiveSmallIntegerField(null=True, blank=True)
    requested_by = models.CharField(max_length=200, blank=True)
    requested_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    redaction_version = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        indexes: ClassVar = [
            models.Index(fields=["session", "trigger"], name="continuity_session_trigger"),
            # A prompt asks whether a manual continue waits for its session: few rows ever.
            models.Index(
                fields=["session"],
                name="continuity_undelivered",
                condition=Q(trigger="manual", delivered_at__isnull=True),
            ),
            # The overview's "preamble items used this week": the records already judged.
            models.Index(
                fields=["team", "created_at"],
                name="continuity_usage_team",
                condition=Q(items_offered__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.trigger} continuity for {self.session_id}"


class McpCall(models.Model):
    """Every tool call an agent made to the MCP endpoint: who asked, what, what it got."""

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="mcp_calls")
    # The calling session, when SessionHub can tell it: named by the client (the OpenClaw
    # plugin), or found by the tool-use id Claude Code sends, at the call or when that
    # tool use is distilled. No index of its own: mcp_call_session serves it.
    session = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="mcp_calls",
        db_index=False,
    )
    token = models.ForeignKey(
        "sessionhub.ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_by = models.CharField(max_length=200, help_text="token:<prefix> of the caller")
    client = models.CharField(max_length=200, blank=True, help_text="The MCP client and version")
    tool = models.CharField(max_length=100)
    arguments = models.JSONField(default=dict, blank=True, help_text="As given, redacted")
    tool_use_id = models.CharField(
        max_length=200, blank=True, help_text="The gateway's id of the tool use (Claude Code)"
    )
    returned = models.ManyToManyField(
        Session, related_name="mcp_returned", blank=True, help_text="Sessions the answer named"
    )
    returned_pins = models.JSONField(default=list, blank=True, help_text="Pin ids it named")
    answer = models.TextField(blank=True, help_text="The exact text handed to the agent")
    answer_chars = models.PositiveIntegerField(default=0)
    is_error = models.BooleanField(default=False)
    duration_ms = models.FloatField(default=0)
    usage = models.JSONField(
        default=dict,
        blank=True,
        help_text="Which items of the answer the session then used (memory.usage)",
    )
    items_offered = models.PositiveSmallIntegerField(null=True, blank=True)
    items_used = models.PositiveSmallIntegerField(null=True, blank=True)
    created_at = models.DateTimeField()
    redaction_version = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "MCP call"
        indexes: ClassVar = [
            models.Index(fields=["session", "-created_at"], name="mcp_call_session"),
            models.Index(fields=["team", "-created_at"], name="mcp_call_team"),
            models.Index(
                fields=["team", "tool_use_id"],
                name="mcp_call_unlinked",
                condition=Q(session__isnull=True) & ~Q(tool_use_id=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} by {self.requested_by} at {self.created_at:%Y-%m-%d %H:%M}"
