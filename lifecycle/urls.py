from django.urls import path

from . import apis

urlpatterns = [
    path("events", apis.EventsIngestApi.as_view(), name="events-ingest"),
    path("hooks/claude-code", apis.ClaudeCodeHookApi.as_view(), name="hooks-claude-code"),
    path("hooks/openclaw", apis.OpenClawHookApi.as_view(), name="hooks-openclaw"),
    path("hooks/codex", apis.CodexHookApi.as_view(), name="hooks-codex"),
    path("hooks/gemini-cli", apis.GeminiCliHookApi.as_view(), name="hooks-gemini-cli"),
    path("sessions", apis.SessionListApi.as_view(), name="session-list"),
    path("sessions/<str:session_id>", apis.SessionDetailApi.as_view(), name="session-detail"),
    path(
        "sessions/<str:session_id>/events",
        apis.SessionEventsApi.as_view(),
        name="session-events",
    ),
]
