"""Keeps an instance's first admin on its team's data (``superusers_join_sole_team``)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from .services import superusers_join_sole_team


def on_user_or_team_saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    """A superuser saved, or the first team created: after commit, the sole team's admins."""
    if kwargs.get("raw"):
        return  # loading fixtures
    if getattr(instance, "is_superuser", False) or (created and sender.__name__ == "Team"):
        transaction.on_commit(superusers_join_sole_team)
