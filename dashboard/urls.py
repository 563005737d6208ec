"""The dashboard's routes, under the site root."""

from django.urls import path

from . import views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("sessions/", views.session_list, name="sessions"),
    path("sessions/<str:session_id>/", views.session_detail, name="session"),
    path("board/", views.open_work, name="board"),
    path("agents/", views.agent_list, name="agents"),
    path("agents/<str:agent_id>/", views.agent_detail, name="agent"),
    path("pins/<int:pin_id>/edit", views.pin_edit, name="pin-edit"),
    path("pins/<int:pin_id>/unpin", views.pin_unpin, name="pin-unpin"),
    path("team", views.team_switch, name="team-switch"),
    path("team/join", views.team_join, name="team-join"),
    path("tokens/", views.token_list, name="tokens"),
    path("live/sessions", views.live_sessions, name="live-sessions"),
    path("live/sessions/<str:session_id>", views.live_session, name="live-session"),
]
