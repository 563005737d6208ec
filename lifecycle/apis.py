"""The ingestion and session read API."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any, cast

import django_filters
from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import exceptions, generics, serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessionhub.authentication import (
    AUTHENTICATE_HEADER,
    authenticate,
    caller,
    token_event_seen,
)
from sessionhub.errors import ApiErrorSerializer, error_body, error_response, json_response
from sessionhub.exceptions import NotFound, PayloadTooLarge, ValidationFailed
from sessionhub.models import ApiToken, Team
from sessionhub.parsers import is_json_media_type, json_body
from sessionhub.permissions import SCOPE_DENIED, token_has_scope
from sessionhub.throttling import token_throttle_wait

from . import selectors, services, signals
from .adapters.base import as_key
from .models import (
    EVENT_FIELDS,
    Agent,
    EndReason,
    EventKind,
    LifecycleEvent,
    Session,
    SessionStatus,
    Source,
)

# --- ingestion ---------------------------------------------------------------------------

_RESULT_FIELDS: dict[str, serializers.Field[Any, Any, Any, Any]] = {
    "index": serializers.IntegerField(),
    "status": serializers.ChoiceField(["accepted", "duplicate", "rejected"]),
    "event_id": serializers.CharField(required=False),
    "session_id": serializers.UUIDField(required=False),
    "field": serializers.CharField(required=False),
    "reason": serializers.CharField(required=False),
    "code": serializers.CharField(required=False),
}
_INGEST_RESPONSE = inline_serializer(
    "IngestResponse",
    {
        "accepted": serializers.IntegerField(),
        "duplicates": serializers.IntegerField(),
        "rejected": serializers.IntegerField(),
        "results": inline_serializer("EventResult", _RESULT_FIELDS, many=True),
    },
)
_ERROR = ApiErrorSerializer
_ERRORS = {
    400: _ERROR,
    401: _ERROR,
    403: _ERROR,
    413: _ERROR,
    429: _ERROR,
    503: _ERROR,
}


def _one_or_list(data: Any) -> list[Any]:
    return data if isinstance(data, list) else [data]


def _canonical_events(data: Any) -> list[Any]:
    """Canonical events: one object, a list, or ``{"events": [...]}``."""
    if isinstance(data, dict) and "events" in data and "kind" not in data:
        events = data["events"]
        if not isinstance(events, list):
            raise ValidationFailed("events must be a list", code="wrong_type")
        return events
    return _one_or_list(data)


def batch(events: list[Any]) -> list[Any]:
    """The events of a body within the batch rules; raises before anything is stored."""
    limit = settings.SESSIONHUB["MAX_BATCH_EVENTS"]
    if len(events) > limit:
        raise PayloadTooLarge(f"A batch holds at most {limit} events", code="batch_too_large")
    if not events:
        raise ValidationFailed("The batch is empty", code="empty_batch")
    return events


def ingest_answer(token: ApiToken, source: str, bodies: list[Any]) -> HttpResponse:
    """Ingest the events and answer with the per-event results."""
    results = services.events_ingest(
        team=token.team, bodies=bodies, adapter=services.adapter_for(source, token)
    )
    counts = {s: 0 for s in (services.ACCEPTED, services.DUPLICATE, services.REJECTED)}
    for result in results:
        counts[result.status] += 1
    if counts[services.ACCEPTED]:
        token_event_seen(token)  # a write at most once a minute per token
    payload: dict[str, Any] = {
        "accepted": counts[services.ACCEPTED],
        "duplicates": counts[services.DUPLICATE],
        "rejected": counts[services.REJECTED],
        "results": [r.as_dict() for r in results],
    }
    waiting = _context_for_prompts(bodies, results)
    if waiting:
        payload["continuity"] = waiting
    if counts[services.REJECTED] == len(results):
        first = results[0]
        message = (
            f"Event rejected: {first.field} {first.reason}"
            if len(results) == 1
            else "Every event of the batch was rejected"
        )
        return json_response(
            error_body(message, "invalid_events", payload), status.HTTP_400_BAD_REQUEST
        )
    return json_response(payload)


@dataclass(frozen=True)
class IngestEndpoint:
    """One ingest URL: the adapter's source, how a body holds its events, and what an
    ``OPTIONS`` request answers about it."""

    source: str
    name: str
    description: str
    events: Callable[[Any], list[Any]] = _one_or_list


# Every answer of an ingest endpoint carries these, whatever its status.
_HEADERS = {"Allow": "POST, OPTIONS", "Vary": "Accept"}


def ingest_request(request: HttpRequest, endpoint: IngestEndpoint) -> HttpResponse:
    """An ingest request, checked as every API request is (in this order): an ``Accept``
    that JSON satisfies (406), the token (401), its ``ingest`` scope (403), its rate
    limit (429), the method (405), then the body (400, 413, 415) and the batch rules,
    before anything is stored. Every refusal answers in the one error shape."""
    try:
        response = _ingest(request, endpoint)
    except Exception as exc:  # noqa: BLE001 - mapped as the API maps it, or raised again
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            exc.auth_header = AUTHENTICATE_HEADER  # type: ignore[union-attr]
        response = error_response(exc, request)
    for name, value in _HEADERS.items():
        response[name] = value
    return response


def _ingest(request: HttpRequest, endpoint: IngestEndpoint) -> HttpResponse:
    meta = request.META
    if not _accepts_json(meta.get("HTTP_ACCEPT", "")):
        raise exceptions.NotAcceptable()
    user = None
    try:
        user = authenticate(request)
    finally:
        # As for the API's other views: what reads the request later (logging, the
        # refusal count) sees the token's caller, not Django's session user.
        request.user = user  # type: ignore[assignment]
    if user is None:
        raise exceptions.NotAuthenticated()
    if not token_has_scope(user.token, "ingest"):
        raise exceptions.PermissionDenied(SCOPE_DENIED)
    wait = token_throttle_wait(user.token.pk)
    if wait is not None:
        raise exceptions.Throttled(wait)
    if request.method == "OPTIONS":
        return json_response(
            {
                "name": endpoint.name,
                "description": endpoint.description,
                "renders": ["application/json"],
                "parses": ["application/json"],
            }
        )
    if request.method != "POST":
        raise exceptions.MethodNotAllowed(str(request.method))
    stream = _body_stream(request)
    if stream is None:
        raise ValidationFailed("Request body is empty", code="empty_body")
    content_type = meta.get("CONTENT_TYPE", meta.get("HTTP_CONTENT_TYPE", ""))
    if not is_json_media_type(content_type):
        raise exceptions.UnsupportedMediaType(content_type)
    events = batch(endpoint.events(json_body(stream, meta)))
    return ingest_answer(user.token, endpoint.source, events)


def _accepts_json(accept: str) -> bool:
    """Whether some media range of an ``Accept`` header admits ``application/json`` (no
    header admits anything)."""
    if not accept:
        return True
    for item in accept.split(","):
        main, _, sub = item.split(";", 1)[0].strip().lower().partition("/")
        if main in ("application", "*") and sub in ("json", "*"):
            return True
    return False


def _body_stream(request: HttpRequest) -> Any:
    """The request's body to read, or None when it declares none."""
    meta = request.META
    try:
        length = int(meta.get("CONTENT_LENGTH", meta.get("HTTP_CONTENT_LENGTH", 0)))
    except (ValueError, TypeError):
        length = 0
    if length == 0:
        return None
    return request


def _reads_context(body: Any) -> bool:
    """Whether the client says it hands this event's answer to the agent (the hook client
    on a prompt: ``"sessionhub": {"reads_context": true}``)."""
    meta = body.get("sessionhub") if isinstance(body, dict) else None
    return isinstance(meta, dict) and meta.get("reads_context") is True


def _context_for_prompts(bodies: list[Any], results: list[Any]) -> list[dict[str, Any]]:
    """What waits for the sessions that just took a prompt whose answer the client reads
    (a manual continue), claimed as delivered; empty nearly always."""
    provider = signals.prompt_context()
    if provider is None:
        return []
    sessions = [
        r.session_id
        for r in results
        if r.kind == EventKind.PROMPT
        and r.status == services.ACCEPTED
        and r.session_id
        and _reads_context(bodies[r.index])
    ]
    return provider(sessions) if sessions else []


_CANONICAL_EXAMPLE = {
    "event_id": "evt-7f3a",
    "kind": "session_start",
    "occurred_at": "2026-11-20T18:18:03Z",
    "agent_id": "research",
    "session_id": "a63e0c32-f938-47b0-b96c-c27ac2d532fa",
    "session_key": "research:discord:channel:1866",
    "channel": "discord",
}


class _IngestSchema(APIView):
    """Describes an ingest endpoint to drf-spectacular, which documents DRF views only. It
    answers no request: the URLconf routes to the plain views below, which carry their
    description as ``cls`` (where drf-spectacular looks for it)."""

    required_scope = "ingest"


class EventsIngestSchema(_IngestSchema):
    """Canonical events: one object, a list, or ``{"events": [...]}``."""

    @extend_schema(
        operation_id="events_ingest",
        request=OpenApiTypes.OBJECT,
        responses={200: _INGEST_RESPONSE, **_ERRORS},
        examples=[OpenApiExample("One event", value=_CANONICAL_EXAMPLE, request_only=True)],
        description=(
            "Store canonical events. Fields: event_id (idempotency key), kind, occurred_at, "
            "agent_id, session_id, and optional session_key, channel, cwd, project, "
            "git_remote, model, reason, previous_session_id, next_session_id, text, "
            "final_message, reasoning, tool_name, phase, message_count, token_count, payload."
        ),
    )
    def post(self, request: Request) -> Response:
        raise NotImplementedError  # pragma: no cover - documentation only


class ClaudeCodeHookSchema(_IngestSchema):
    """The JSON Claude Code writes on a hook's stdin, as is (or a list of them)."""

    @extend_schema(
        operation_id="hooks_claude_code",
        request=OpenApiTypes.OBJECT,
        responses={200: _INGEST_RESPONSE, **_ERRORS},
        description=(
            "Claude Code hook input (session_id, hook_event_name, cwd, transcript_path, ...). "
            "Clients may add `sessionhub: {event_id, occurred_at, git_remote, final_message, "
            'reasoning_tail}`. Works with `"type": "http"` hooks directly.'
        ),
    )
    def post(self, request: Request) -> Response:
        raise NotImplementedError  # pragma: no cover - documentation only


class OpenClawHookSchema(_IngestSchema):
    """``{"hook", "event", "ctx", "ts"}`` from the OpenClaw plugin (or a list of them)."""

    @extend_schema(
        operation_id="hooks_openclaw",
        request=OpenApiTypes.OBJECT,
        responses={200: _INGEST_RESPONSE, **_ERRORS},
    )
    def post(self, request: Request) -> Response:
        raise NotImplementedError  # pragma: no cover - documentation only


class CodexHookSchema(_IngestSchema):
    """The JSON Codex CLI writes on a command hook's stdin, as is (or a list of them)."""

    @extend_schema(
        operation_id="hooks_codex",
        request=OpenApiTypes.OBJECT,
        responses={200: _INGEST_RESPONSE, **_ERRORS},
        description=(
            "Codex CLI hook input (session_id, hook_event_name, cwd, transcript_path, model, "
            "...). Clients may add `sessionhub: {event_id, occurred_at, git_remote, "
            "final_message, reasoning_tail, model, token_count, compact_summary}`."
        ),
    )
    def post(self, request: Request) -> Response:
        raise NotImplementedError  # pragma: no cover - documentation only


class GeminiCliHookSchema(_IngestSchema):
    """The JSON Gemini CLI writes on a command hook's stdin, as is (or a list of them)."""

    @extend_schema(
        operation_id="hooks_gemini_cli",
        request=OpenApiTypes.OBJECT,
        responses={200: _INGEST_RESPONSE, **_ERRORS},
        description=(
            "Gemini CLI hook input (session_id, hook_event_name, cwd, transcript_path, "
            "timestamp, ...). Clients may add `sessionhub: {event_id, occurred_at, "
            "git_remote, final_message, reasoning_tail, model, token_count, compacted, "
            "compact_summary}`."
        ),
    )
    def post(self, request: Request) -> Response:
        raise NotImplementedError  # pragma: no cover - documentation only


def _ingest_view(
    schema: type[_IngestSchema],
    source: str,
    name: str,
    events: Callable[[Any], list[Any]] = _one_or_list,
) -> Callable[..., Any]:
    """The plain view of one ingest URL, with ``schema`` as its OpenAPI description."""
    endpoint = IngestEndpoint(source, name, schema.__doc__ or "", events)

    def view(request: HttpRequest) -> HttpResponse:
        return ingest_request(request, endpoint)

    view.__name__ = view.__qualname__ = schema.__name__.removesuffix("Schema")
    view.__doc__ = endpoint.description
    wrapped: Any = csrf_exempt(view)
    wrapped.cls, wrapped.initkwargs = schema, {}
    return cast(Callable[..., Any], wrapped)


events_ingest = _ingest_view(
    EventsIngestSchema, Source.GENERIC, "Events Ingest Api", _canonical_events
)
hooks_claude_code = _ingest_view(ClaudeCodeHookSchema, Source.CLAUDE_CODE, "Claude Code Hook Api")
hooks_openclaw = _ingest_view(OpenClawHookSchema, Source.OPENCLAW, "Open Claw Hook Api")
hooks_codex = _ingest_view(CodexHookSchema, Source.CODEX, "Codex Hook Api")
hooks_gemini_cli = _ingest_view(GeminiCliHookSchema, Source.GEMINI_CLI, "Gemini Cli Hook Api")


# --- reading -----------------------------------------------------------------------------


class SessionCursorPagination(CursorPagination):
    ordering = "-started_at"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class EventCursorPagination(CursorPagination):
    ordering = "occurred_at"
    page_size = 200
    page_size_query_param = "page_size"
    max_page_size = 1000


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 time in any offset, compared as the same instant in UTC.

    ISO allows offsets up to ±23:59, PostgreSQL only to ±15:59: converting first keeps
    every legal value a valid filter.
    """

    def filter(self, qs: Any, value: Any) -> Any:
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(UTC)
        return super().filter(qs, value)


class KeyFilter(django_filters.CharFilter):
    """An identifier, raw or as stored: matched in its keyed form (``as_key``)."""

    def __init__(self, *args: Any, limit: int = 200, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limit = limit

    def filter(self, qs: Any, value: Any) -> Any:
        return super().filter(qs, as_key(value, limit=self.limit) if value else value)


class SessionFilter(django_filters.FilterSet):
    agent = django_filters.UUIDFilter(field_name="agent_id")
    agent_external_id = KeyFilter(field_name="agent__external_id", limit=300)
    status = django_filters.MultipleChoiceFilter(choices=SessionStatus.choices)
    source = django_filters.ChoiceFilter(choices=Source.choices)
    channel = django_filters.CharFilter()
    end_reason = django_filters.MultipleChoiceFilter(choices=EndReason.choices)
    session_key = KeyFilter(limit=300)
    project = django_filters.CharFilter()
    developer = django_filters.CharFilter()
    external_id = KeyFilter()
    started_after = UtcDateTimeFilter(field_name="started_at", lookup_expr="gte")
    started_before = UtcDateTimeFilter(field_name="started_at", lookup_expr="lt")
    ended_after = UtcDateTimeFilter(field_name="ended_at", lookup_expr="gte")
    ended_before = UtcDateTimeFilter(field_name="ended_at", lookup_expr="lt")

    class Meta:
        model = Session
        fields: list[str] = []


class AgentRefSerializer(serializers.Serializer[Agent]):
    id = serializers.UUIDField()
    external_id = serializers.CharField()
    name = serializers.CharField()
    # A field named like DRF's Field.source attribute, which the stubs type as a string.
    source = serializers.CharField()  # type: ignore[assignment]


class SessionSerializer(serializers.ModelSerializer[Session]):
    agent = AgentRefSerializer()
    message_count = serializers.IntegerField()
    duration_seconds = serializers.FloatField(allow_null=True)

    class Meta:
        model = Session
        fields = [
            "id",
            "external_id",
            "source",
            "agent",
            "session_key",
            "channel",
            "cwd",
            "project",
            "model",
            "trigger",
            "status",
            "started_at",
            "ended_at",
            "suspended_at",
            "last_event_at",
            "end_reason",
            "end_detail",
            "recovered",
            "suspend_count",
            "suspended_seconds",
            "duration_seconds",
            "event_count",
            "message_count",
            "prompt_count",
            "turn_count",
            "tool_use_count",
            "compaction_count",
            "token_count",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "developer",
            "previous_session",
            "continued_by",
        ]


class EventSerializer(serializers.ModelSerializer[LifecycleEvent]):
    class Meta:
        model = LifecycleEvent
        fields = ["id", *EVENT_FIELDS]


# A plain serializer called with many=True is handed the list: its instance type names both.
class SuspendSpanSerializer(
    serializers.Serializer[selectors.SuspendSpan | Sequence[selectors.SuspendSpan]]
):
    suspended_at = serializers.DateTimeField()
    resumed_at = serializers.DateTimeField(allow_null=True)
    seconds = serializers.FloatField(allow_null=True)


class ChainLinkSerializer(serializers.Serializer[Session | Sequence[Session]]):
    id = serializers.UUIDField()
    external_id = serializers.CharField()
    status = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)
    end_reason = serializers.CharField()


class SessionDetailSerializer(SessionSerializer):
    timeline = serializers.SerializerMethodField()
    suspend_spans = serializers.SerializerMethodField()
    chain = serializers.SerializerMethodField()

    class Meta(SessionSerializer.Meta):
        fields = [*SessionSerializer.Meta.fields, "timeline", "suspend_spans", "chain"]

    TIMELINE_LIMIT = 1000

    def _events(self, session: Session) -> list[LifecycleEvent]:
        # DRF passes the context as a dict; the stubs declare a read-only Mapping.
        cache: dict[object, list[LifecycleEvent]] = cast(dict[str, Any], self.context).setdefault(
            "_events", {}
        )
        if session.pk not in cache:
            cache[session.pk] = list(selectors.events_for_session(session)[: self.TIMELINE_LIMIT])
        return cache[session.pk]

    @extend_schema_field(EventSerializer(many=True))
    def get_timeline(self, session: Session) -> Any:
        return EventSerializer(self._events(session), many=True).data

    @extend_schema_field(SuspendSpanSerializer(many=True))
    def get_suspend_spans(self, session: Session) -> Any:
        spans = selectors.suspend_spans(self._events(session))
        return SuspendSpanSerializer(spans, many=True).data

    @extend_schema_field(ChainLinkSerializer(many=True))
    def get_chain(self, session: Session) -> Any:
        return ChainLinkSerializer(selectors.session_chain(session), many=True).data


class _TeamScoped(APIView):
    @property
    def team(self) -> Team:
        return caller(self.request).team


class SessionListApi(_TeamScoped, generics.ListAPIView[Session]):
    """The team's sessions, newest first, filterable, cursor-paginated."""

    required_scope = "read"
    serializer_class = SessionSerializer
    pagination_class = SessionCursorPagination
    filterset_class = SessionFilter

    def get_queryset(self) -> QuerySet[Session]:
        if getattr(self, "swagger_fake_view", False):
            return Session.objects.none()
        return selectors.sessions_for_team(self.team)


class SessionDetailApi(_TeamScoped, APIView):
    """One session with its timeline, suspend spans and chain."""

    required_scope = "read"

    @extend_schema(responses={200: SessionDetailSerializer, 404: _ERROR})
    def get(self, request: Request, session_id: str) -> Response:
        session = selectors.session_get(team=self.team, session_id=session_id)
        if session is None:
            raise NotFound("No such session")
        return Response(SessionDetailSerializer(session).data)


class SessionEventsApi(_TeamScoped, generics.ListAPIView[LifecycleEvent]):
    """A session's events in time order, cursor-paginated."""

    required_scope = "read"
    serializer_class = EventSerializer
    pagination_class = EventCursorPagination

    def get_queryset(self) -> QuerySet[LifecycleEvent]:
        if getattr(self, "swagger_fake_view", False):
            return LifecycleEvent.objects.none()
        session = selectors.session_get(team=self.team, session_id=self.kwargs["session_id"])
        if session is None:
            raise NotFound("No such session")
        return LifecycleEvent.objects.filter(session=session)
