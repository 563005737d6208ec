from django.urls import path

from . import apis

urlpatterns = [
    path("events", apis.events_ingest, name="events-ingest"),
    path("hooks/claude-code", apis.hooks_claude_code, name="hooks-claude-code"),
    path("hooks/openclaw", apis.hooks_openclaw, name="hooks-openclaw"),
    path("hooks/codex", apis.hooks_codex, name="hooks-codex"),
    path("hooks/gemini-cli", apis.hooks_gemini_cli, name="hooks-gemini-cli"),
    path("sessions", apis.SessionListApi.as_view(), name="session-list"),
    path("sessions/<str:session_id>", apis.SessionDetailApi.as_view(), name="session-detail"),
    path(
        "sessions/<str:session_id>/events",
        apis.SessionEventsApi.as_view(),
        name="session-events",
    ),
]
