"""Admin for agents, sessions and the (read-only) event log.

The session actions say what they did (counts in a message) and leave an entry in the
admin log (who, what, when) on every session they touched.
"""

from __future__ import annotations

from typing import cast

from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.functional import cached_property

from sessionhub.admin import ReadOnlyAdmin, TeamScopedAdmin
from sessionhub.audit import admin_user_id

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
    # The memory app adds its actions (continue by hand, re-summarize, export,
    # re-redact) in a subclass it registers in this one's place (memory/admin.py).
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


@admin.register(LifecycleEvent)
class LifecycleEventAdmin(ReadOnlyAdmin):
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
