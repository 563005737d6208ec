"""Token scopes: each API view names the scope it needs (``required_scope``).

What each scope may do (docs/reliability.md, "Token scopes"):

* ``ingest`` — post events, and ask the continuity preamble of a session (what a gateway
  injects at a session's start: the preamble, the sessions it drew from, the inherited
  pins). It reads nothing else: no list, timeline, memory, export or record.
* ``read`` — every read of the team's data.
* Writes that answer with memory the caller chooses (create, edit or unpin a pin by id;
  continue a session from a chosen one) need both: a write-only token could otherwise
  read a pin by editing it with no change, or any session's memory by continuing from it.
* ``admin`` — everything.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from .authentication import TokenUser
from .models import ApiToken

SCOPE_DENIED = "This token does not have the scope this endpoint needs"


def token_has_scope(token: ApiToken, scope: str | tuple[str, ...]) -> bool:
    """Whether a token carries ``scope`` (one scope, or a tuple of scopes all needed)."""
    if isinstance(scope, tuple):
        return all(token.has_scope(s) for s in scope)
    return token.has_scope(scope)


class HasTokenScope(BasePermission):
    """Allow a token that carries the view's ``required_scope`` (``read`` by default): one
    scope, or a tuple of scopes that are all needed."""

    message = SCOPE_DENIED

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not isinstance(user, TokenUser):
            return False
        return token_has_scope(user.token, getattr(view, "required_scope", "read"))
