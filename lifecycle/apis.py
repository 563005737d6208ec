"""The ingestion and session read API."""

from __future__ import annotations

from datetime import UTC
from typing import Any, cast

import django_filters
from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import generics, serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessionhub.authentication import caller, token_event_seen
from sessionhub.errors import ApiErrorSerializer, error_body
from sessionhub.exceptions import NotFound, PayloadTooLarge, ValidationFailed
from sessionhub.models import ApiToken

from . import selectors, services, signals
from .adapters.base import as_key
from .models import (
    EVENT_FIELDS,
    EndReason,
    EventKind,
    LifecycleEvent,
    Session,
    SessionStatus,
    Source,
)

# --- ingestion ---------------------------------------------------------------------------

_RESULT_FIELDS: dict[str, serializers.Field] = {
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


class _IngestView(APIView):
    """Shared body handling: one event or a batch, per-event results."""

    required_scope = "ingest"
    source: str = Source.GENERIC

    def bodies(self, data: Any) -> list[Any]:
        if isinstance(data, list):
            return data
        return [data]

    def post(self, request: Request) -> Response:
        if request.stream is None:
            raise ValidationFailed("Request body is empty", code="empty_body")
        bodies = self.batch(request.data)
        return self.store(caller(request).token, bodies)

    def batch(self, data: Any) -> list[Any]:
        """The events a parsed body holds; raises before anything is stored."""
        bodies = self.bodies(data)
        limit = settings.SESSIONHUB["MAX_BATCH_EVENTS"]
        if len(bodies) > limit:
            raise PayloadTooLarge(f"A batch holds at most {limit} events", code="batch_too_large")
        if not bodies:
            raise ValidationFailed("The batch is empty", code="empty_batch")
        return bodies

    def store(self, token: ApiToken, bodies: list[Any]) -> Response:
        """Ingest the events and answer with the per-event results."""
        results = services.events_ingest(
            team=token.team, bodies=bodies, adapter=services.adapter_for(self.source, token)
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
            return Response(
                error_body(message, "invalid_events", payload),
                status=status.HTTP_400_BAD_REQUEST,
            )
        return Response(payload, status=status.HTTP_200_OK)


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


class EventsIngestApi(_IngestView):
    """Canonical events: one object, a list, or ``{"events": [...]}``."""

    source = Source.GENERIC

    def bodies(self, data: Any) -> list[Any]:
        if isinstance(data, dict) and "events" in data and "kind" not in data:
            events = data["events"]
            if not isinstance(events, list):
                raise ValidationFailed("events must be a list", code="wrong_type")
            return events
        return super().bodies(data)

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
        return super().post(request)


class ClaudeCodeHookApi(_IngestView):
    """The JSON Claude Code writes on a hook's stdin, as is (or a list of them)."""

    source = Source.CLAUDE_CODE

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
        return super().post(request)


class OpenClawHookApi(_IngestView):
    """``{"hook", "event", "ctx", "ts"}`` from the OpenClaw plugin (or a list of them)."""

    source = Source.OPENCLAW

    @extend_schema(
        operation_id="hooks_openclaw",
        request=OpenApiTypes.OBJECT,
        responses={200: _INGEST_RESPONSE, **_ERRORS},
    )
    def post(self, request: Request) -> Response:
        return super().post(request)


class CodexHookApi(_IngestView):
    """The JSON Codex CLI writes on a command hook's stdin, as is (or a list of them)."""

    source = Source.CODEX

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
        return super().post(request)


class GeminiCliHookApi(_IngestView):
    """The JSON Gemini CLI writes on a command hook's stdin, as is (or a list of them)."""

    source = Source.GEMINI_CLI

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
        return super().post(request)


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


class AgentRefSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    external_id = serializers.CharField()
    name = serializers.CharField()
    # A field named like DRF's Field.source attribute, which the stubs type as a string.
    source = serializers.CharField()  # type: ignore[assignment]


class SessionSerializer(serializers.ModelSerializer):
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


class EventSerializer(serializers.ModelSerializer):
    class Meta:
        model = LifecycleEvent
        fields = ["id", *EVENT_FIELDS]


class SuspendSpanSerializer(serializers.Serializer):
    suspended_at = serializers.DateTimeField()
    resumed_at = serializers.DateTimeField(allow_null=True)
    seconds = serializers.FloatField(allow_null=True)


class ChainLinkSerializer(serializers.Serializer):
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
        cache = cast(dict[Any, Any], self.context).setdefault("_events", {})
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
    def team(self) -> Any:
        return caller(self.request).team


class SessionListApi(_TeamScoped, generics.ListAPIView):
    """The team's sessions, newest first, filterable, cursor-paginated."""

    required_scope = "read"
    serializer_class = SessionSerializer
    pagination_class = SessionCursorPagination
    filterset_class = SessionFilter

    def get_queryset(self) -> Any:
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


class SessionEventsApi(_TeamScoped, generics.ListAPIView):
    """A session's events in time order, cursor-paginated."""

    required_scope = "read"
    serializer_class = EventSerializer
    pagination_class = EventCursorPagination

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return LifecycleEvent.objects.none()
        session = selectors.session_get(team=self.team, session_id=self.kwargs["session_id"])
        if session is None:
            raise NotFound("No such session")
        return LifecycleEvent.objects.filter(session=session)
