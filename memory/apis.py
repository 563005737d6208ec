"""Memory API: agents and their pins, a session's distilled memory, re-summarize."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from lifecycle import selectors as lifecycle_selectors
from lifecycle.adapters.base import as_key
from lifecycle.models import Agent, Session, Source
from sessionhub.authentication import caller
from sessionhub.errors import ApiErrorSerializer
from sessionhub.exceptions import NotFound, ServiceUnavailable
from sessionhub.fields import StrictCharField
from sessionhub.resilience import breaker_for, throttled

from .continuity.record import record_as_dict
from .export import session_export
from .models import ContinuityRecord, Observation, Pin, SessionFeatures, StreamTail, Summary
from .selectors import SessionMemory, active_pins, session_memory
from .services import pins as pin_services
from .services.continuity import continuity_answer, continuity_continue
from .services.pins import pinned_by_of
from .summaries import SECTIONS
from .tasks import summarize_session

_ERROR = ApiErrorSerializer

# What the plain serializers below read (a request body) or describe (an answer built as
# a dict): a JSON object. The model serializers name their model instead.
JsonObject = dict[str, Any]


def _uuid_or_404(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError as exc:
        raise NotFound(f"No such {what}") from exc


class AgentSerializer(serializers.ModelSerializer[Agent]):
    class Meta:
        model = Agent
        fields = ["id", "source", "external_id", "name", "project", "created_at", "last_seen_at"]


class PinSerializer(serializers.ModelSerializer[Pin]):
    is_active = serializers.BooleanField(read_only=True)

    class Meta:
        model = Pin
        fields = [
            "id",
            "agent",
            "label",
            "content",
            "priority",
            "pinned_at",
            "pinned_by",
            "unpinned_at",
            "is_active",
            "origin_session",
            "inherited_from",
            "inherited_into",
        ]


class PinInputSerializer(serializers.Serializer[JsonObject]):
    # ``label`` is also DRF's Field.label attribute, which the stubs type as a string.
    label = StrictCharField(max_length=pin_services.LABEL_MAX)  # type: ignore[assignment]
    content = StrictCharField(
        max_length=pin_services.CONTENT_MAX, allow_blank=True, required=False, default=""
    )
    priority = serializers.ChoiceField(Pin.Priority.choices, required=False, default="normal")
    origin_session = serializers.UUIDField(required=False, allow_null=True)


class PinPatchSerializer(serializers.Serializer[JsonObject]):
    label = StrictCharField(  # type: ignore[assignment]  # as in PinInputSerializer
        max_length=pin_services.LABEL_MAX, required=False
    )
    content = StrictCharField(max_length=pin_services.CONTENT_MAX, allow_blank=True, required=False)
    priority = serializers.ChoiceField(Pin.Priority.choices, required=False)


class AgentListApi(APIView):
    """The team's agents; filter by ``source`` and ``external_id``."""

    required_scope = "read"

    @extend_schema(responses={200: AgentSerializer(many=True)})
    def get(self, request: Request) -> Response:
        agents = Agent.objects.filter(team=caller(request).team).order_by("name")
        source = request.query_params.get("source")
        if source:
            agents = agents.filter(source=source if source in Source.values else "-")
        external_id = request.query_params.get("external_id")
        if external_id:
            agents = agents.filter(external_id=as_key(external_id, limit=300))
        return Response(AgentSerializer(agents[:500], many=True).data)


def _agent(request: Request, agent_id: str) -> Agent:
    agent = Agent.objects.filter(
        team=caller(request).team, pk=_uuid_or_404(agent_id, "agent")
    ).first()
    if agent is None:
        raise NotFound("No such agent")
    return agent


class AgentPinsApi(APIView):
    """An agent's pins: list (``?all=1`` includes unpinned ones) and create."""

    def get_permissions(self) -> Any:
        # Creating answers with the pin: a write that reads (sessionhub/permissions.py).
        self.required_scope = "read" if self.request.method == "GET" else ("ingest", "read")
        return super().get_permissions()

    @extend_schema(responses={200: PinSerializer(many=True), 404: _ERROR})
    def get(self, request: Request, agent_id: str) -> Response:
        agent = _agent(request, agent_id)
        pins = (
            Pin.objects.filter(agent=agent).order_by("-pinned_at")
            if request.query_params.get("all")
            else active_pins(agent)
        )
        return Response(PinSerializer(pins, many=True).data)

    @extend_schema(
        request=PinInputSerializer,
        responses={201: PinSerializer, 400: _ERROR, 404: _ERROR, 409: _ERROR},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = _agent(request, agent_id)
        data = PinInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        origin = None
        if data.validated_data.get("origin_session"):
            origin = lifecycle_selectors.session_get(
                team=caller(request).team, session_id=data.validated_data["origin_session"]
            )
            if origin is None or origin.agent_id != agent.pk:
                raise NotFound("No such session for this agent")
        pin = pin_services.pin_create(
            agent=agent,
            label=data.validated_data["label"],
            content=data.validated_data["content"],
            priority=data.validated_data["priority"],
            origin_session=origin,
            pinned_by=pinned_by_of(token=caller(request).token),
        )
        return Response(PinSerializer(pin).data, status=status.HTTP_201_CREATED)


class PinDetailApi(APIView):
    """Change or unpin one pin."""

    # Answers with the pin: an ingest-only token could read any pin by its id.
    required_scope = ("ingest", "read")

    def _pin(self, request: Request, pin_id: int) -> Pin:
        pin = (
            Pin.objects.filter(team=caller(request).team, pk=pin_id).select_related("agent").first()
        )
        if pin is None:
            raise NotFound("No such pin")
        return pin

    @extend_schema(
        request=PinPatchSerializer, responses={200: PinSerializer, 404: _ERROR, 409: _ERROR}
    )
    def patch(self, request: Request, pin_id: int) -> Response:
        pin = self._pin(request, pin_id)
        data = PinPatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        pin = pin_services.pin_update(pin=pin, **data.validated_data)
        return Response(PinSerializer(pin).data)

    @extend_schema(responses={200: PinSerializer, 404: _ERROR})
    def delete(self, request: Request, pin_id: int) -> Response:
        pin = pin_services.pin_unpin(pin=self._pin(request, pin_id))
        return Response(PinSerializer(pin).data)


class TailSerializer(serializers.ModelSerializer[StreamTail]):
    class Meta:
        model = StreamTail
        fields = ["text", "final_message", "token_count", "captured_at"]


class ObservationSerializer(serializers.ModelSerializer[Observation]):
    class Meta:
        model = Observation
        fields = ["tool_name", "input_digest", "output_digest", "failed", "occurred_at"]


class SummarySerializer(serializers.ModelSerializer[Summary]):
    class Meta:
        model = Summary
        fields = [
            *SECTIONS,
            "final_message",
            "outcome",
            "outcome_detail",
            "method",
            "fallback_reason",
            "updated_at",
        ]


class FeaturesSerializer(serializers.ModelSerializer[SessionFeatures]):
    class Meta:
        model = SessionFeatures
        fields = ["hot_topics", "active_projects", "pending_tasks", "updated_at"]


class SessionMemorySerializer(serializers.Serializer[SessionMemory]):
    tail = TailSerializer(allow_null=True)
    summary = SummarySerializer(allow_null=True)
    features = FeaturesSerializer(allow_null=True)
    observations = ObservationSerializer(many=True)


def _session(request: Request, session_id: str) -> Session:
    session = lifecycle_selectors.session_get(team=caller(request).team, session_id=session_id)
    if session is None:
        raise NotFound("No such session")
    return session


class SessionMemoryApi(APIView):
    """What SessionHub distilled from a session: latest tail, summary, features, tool uses."""

    required_scope = "read"

    @extend_schema(responses={200: SessionMemorySerializer, 404: _ERROR})
    def get(self, request: Request, session_id: str) -> Response:
        memory = session_memory(_session(request, session_id))
        return Response(SessionMemorySerializer(memory).data)


class SessionSummarizeApi(APIView):
    """Rebuild a session's summary (queued; 202)."""

    required_scope = "ingest"

    @extend_schema(
        request=None,
        responses={
            202: inline_serializer("SummarizeQueued", {"queued": serializers.BooleanField()}),
            404: _ERROR,
        },
    )
    def post(self, request: Request, session_id: str) -> Response:

        session = _session(request, session_id)
        pk = str(session.pk)
        conf = summarize_session.app.conf
        breaker = None if conf.task_always_eager else breaker_for(conf.broker_url)
        if breaker is not None and not breaker.available:
            raise ServiceUnavailable("The task queue is unavailable; retry later")

        def queue() -> None:
            try:
                summarize_session.delay(pk)
            except Exception as exc:  # noqa: BLE001 - the broker went away: say it once
                if breaker is not None:
                    breaker.failed(exc)
                throttled.warning(
                    "broker", "could not queue a summary (%s)", exc.__class__.__name__
                )

        transaction.on_commit(queue)
        return Response({"queued": True}, status=status.HTTP_202_ACCEPTED)


# --- continuity --------------------------------------------------------------------------


class ContinuityRequestSerializer(serializers.Serializer[JsonObject]):
    # ``source`` is also DRF's Field.source attribute, which the stubs type as a string.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        [Source.CLAUDE_CODE, Source.OPENCLAW, Source.CODEX, Source.GEMINI_CLI, Source.GENERIC],
        default=Source.GENERIC,
    )
    session_id = StrictCharField(max_length=200, help_text="The gateway's session id")
    agent_id = StrictCharField(max_length=200, required=False, allow_blank=True)
    session_key = StrictCharField(max_length=300, required=False, allow_blank=True)
    keywords = serializers.ListField(
        # A blank keyword is allowed and ignored, as the published schema says.
        child=StrictCharField(max_length=100, allow_blank=True),
        required=False,
        max_length=200,
    )
    prompt = StrictCharField(required=False, allow_blank=True, max_length=100_000)
    event = serializers.JSONField(
        required=False,
        help_text="An event of this session in the source's own shape (a Claude Code hook "
        "body, an OpenClaw hook body, a canonical event), usually its start: stored as "
        "ingestion stores it (a duplicate when it already came), so continuity works "
        "whether or not the start has landed",
    )
    gateway = StrictCharField(
        max_length=200,
        required=False,
        allow_blank=True,
        help_text="OpenClaw: the plugin's instance id, part of the agent's identity",
    )
    pending = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Only what waits for the session (a manual continue made while it runs), "
        "claimed as delivered; no automatic preamble is built. The OpenClaw plugin asks so "
        "at each later prompt.",
    )


class ContinuityAnswerSerializer(serializers.Serializer[JsonObject]):
    record_id = serializers.IntegerField()
    session_id = serializers.UUIDField()
    trigger = serializers.CharField()
    stage = serializers.CharField(allow_blank=True)
    preamble = serializers.CharField(allow_blank=True)
    sources = serializers.ListField(child=serializers.DictField())
    candidates_scored = serializers.IntegerField()
    inherited_pins = serializers.ListField(child=serializers.DictField())
    keywords = serializers.ListField(child=serializers.CharField())
    reason = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()


class ContinuityPendingAnswerSerializer(serializers.Serializer[JsonObject]):
    """What a ``pending`` request gets: the manual continues that waited for the session
    (none when it is unknown), claimed as delivered."""

    session_id = serializers.UUIDField(allow_null=True)
    trigger = serializers.CharField()
    preamble = serializers.CharField(allow_blank=True)
    record_ids = serializers.ListField(child=serializers.IntegerField())


_CONTINUITY_ANSWER = PolymorphicProxySerializer(
    component_name="ContinuityAnswerOrPending",
    serializers=[ContinuityAnswerSerializer, ContinuityPendingAnswerSerializer],
    resource_type_field_name=None,
)


class ContinuityRecordSerializer(ContinuityAnswerSerializer):
    curated_pins = serializers.ListField(child=serializers.DictField())
    delivered_at = serializers.DateTimeField(allow_null=True)
    usage = serializers.DictField(allow_null=True)
    items_offered = serializers.IntegerField(allow_null=True)
    items_used = serializers.IntegerField(allow_null=True)


class ContinuityApi(APIView):
    """The preamble for a session at its start: scored prior sessions, inherited pins.

    Asking again for the same session returns the same answer and changes nothing.
    """

    required_scope = "ingest"

    @extend_schema(
        request=ContinuityRequestSerializer,
        responses={200: _CONTINUITY_ANSWER, 400: _ERROR, 404: _ERROR},
    )
    def post(self, request: Request) -> Response:

        data = ContinuityRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(continuity_answer(token=caller(request).token, values=data.validated_data))


class ContinueRequestSerializer(serializers.Serializer[JsonObject]):
    source_session_id = serializers.UUIDField(help_text="The SessionHub id to continue from")


class SessionContinueApi(APIView):
    """Manual continue: this session inherits from a chosen one, whatever its score."""

    # The caller picks the source: with ingest alone it could read any session's memory.
    required_scope = ("ingest", "read")

    @extend_schema(
        request=ContinueRequestSerializer,
        responses={200: ContinuityAnswerSerializer, 400: _ERROR, 404: _ERROR},
    )
    def post(self, request: Request, session_id: str) -> Response:

        target = _session(request, session_id)
        data = ContinueRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        source = _session(request, str(data.validated_data["source_session_id"]))
        record = continuity_continue(
            target=target, source=source, requested_by=f"token:{caller(request).token.prefix}"
        )
        return Response(record_as_dict(record))


class SessionContinuityRecordsApi(APIView):
    """Every preamble served to a session, newest first."""

    required_scope = "read"

    @extend_schema(responses={200: ContinuityRecordSerializer(many=True), 404: _ERROR})
    def get(self, request: Request, session_id: str) -> Response:

        session = _session(request, session_id)
        records = ContinuityRecord.objects.filter(session=session).order_by("-created_at")[:100]
        return Response([record_as_dict(r) | _curation_of(r) for r in records])


def _curation_of(record: ContinuityRecord) -> dict[str, Any]:
    """What a reader of a record also sees: the team's pins it quoted, when it was handed
    to the agent, and which of its items the session used (memory.usage)."""
    return {
        "curated_pins": record.curated_pins,
        "delivered_at": record.delivered_at.isoformat() if record.delivered_at else None,
        "usage": record.usage or None,
        "items_offered": record.items_offered,
        "items_used": record.items_used,
    }


class SessionExportApi(APIView):
    """A session (``?chain=1``: its whole chain) as one JSON document."""

    required_scope = "read"

    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: _ERROR})
    def get(self, request: Request, session_id: str) -> Response:

        session = _session(request, session_id)
        chain = request.query_params.get("chain") in ("1", "true", "yes")
        return Response(session_export(session, chain=chain))
