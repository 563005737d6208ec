"""``/api/v1/whoami``: which team and token a request authenticates as."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .authentication import TokenUser, caller
from .errors import ApiErrorSerializer


class AnyTokenScope(BasePermission):
    """Any valid token, whatever its scopes: a client checks its token with it."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, TokenUser)


_WHOAMI = inline_serializer(
    "WhoAmI",
    {
        "team": serializers.CharField(),
        "team_name": serializers.CharField(),
        "token": serializers.CharField(),
        "prefix": serializers.CharField(),
        "gateway": serializers.CharField(),
        "scopes": serializers.ListField(child=serializers.CharField()),
    },
)


class WhoAmIApi(APIView):
    """The caller's team, token name and scopes: a hook client's ``status`` asks it to say
    whether its token works (GET, or POST with any JSON body)."""

    permission_classes = [AnyTokenScope]

    def answer(self, request: Request) -> Response:
        token = caller(request).token
        return Response(
            {
                "team": token.team.slug,
                "team_name": token.team.name,
                "token": token.name,
                "prefix": token.prefix,
                "gateway": token.gateway_name,
                "scopes": list(token.scopes),
            }
        )

    @extend_schema(responses={200: _WHOAMI, 401: ApiErrorSerializer})
    def get(self, request: Request) -> Response:
        return self.answer(request)

    @extend_schema(request=None, responses={200: _WHOAMI, 401: ApiErrorSerializer})
    def post(self, request: Request) -> Response:
        return self.answer(request)
