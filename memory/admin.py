"""Admin for what memory distils."""

from __future__ import annotations

from django.contrib import admin

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


@admin.register(Pin)
class PinAdmin(admin.ModelAdmin):
    list_display = ["label", "agent", "priority", "pinned_at", "unpinned_at", "origin_session"]
    list_filter = ["priority", "team"]
    search_fields = ["label", "content", "agent__name"]
    raw_id_fields = ["agent", "origin_session", "inherited_from", "inherited_into"]
    date_hierarchy = "pinned_at"


@admin.register(StreamTail)
class StreamTailAdmin(admin.ModelAdmin):
    list_display = ["session", "captured_at", "token_count"]
    search_fields = ["text", "final_message"]
    raw_id_fields = ["session", "event"]
    date_hierarchy = "captured_at"


@admin.register(Observation)
class ObservationAdmin(admin.ModelAdmin):
    list_display = ["tool_name", "session", "occurred_at", "failed", "input_digest"]
    list_filter = ["failed", "tool_name"]
    search_fields = ["tool_name", "input_digest", "output_digest"]
    raw_id_fields = ["session", "event"]
    date_hierarchy = "occurred_at"


@admin.register(Summary)
class SummaryAdmin(admin.ModelAdmin):
    list_display = ["session", "method", "fallback_reason", "updated_at"]
    list_filter = ["method"]
    search_fields = ["request", "completed", "learned", "next_steps"]
    raw_id_fields = ["session"]
    date_hierarchy = "updated_at"


@admin.register(SessionFeatures)
class SessionFeaturesAdmin(admin.ModelAdmin):
    list_display = ["session", "updated_at"]
    raw_id_fields = ["session"]


@admin.register(ContinuityRecord)
class ContinuityRecordAdmin(admin.ModelAdmin):
    list_display = ["session", "trigger", "requested_by", "created_at"]
    list_filter = ["trigger"]
    raw_id_fields = ["session", "sources"]
    date_hierarchy = "created_at"


@admin.register(LlmUsage)
class LlmUsageAdmin(admin.ModelAdmin):
    list_display = ["team", "day", "tokens", "calls"]
    list_filter = ["team"]


@admin.register(TaskFailure)
class TaskFailureAdmin(admin.ModelAdmin):
    list_display = ["task_name", "exception", "occurred_at"]
    list_filter = ["task_name"]
    search_fields = ["exception", "task_id"]
    date_hierarchy = "occurred_at"
