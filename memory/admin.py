"""Admin for what memory distils. Continuity records and task failures are evidence of
what happened, so they are read-only here."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse

from sessionhub.admin import TeamScopedAdmin

from .models import (
    ContinuityRecord,
    LlmUsage,
    Observation,
    Pin,
    SessionFeatures,
    StreamTail,
    Summary,
    TaskFailure,
)


class ReadOnlyAdmin(TeamScopedAdmin):
    """Viewable, never added, changed or deleted through the admin."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in self.model._meta.fields] + [
            f.name for f in self.model._meta.many_to_many
        ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Pin)
class PinAdmin(TeamScopedAdmin):
    list_display = [
        "label",
        "agent",
        "team",
        "priority",
        "pinned_at",
        "unpinned_at",
        "origin_session",
        "inherited_into",
    ]
    list_filter = ["priority", ("unpinned_at", admin.EmptyFieldListFilter), "team"]
    search_fields = ["label", "content", "agent__name", "agent__external_id"]
    raw_id_fields = ["agent", "origin_session", "inherited_from", "inherited_into"]
    date_hierarchy = "pinned_at"
    list_select_related = ["agent", "team", "origin_session", "inherited_into"]


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
    ]
    list_filter = ["trigger", "team"]
    search_fields = ["session__external_id", "preamble", "requested_by"]
    date_hierarchy = "created_at"
    list_select_related = ["session", "team", "requested_by_user"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ContinuityRecord]:
        return super().get_queryset(request).annotate(source_total=Count("sources"))

    @admin.display(description="sources", ordering="source_total")
    def source_count(self, record: Any) -> int:
        return record.source_total

    @admin.display(description="candidates")
    def candidate_count(self, record: ContinuityRecord) -> int:
        return len(record.candidates or [])

    @admin.display(description="pins inherited")
    def pin_count(self, record: ContinuityRecord) -> int:
        return len(record.inherited_pins or [])

    def view_on_site(self, record: ContinuityRecord) -> str:
        return reverse("dashboard:session", args=[record.session_id]) + "#continuity"


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
