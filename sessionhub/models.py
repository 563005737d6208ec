"""Teams, their members and their API tokens."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "shub_"  # noqa: S105 - a public marker, not a secret


class Team(models.Model):
    """A workspace: every session, event and pin belongs to exactly one team."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams", blank=True
    )
    llm_daily_token_budget = models.PositiveIntegerField(
        default=200_000, help_text="Tokens the LLM summarizer may spend per day for this team."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A user's place in a team."""

    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        ADMIN = "admin", "Admin"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints: ClassVar = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_unique_team_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


def hash_token(raw: str) -> str:
    """The stored form of a token: tokens carry 256 random bits, so one SHA-256 suffices."""
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token for gateways and scripts; only its hash and a short prefix are kept."""

    class Scope(models.TextChoices):
        INGEST = "ingest", "Ingest events"
        READ = "read", "Read sessions"
        ADMIN = "admin", "Administer"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100)
    gateway = models.CharField(
        max_length=100,
        blank=True,
        help_text="Which gateway uses this token; part of a Claude Code agent's identity. "
        "Defaults to the token's name.",
    )
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(
        null=True, blank=True, help_text="When an event it sent was last stored (to the minute)"
    )
    refused_count = models.PositiveIntegerField(
        default=0, help_text="Requests refused for this token (401, 403)"
    )
    last_refused_at = models.DateTimeField(null=True, blank=True)
    last_refused_status = models.PositiveSmallIntegerField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def gateway_name(self) -> str:
        return self.gateway or self.name

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes or self.Scope.ADMIN in self.scopes

    def matches(self, raw: str) -> bool:
        """Constant-time comparison of a presented token with the stored hash."""
        return hmac.compare_digest(self.token_hash, hash_token(raw))

    @classmethod
    def generate(cls) -> tuple[str, str]:
        """A fresh raw token and its display prefix."""
        prefix = secrets.token_hex(4)
        return f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}", prefix

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
        from .authentication import forget_token

        forget_token(self)
