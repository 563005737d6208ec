"""Admin for agents, sessions and the (read-only) event log.

The session actions say what they did (counts in a message) and leave an entry in the
admin log (who, what, when) on every session they touched.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.paginator import Paginator
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html

from sessionhub.admin import TeamScopedAdmin
from sessionhub.audit import admin_user_id
from sessionhub.exceptions import ApiError

from .models import Agent, LifecycleEvent, Session

CONTINUE_CHOICES = 100
ESTIMATE_ABOVE = 100_000


class EstimatedCountPaginator(Paginator):
    """Counts an unfiltered big table from PostgreSQL's statistics instead of COUNT(*):
    the event log grows without bound and the admin would count it on every page."""

    @cached_property
    def count(self) -> int:
        # The admin's change list hands this paginator a queryset.
        queryset = cast(QuerySet, self.object_list)
        if connection.vendor == "postgresql" and not queryset.query.where:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE relname = %s",
                    [queryset.model._meta.db_table],
                )
                row = cursor.fetchone()
            if row and row[0] > ESTIMATE_ABOVE:
                return int(row[0])
        return super().count


@admin.register(Agent)
class AgentAdmin(TeamScopedAdmin):
    list_display = [
        "name",
        "external_id",
        "source",
        "team",
        "project",
        "created_at",
        "last_seen_at",
    ]
    list_filter = ["source", "team"]
    search_fields = ["name", "external_id", "project"]
    readonly_fields = ["id", "created_at"]
    date_hierarchy = "created_at"

    def view_on_site(self, obj: Agent) -> str:
        return reverse("dashboard:agent", args=[obj.pk])


class EventInline(admin.TabularInline):
    model = LifecycleEvent
    fields = ("occurred_at", "kind", "hook", "phase", "event_id")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True
    ordering = ["occurred_at", "id"]


class ContinueForm(forms.Form):
    """Which session continues from the chosen one (same team only)."""

    target = forms.ChoiceField(
        label="Session that continues",
        required=False,
        help_text=f"The {CONTINUE_CHOICES} newest sessions of the team.",
    )
    target_id = forms.CharField(
        label="…or its id",
        required=False,
        help_text="A SessionHub id or the gateway's session id, when it is not in the list.",
    )

    def __init__(self, *args: Any, source: Session, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source = source
        candidates = (
            Session.objects.filter(team_id=source.team_id)
            .exclude(pk=source.pk)
            .select_related("agent")
            .order_by("-started_at", "-id")[:CONTINUE_CHOICES]
        )
        cast(forms.ChoiceField, self.fields["target"]).choices = [("", "—")] + [
            (
                str(s.pk),
                f"{s.external_id} · {s.agent} · {s.get_status_display()}"
                f" · {s.started_at:%Y-%m-%d %H:%M}"
                if s.started_at
                else f"{s.external_id} · {s.agent} · {s.get_status_display()}",
            )
            for s in candidates
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
        cleaned["session"] = target
        return cleaned


@admin.register(Session)
class SessionAdmin(TeamScopedAdmin):
    list_display = [
        "external_id",
        "agent",
        "team",
        "source",
        "status",
        "channel",
        "started_at",
        "ended_at",
        "end_reason",
        "event_count",
        "compaction_count",
    ]
    list_filter = ["status", "source", "end_reason", "recovered", "channel", "team"]
    search_fields = ["external_id", "session_key", "project", "cwd", "agent__name"]
    date_hierarchy = "started_at"
    list_select_related = ["agent", "team"]
    raw_id_fields = ["agent", "previous_session", "continued_by"]
    # Sessions come from ingestion and move only by their events; a session's team never
    # changes (its events, pins and records stay in that team).
    readonly_fields = [f.name for f in Session._meta.fields]
    inlines = [EventInline]
    actions = ["continue_from", "resummarize", "export_json", "reredact"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False

    def view_on_site(self, obj: Session) -> str:
        return reverse("dashboard:session", args=[obj.pk])

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def _log(self, request: HttpRequest, sessions: list[Session], message: str) -> None:
        LogEntry.objects.log_actions(
            user_id=admin_user_id(request),
            queryset=sessions,
            action_flag=CHANGE,
            change_message=message,
        )

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
            from memory.continuity import continuity_continue

            target = form.cleaned_data["session"]
            try:
                record = continuity_continue(target=target, source=source, user=request.user)
            except ApiError as exc:
                self.message_user(request, f"Nothing was continued: {exc.message}", messages.ERROR)
                return None
            pins = len(record.inherited_pins or [])
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
                    'inherited, a preamble of {} characters. <a href="{}">See it on the '
                    "dashboard</a>.",
                    target,
                    source,
                    record.pk,
                    pins,
                    len(record.preamble),
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
        """Rebuild each selected session's summary now."""
        from memory.pipeline import summary_build

        sessions = list(queryset.select_related("team"))
        methods: dict[str, int] = {}
        for session in sessions:
            summary = summary_build(session)
            methods[summary.method] = methods.get(summary.method, 0) + 1
        self._log(request, sessions, "Re-summarized")
        how = ", ".join(f"{method}: {n}" for method, n in sorted(methods.items()))
        self.message_user(
            request,
            f"Re-summarized {len(sessions)} session(s){f' ({how})' if how else ''}.",
            messages.SUCCESS,
        )

    @admin.action(description="Export the selected sessions as JSON")
    def export_json(self, request: HttpRequest, queryset: QuerySet[Session]) -> HttpResponse:
        """One JSON document per session (a list of them when several are selected)."""
        from memory.export import session_export

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

    @admin.action(description="Re-redact everything stored (current rules)")
    def reredact(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        """Apply the current redaction rules to every row written under older ones."""
        from memory.pipeline import reredact_everything

        changed = reredact_everything()
        total = sum(changed.values())
        parts = ", ".join(f"{name} {n}" for name, n in changed.items())
        self._log(request, list(queryset), f"Re-redaction run: {total} row(s) changed ({parts})")
        self.message_user(
            request,
            f"Re-redacted {total} row(s) across all sessions ({parts}); rows already under "
            "the current rules were left as they were.",
            messages.SUCCESS,
        )


@admin.register(LifecycleEvent)
class LifecycleEventAdmin(TeamScopedAdmin):
    """The log is append-only: nothing here can add, change or delete an event."""

    list_display = [
        "occurred_at",
        "kind",
        "source",
        "hook",
        "session",
        "team",
        "event_id",
        "received_at",
    ]
    list_filter = ["kind", "source", "team"]
    search_fields = ["event_id", "hook", "session__external_id"]
    date_hierarchy = "occurred_at"
    list_select_related = ["session", "team"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in LifecycleEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
