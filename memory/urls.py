from django.urls import path

from . import apis
from .mcp.views import McpEndpoint

urlpatterns = [
    path("mcp", McpEndpoint.as_view(), name="mcp"),
    path("continuity", apis.ContinuityApi.as_view(), name="continuity"),
    path("sessions/<str:session_id>/export", apis.SessionExportApi.as_view(), name="export"),
    path("sessions/<str:session_id>/continue", apis.SessionContinueApi.as_view(), name="continue"),
    path(
        "sessions/<str:session_id>/continuity",
        apis.SessionContinuityRecordsApi.as_view(),
        name="session-continuity",
    ),
    path("agents", apis.AgentListApi.as_view(), name="agent-list"),
    path("agents/<str:agent_id>/pins", apis.AgentPinsApi.as_view(), name="agent-pins"),
    path("pins/<int:pin_id>", apis.PinDetailApi.as_view(), name="pin-detail"),
    path(
        "sessions/<str:session_id>/memory", apis.SessionMemoryApi.as_view(), name="session-memory"
    ),
    path(
        "sessions/<str:session_id>/summarize",
        apis.SessionSummarizeApi.as_view(),
        name="session-summarize",
    ),
]
