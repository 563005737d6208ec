"""Writes for teams and tokens."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils.text import slugify

from .models import ApiToken, Membership, Team, hash_token


class InvalidScope(ValueError):
    """A scope name that tokens do not have."""


def team_get_or_create(*, slug: str, name: str = "") -> Team:
    """The team with this slug, created when missing."""
    team, _ = Team.objects.get_or_create(slug=slugify(slug)[:64], defaults={"name": name or slug})
    return team


def membership_add(*, team: Team, user: User, role: str = "member") -> Membership:
    """Make a user a member of a team (idempotent; updates the role)."""
    membership, _ = Membership.objects.update_or_create(
        team=team, user=user, defaults={"role": role}
    )
    return membership


@transaction.atomic
def api_token_create(
    *,
    team: Team,
    name: str,
    scopes: Iterable[str],
    gateway: str = "",
    created_by: User | None = None,
) -> tuple[ApiToken, str]:
    """Create a token; the raw value is returned once and never stored."""
    scope_list = sorted({s.strip() for s in scopes if s.strip()})
    valid = set(ApiToken.Scope.values)
    unknown = [s for s in scope_list if s not in valid]
    if unknown or not scope_list:
        raise InvalidScope(
            f"Unknown scopes {unknown}; choose from {sorted(valid)}"
            if unknown
            else "At least one scope is needed"
        )
    raw, prefix = ApiToken.generate()

    token = ApiToken.objects.create(
        team=team,
        name=name,
        gateway=gateway,
        prefix=prefix,
        token_hash=hash_token(raw),
        scopes=scope_list,
        created_by=created_by,
    )
    return token, raw


def superusers_join_sole_team() -> int:
    """An instance with exactly one team: every superuser who belongs to no team joins it
    as an admin. What a new admin expects of ``make superuser`` on an instance that already
    holds sessions is to land on its data, not on "You are not in a team yet"; with two
    teams or more, membership stays an explicit choice (tenants stay apart). Returns how
    many joined."""
    teams = list(Team.objects.order_by("pk")[:2])
    if len(teams) != 1:
        return 0
    lonely = get_user_model().objects.filter(is_superuser=True, memberships__isnull=True)
    joined = 0
    for user in lonely:
        Membership.objects.get_or_create(
            team=teams[0], user=user, defaults={"role": Membership.Role.ADMIN}
        )
        joined += 1
    return joined
