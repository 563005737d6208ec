"""Admin for agents, sessions and the (read-only) event log."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import Agent, LifecycleEvent, Session


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "external_id", "source", "team", "project", "last_seen_at"]
    list_filter = ["source", "team"]
    search_fields = ["name", "external_id", "project"]
    readonly_fields = ["id", "created_at"]


class EventInline(admin.TabularInline):
    model = LifecycleEvent
    fields = ["occurred_at", "kind", "hook", "phase", "event_id"]
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True
    ordering = ["occurred_at", "id"]


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = [
        "external_id",
        "agent",
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
    list_select_related = ["agent"]
    raw_id_fields = ["agent", "previous_session", "continued_by"]
    readonly_fields = [f.name for f in Session._meta.fields if f.name not in ("team",)]
    inlines = [EventInline]


@admin.register(LifecycleEvent)
class LifecycleEventAdmin(admin.ModelAdmin):
    """The log is append-only: nothing here can add, change or delete an event."""

    list_display = ["occurred_at", "kind", "source", "hook", "session", "event_id", "received_at"]
    list_filter = ["kind", "source", "team"]
    search_fields = ["event_id", "hook", "session__external_id"]
    date_hierarchy = "occurred_at"
    list_select_related = ["session"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in LifecycleEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
