"""Admin for teams, members and tokens (a new token is shown once, at creation), and the
read-only audit log of every change made through the admin."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html

from .models import ApiToken, Membership, Team, hash_token


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "llm_daily_token_budget", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]
    prepopulated_fields = {"slug": ["name"]}
    date_hierarchy = "created_at"


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role", "joined_at"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "user__email", "team__slug", "team__name"]
    autocomplete_fields = ["user", "team"]
    list_select_related = ["user", "team"]
    date_hierarchy = "joined_at"


class ApiTokenForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=ApiToken.Scope.choices, widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = ApiToken
        fields = ["team", "name", "gateway", "scopes"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    form = ApiTokenForm
    list_display = ["name", "team", "prefix", "scopes", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["team", "revoked_at"]
    search_fields = ["name", "prefix", "gateway"]
    readonly_fields = ["prefix", "created_by", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]
    date_hierarchy = "created_at"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # A token's team never changes after creation: its hash is bound to it.
        return [*self.readonly_fields, "team"] if obj else list(self.readonly_fields)

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if not change:
            raw, prefix = ApiToken.generate()
            obj.prefix = prefix
            obj.token_hash = hash_token(raw)
            obj.created_by = request.user
            super().save_model(request, obj, form, change)
            messages.warning(
                request,
                f"New token for {obj.team}: {raw} — copy it now, it will not be shown again.",
            )
            return
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        live = list(queryset.filter(revoked_at__isnull=True))
        count = queryset.filter(pk__in=[t.pk for t in live]).update(revoked_at=timezone.now())
        if live:
            LogEntry.objects.log_actions(
                user_id=request.user.pk, queryset=live, action_flag=CHANGE, change_message="Revoked"
            )
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)


@admin.register(LogEntry)
class LogEntryAdmin(admin.ModelAdmin):
    """Who changed what and when, through the admin or the dashboard: read-only."""

    list_display = ["action_time", "user", "action", "content_type", "target", "message"]
    list_filter = [
        "action_flag",
        ("content_type", admin.RelatedOnlyFieldListFilter),
        ("user", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["object_repr", "change_message", "user__username"]
    date_hierarchy = "action_time"
    list_select_related = ["user", "content_type"]
    ordering = ["-action_time"]

    @admin.display(description="action", ordering="action_flag")
    def action(self, entry: LogEntry) -> str:
        return {1: "added", 2: "changed", 3: "deleted"}.get(entry.action_flag, "?")

    @admin.display(description="object", ordering="object_repr")
    def target(self, entry: LogEntry) -> str:
        if entry.action_flag != 3 and entry.content_type_id and entry.object_id:
            try:
                url = reverse(
                    f"admin:{entry.content_type.app_label}_{entry.content_type.model}_change",
                    args=[entry.object_id],
                )
            except NoReverseMatch:
                return entry.object_repr
            return format_html('<a href="{}">{}</a>', url, entry.object_repr)
        return entry.object_repr

    @admin.display(description="change")
    def message(self, entry: LogEntry) -> str:
        return entry.get_change_message()

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in LogEntry._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
