"""Admin for teams, members and tokens (a new token is shown once, at creation), and the
read-only audit log of every change made through the admin.

Staff who are not superusers see only their own teams' objects: every model admin of
the project derives from :class:`TeamScopedAdmin`, which filters the lists, the objects
that can be opened, the choices of every foreign key and the team filters.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html

from .audit import admin_user_id
from .authentication import forget_token
from .models import ApiToken, Membership, Team, hash_token
from .refusals import refusals_fold

# The admin names the product, not the framework.
admin.site.site_header = "SessionHub administration"
admin.site.site_title = "SessionHub admin"
admin.site.index_title = "Teams, sessions and memory"


def admin_team_ids(request: HttpRequest) -> list[int] | None:
    """The teams whose objects the admin shows this user; None for every team."""
    user = request.user
    if getattr(user, "is_superuser", False):
        return None
    cached = getattr(request, "_admin_team_ids", None)
    if cached is None:
        memberships = Membership.objects.filter(user_id=user.pk or 0)  # no user has pk 0
        cached = list(memberships.values_list("team_id", flat=True))
        request._admin_team_ids = cached  # type: ignore[attr-defined]
    return cached


def _team_path(model: type[Model]) -> str | None:
    if model is Team:
        return "pk"
    names = {f.name for f in model._meta.get_fields()}
    return "team" if "team" in names else None


class ReadOnlyAdminMixin:
    """Viewable, never added, changed or deleted through the admin."""

    model: type[Model]

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


class TeamScopedAdmin(admin.ModelAdmin):
    """A model admin that shows staff who are not superusers only their teams' objects.

    ``team_field``: the path from the model to its team (``None``: superusers only).
    """

    team_field: str | None = "team"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        teams = admin_team_ids(request)
        if teams is None:
            return queryset
        if self.team_field is None:
            return queryset.none()
        return queryset.filter(**{f"{self.team_field}__in": teams})

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        teams = admin_team_ids(request)
        path = _team_path(db_field.related_model)
        if teams is not None and path is not None:
            kwargs["queryset"] = db_field.related_model._default_manager.filter(
                **{f"{path}__in": teams}
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_list_filter(self, request: HttpRequest) -> Any:
        # The plain related filter lists every team there is; this one only the teams of
        # the objects shown.
        return [
            ("team", admin.RelatedOnlyFieldListFilter) if item == "team" else item
            for item in super().get_list_filter(request)
        ]


class ReadOnlyAdmin(ReadOnlyAdminMixin, TeamScopedAdmin):
    """A team's rows, viewable only."""


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(TeamScopedAdmin):
    list_display = ["slug", "name", "llm_daily_token_budget", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]
    prepopulated_fields = {"slug": ["name"]}
    date_hierarchy = "created_at"
    team_field = "pk"

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A new team is outside every team a non-superuser belongs to.
        return bool(getattr(request.user, "is_superuser", False)) and super().has_add_permission(
            request
        )


@admin.register(Membership)
class MembershipAdmin(TeamScopedAdmin):
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
class ApiTokenAdmin(TeamScopedAdmin):
    form = ApiTokenForm
    list_display = [
        "name",
        "team",
        "prefix",
        "scopes",
        "created_at",
        "last_used_at",
        "last_event_at",
        "refused_count",
        "revoked_at",
    ]
    list_filter = ["team", "revoked_at"]
    search_fields = ["name", "prefix", "gateway"]
    readonly_fields = [
        "prefix",
        "created_by",
        "created_at",
        "last_used_at",
        "last_event_at",
        "refused_count",
        "last_refused_at",
        "last_refused_status",
        "revoked_at",
    ]
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
            obj.created_by_id = request.user.pk
            super().save_model(request, obj, form, change)
            messages.warning(
                request,
                f"New token for {obj.team}: {raw} — copy it now, it will not be shown again.",
            )
            return
        super().save_model(request, obj, form, change)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        # Refused requests wait in the cache until someone looks: bring them in first.
        refusals_fold(self.get_queryset(request)[:500])
        return super().changelist_view(request, extra_context)

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        live = list(queryset.filter(revoked_at__isnull=True))
        count = queryset.filter(pk__in=[t.pk for t in live]).update(revoked_at=timezone.now())
        for token in live:
            forget_token(token)  # at once, in every process: not after the cache's seconds
        if live:
            LogEntry.objects.log_actions(
                user_id=admin_user_id(request),
                queryset=live,
                action_flag=CHANGE,
                change_message="Revoked",
            )
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)


@admin.register(LogEntry)
class LogEntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
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
        kind = entry.content_type
        if entry.action_flag != 3 and kind is not None and entry.object_id:
            try:
                url = reverse(
                    f"admin:{kind.app_label}_{kind.model}_change",
                    args=[entry.object_id],
                )
            except NoReverseMatch:
                return entry.object_repr
            return format_html('<a href="{}">{}</a>', url, entry.object_repr)
        return entry.object_repr

    @admin.display(description="change")
    def message(self, entry: LogEntry) -> str:
        return entry.get_change_message()

    def get_queryset(self, request: HttpRequest) -> QuerySet[LogEntry]:
        # An entry names objects of any team: a non-superuser sees only their own.
        queryset = super().get_queryset(request)
        if getattr(request.user, "is_superuser", False):
            return queryset
        return queryset.filter(user=request.user)
