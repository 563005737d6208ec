"""Admin for teams, members and tokens. A new token is shown once, at creation."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils import timezone

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
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
