"""Token scopes: each API view names the scope it needs (``required_scope``)."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from .authentication import TokenUser


class HasTokenScope(BasePermission):
    """Allow a token that carries the view's ``required_scope`` (``read`` by default)."""

    message = "This token does not have the scope this endpoint needs"

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not isinstance(user, TokenUser):
            return False
        scope = getattr(view, "required_scope", "read")
        return user.token.has_scope(scope)
