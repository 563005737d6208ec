"""The admin's audit log (``LogEntry``) as the project's changes write to it."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest


def admin_user_id(request: HttpRequest) -> int:
    """The signed-in user a logged change is recorded under (never an anonymous one)."""
    pk = request.user.pk
    if pk is None:
        raise PermissionDenied("Changes are recorded under a signed-in user")
    return int(pk)
