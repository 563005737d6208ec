from django.urls import path

from . import apis

urlpatterns = [
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
