"""Admin for what memory distils. Continuity records and task failures are evidence of
what happened, so they are read-only here."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any, TypedDict, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from lifecycle.admin import CONTINUE_CHOICES
from lifecycle.admin import SessionAdmin as LifecycleSessionAdmin
from lifecycle.models import OPEN_STATUSES, EventKind, LifecycleEvent, Session
from sessionhub.admin import ReadOnlyAdmin, TeamScopedAdmin
from sessionhub.exceptions import ApiError
from sessionhub.text.redaction import RULES_VERSION

if TYPE_CHECKING:
    # Development tools only (installed with django-stubs): the type of an annotated row.
    from django_stubs_ext import WithAnnotations

from .continuity.data import knobs
from .export import session_export
from .models import (
    ContinuityRecord,
    LlmUsage,
    McpCall,
    Observation,
    Pin,
    SessionFeatures,
    StreamTail,
    Summary,
    TaskFailure,
)
from .services.continuity import continuity_continue
from .services.pins import pinned_by_of
from .tasks import reredact_sessions, summarize_session


@admin.register(Pin)
class PinAdmin(TeamScopedAdmin):
    list_display = [
        "label",
        "agent",
        "team",
        "priority",
        "pinned_at",
        "pinned_by",
        "unpinned_at",
        "origin_session",
        "inherited_into",
    ]
    list_filter = ["priority", ("unpinned_at", admin.EmptyFieldListFilter), "team"]
    readonly_fields = ["pinned_by"]
    search_fields = ["label", "content", "agent__name", "agent__external_id"]
    raw_id_fields = ["agent", "origin_session", "inherited_from", "inherited_into"]
    date_hierarchy = "pinned_at"
    list_select_related = ["agent", "team", "origin_session", "inherited_into"]

    def save_model(self, request: HttpRequest, obj: Pin, form: Any, change: bool) -> None:
        """A pin added here is the admin's: the preamble names them as its author."""
        if not change and not obj.pinned_by and obj.inherited_from_id is None:
            obj.pinned_by = pinned_by_of(user=request.user)
        super().save_model(request, obj, form, change)


@admin.register(StreamTail)
class StreamTailAdmin(TeamScopedAdmin):
    list_display = ["session", "team", "captured_at", "token_count"]
    list_filter = ["team"]
    search_fields = ["text", "final_message", "session__external_id"]
    raw_id_fields = ["session", "event"]
    date_hierarchy = "captured_at"
    list_select_related = ["session", "team"]


@admin.register(Observation)
class ObservationAdmin(TeamScopedAdmin):
    list_display = ["tool_name", "session", "occurred_at", "failed", "input_digest"]
    list_filter = ["failed", "tool_name", "team"]
    search_fields = ["tool_name", "input_digest", "output_digest", "session__external_id"]
    raw_id_fields = ["session", "event"]
    date_hierarchy = "occurred_at"
    list_select_related = ["session"]


@admin.register(Summary)
class SummaryAdmin(TeamScopedAdmin):
    list_display = ["session", "team", "method", "llm_tokens", "fallback_reason", "updated_at"]
    list_filter = ["method", "team"]
    search_fields = [*Summary.SECTIONS, "final_message", "session__external_id"]
    raw_id_fields = ["session"]
    date_hierarchy = "updated_at"
    list_select_related = ["session", "team"]


@admin.register(SessionFeatures)
class SessionFeaturesAdmin(TeamScopedAdmin):
    list_display = ["session", "team", "topics", "pending", "updated_at"]
    list_filter = ["team"]
    search_fields = ["session__external_id"]
    raw_id_fields = ["session"]
    date_hierarchy = "updated_at"
    list_select_related = ["session", "team"]

    @admin.display(description="hot topics")
    def topics(self, features: SessionFeatures) -> str:
        return ", ".join(str(t) for t in (features.hot_topics or [])[:8])

    @admin.display(description="pending tasks")
    def pending(self, features: SessionFeatures) -> int:
        return len(features.pending_tasks or [])


class _SourceTotal(TypedDict):
    source_total: int


@admin.register(ContinuityRecord)
class ContinuityRecordAdmin(ReadOnlyAdmin):
    list_display = [
        "session",
        "team",
        "trigger",
        "source_count",
        "candidate_count",
        "pin_count",
        "requested_by",
        "requested_by_user",
        "created_at",
        "delivered_at",
        "items_used_of_offered",
    ]
    list_filter = ["trigger", ("delivered_at", admin.EmptyFieldListFilter), "team"]
    search_fields = ["session__external_id", "preamble", "requested_by"]
    date_hierarchy = "created_at"
    list_select_related = ["session", "team", "requested_by_user"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ContinuityRecord]:
        records: QuerySet[ContinuityRecord] = super().get_queryset(request)
        return records.annotate(source_total=Count("sources"))

    @admin.display(description="sources", ordering="source_total")
    def source_count(self, record: WithAnnotations[ContinuityRecord, _SourceTotal]) -> int:
        return record.source_total

    @admin.display(description="candidates")
    def candidate_count(self, record: ContinuityRecord) -> int:
        return len(record.candidates or [])

    @admin.display(description="pins inherited")
    def pin_count(self, record: ContinuityRecord) -> int:
        return len(record.inherited_pins or [])

    @admin.display(description="items used")
    def items_used_of_offered(self, record: ContinuityRecord) -> str:
        """What the session did with the preamble (memory.usage): used of offered."""
        if record.items_offered is None:
            return "—"
        return f"{record.items_used or 0} of {record.items_offered}"

    def view_on_site(self, record: ContinuityRecord) -> str:
        return reverse("dashboard:session", args=[record.session_id]) + "#continuity"


class _ReturnedTotal(TypedDict):
    returned_total: int


@admin.register(McpCall)
class McpCallAdmin(ReadOnlyAdmin):
    list_display = [
        "tool",
        "session",
        "team",
        "requested_by",
        "client",
        "returned_count",
        "answer_chars",
        "is_error",
        "duration_ms",
        "created_at",
    ]
    list_filter = ["tool", "is_error", "team"]
    search_fields = ["session__external_id", "requested_by", "answer", "tool_use_id"]
    date_hierarchy = "created_at"
    list_select_related = ["session", "team"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[McpCall]:
        calls: QuerySet[McpCall] = super().get_queryset(request)
        return calls.annotate(returned_total=Count("returned"))

    @admin.display(description="sessions returned", ordering="returned_total")
    def returned_count(self, record: WithAnnotations[McpCall, _ReturnedTotal]) -> int:
        return record.returned_total

    def view_on_site(self, record: McpCall) -> str | None:
        if record.session_id is None:
            return None
        return reverse("dashboard:session", args=[record.session_id]) + "#mcp"


# "LLM usage", not Django's "Llm usages". Set here rather than in the model's Meta, which
# would take a migration of the memory app for a label alone.
LlmUsage._meta.verbose_name = "LLM usage"
LlmUsage._meta.verbose_name_plural = "LLM usage"


@admin.register(LlmUsage)
class LlmUsageAdmin(TeamScopedAdmin):
    list_display = ["team", "day", "tokens", "calls"]
    list_filter = ["team"]
    date_hierarchy = "day"
    list_select_related = ["team"]


@admin.register(TaskFailure)
class TaskFailureAdmin(ReadOnlyAdmin):
    # A failure belongs to no team (its arguments may name any): superusers only.
    team_field = None
    list_display = ["task_name", "task_id", "exception", "occurred_at"]
    list_filter = ["task_name"]
    search_fields = ["exception", "task_id"]
    date_hierarchy = "occurred_at"

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Failures that were looked into may be cleared.
        return bool(getattr(request.user, "is_superuser", False))


# --- the session actions memory adds to lifecycle's session admin -----------------------


def _first_prompts(sessions: QuerySet[Session]) -> QuerySet[Session]:
    """The sessions with ``first_prompt``: the text of each one's first prompt event."""
    first = (
        LifecycleEvent.objects.filter(session=OuterRef("pk"), kind=EventKind.PROMPT)
        .order_by("occurred_at", "id")
        .values("facts__text")[:1]
    )
    return sessions.annotate(first_prompt=Subquery(first))


def session_choice_label(session: Session) -> str:
    """How the admin names a session to pick: its first prompt, agent, status and start."""
    prompt = " ".join(str(getattr(session, "first_prompt", "") or "").split())
    prompt = (prompt[:70] + "…") if len(prompt) > 71 else prompt
    started = f" · {session.started_at:%Y-%m-%d %H:%M}" if session.started_at else ""
    return (
        f"“{prompt or 'no prompt yet'}” · {session.agent} · {session.get_status_display()}"
        f"{started} · {str(session.external_id)[:8]}"
    )


def crossing(source: Session, target: Session) -> str:
    """What a continue across agents or projects does, in words ('' within one agent and
    project)."""
    other_project = bool(source.project and target.project and source.project != target.project)
    if source.agent_id == target.agent_id and not other_project:
        return ""
    what = []
    if source.agent_id != target.agent_id:
        what.append(f"agents ({source.agent} → {target.agent})")
    if other_project:
        what.append(f"projects ({source.project} → {target.project})")
    pins = knobs().max_inherited_pins
    return (
        f"This continue crosses {' and '.join(what)}. The session “{target.external_id}” of "
        f"{target.agent} will be handed the summary, pending tasks and topics of "
        f"“{source.external_id}” at its next prompt, and up to {pins} of that session's "
        f"pins become pins of {target.agent}. Tick the box to confirm."
    )


class ContinueForm(forms.Form):
    """Which session continues from the chosen one: an open session of the same team,
    picked by its first prompt and agent; crossing agents or projects asks to confirm."""

    target = forms.ChoiceField(
        label="Session that continues",
        required=False,
        help_text=f"The {CONTINUE_CHOICES} newest running (or suspended) sessions of the "
        "team, by their first prompt and agent.",
    )
    target_id = forms.CharField(
        label="…or its id",
        required=False,
        help_text="A SessionHub id or the gateway's session id, when it is not in the list.",
    )
    confirm = forms.BooleanField(
        label="Continue across agents or projects",
        required=False,
        help_text="Needed when the session that continues belongs to another agent.",
    )

    def __init__(self, *args: Any, source: Session, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source = source
        candidates = _first_prompts(
            Session.objects.filter(team_id=source.team_id, status__in=OPEN_STATUSES)
            .exclude(pk=source.pk)
            .select_related("agent")
            .order_by("-started_at", "-id")
        )[:CONTINUE_CHOICES]
        cast(forms.ChoiceField, self.fields["target"]).choices = [("", "—")] + [
            (str(s.pk), session_choice_label(s)) for s in candidates
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        wanted = (cleaned.get("target_id") or "").strip() or cleaned.get("target") or ""
        if not wanted:
            raise forms.ValidationError("Choose the session that continues.")
        sessions = Session.objects.filter(team_id=self.source.team_id).select_related("agent")
        try:
            target = sessions.filter(pk=uuid.UUID(wanted)).first()
        except ValueError:
            target = None
        if target is None:
            target = sessions.filter(external_id=wanted).first()
        if target is None:
            raise forms.ValidationError(f"No session {wanted!r} in team {self.source.team}.")
        if target.pk == self.source.pk:
            raise forms.ValidationError("A session cannot continue itself.")
        if target.status not in OPEN_STATUSES:
            raise forms.ValidationError(
                f"Session {target.external_id} has {target.status}: a continue is handed to "
                "a running session at its next prompt, and this one will have no more. "
                "Start a new session of the agent and continue that one."
            )
        across = crossing(self.source, target)
        if across and not cleaned.get("confirm"):
            self.crossing = across
            raise forms.ValidationError(across)
        cleaned["session"] = target
        return cleaned


admin.site.unregister(Session)


@admin.register(Session)
class SessionAdmin(LifecycleSessionAdmin):
    """Lifecycle's session admin with what memory can do to a session."""

    actions = ["continue_from", "resummarize", "export_json", "reredact"]
    # Sessions are picked by what they were asked, not only by their ids.
    list_display = [
        "external_id",
        "first_prompt_shown",
        *[f for f in LifecycleSessionAdmin.list_display if f != "external_id"],
    ]
    search_fields = [*LifecycleSessionAdmin.search_fields, "summary__request"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        return _first_prompts(super().get_queryset(request))

    @admin.display(description="first prompt")
    def first_prompt_shown(self, session: Any) -> str:
        prompt = " ".join(str(getattr(session, "first_prompt", "") or "").split())
        return (prompt[:80] + "…") if len(prompt) > 81 else prompt or "—"

    @admin.action(description="Continue from this session…")
    def continue_from(self, request: HttpRequest, queryset: QuerySet[Session]) -> Any:
        """Ask which session inherits, then run a manual continue into it."""
        sources = list(queryset.select_related("team", "agent")[:2])
        if len(sources) != 1:
            self.message_user(
                request, "Select exactly one session to continue from.", messages.WARNING
            )
            return None
        source = sources[0]
        applying = request.POST.get("apply") == "1"
        form = ContinueForm(request.POST if applying else None, source=source)
        if applying and form.is_valid():
            target = form.cleaned_data["session"]
            try:
                record = continuity_continue(target=target, source=source, user=request.user)
            except ApiError as exc:
                self.message_user(request, f"Nothing was continued: {exc.message}", messages.ERROR)
                return None
            pins = len(record.inherited_pins or [])
            when = (
                "at its next prompt (Claude Code: the answer to its next UserPromptSubmit; "
                "OpenClaw: its next before_prompt_build), once"
            )
            self.log_change(
                request,
                target,
                f"Continued from session {source} (continuity record {record.pk}; "
                f"{pins} pin(s) inherited)",
            )
            self.log_change(
                request, source, f"Continued into session {target} (continuity record {record.pk})"
            )
            self.message_user(
                request,
                format_html(
                    "Session {} now continues from {}: continuity record #{}, {} pin(s) "
                    "inherited, a preamble of {} characters, handed to the session {}. "
                    '<a href="{}">See it on the dashboard</a>.',
                    target,
                    source,
                    record.pk,
                    pins,
                    len(record.preamble),
                    when,
                    reverse("dashboard:session", args=[target.pk]) + "#continuity",
                ),
                messages.SUCCESS,
            )
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Continue from a session",
            "opts": self.model._meta,
            "source": source,
            "form": form,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/lifecycle/session/continue_from.html", context)

    @admin.action(description="Re-summarize the selected sessions")
    def resummarize(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        """Queue a summary rebuild per selected session (an LLM may take its time: never
        inside the request); each run logs what it built."""
        sessions = list(queryset.select_related("team"))
        ids = [str(session.pk) for session in sessions]
        transaction.on_commit(lambda: [summarize_session.delay(pk) for pk in ids])
        self._log(request, sessions, "Re-summarize queued")
        self.message_user(
            request,
            f"Queued a summary rebuild for {len(sessions)} session(s); the dashboard shows "
            "each new summary when it is done.",
            messages.SUCCESS,
        )

    @admin.action(description="Export the selected sessions as JSON")
    def export_json(self, request: HttpRequest, queryset: QuerySet[Session]) -> HttpResponse:
        """One JSON document per session (a list of them when several are selected)."""
        sessions = list(queryset.select_related("team", "agent").order_by("started_at", "id"))
        documents = [session_export(session) for session in sessions]
        body: Any = documents[0] if len(documents) == 1 else documents
        self._log(request, sessions, "Exported as JSON")
        name = (
            f"session-{sessions[0].pk}.json"
            if len(sessions) == 1
            else f"sessions-{len(sessions)}.json"
        )
        response = HttpResponse(
            json.dumps(body, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2),
            content_type="application/json",
        )
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

    @admin.action(description="Re-redact the selected sessions (current rules)")
    def reredact(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        """Queue the current redaction rules over the selected sessions' rows written under
        older ones (their events, memory, pins and agents); the run logs what it changed."""
        sessions = list(queryset)
        ids = [str(session.pk) for session in sessions]
        transaction.on_commit(lambda: reredact_sessions.delay(ids))
        self._log(request, sessions, f"Re-redaction queued (rules v{RULES_VERSION})")
        self.message_user(
            request,
            f"Queued re-redaction of {len(sessions)} session(s) under rules v{RULES_VERSION}; "
            "rows already under these rules are left as they are.",
            messages.SUCCESS,
        )
