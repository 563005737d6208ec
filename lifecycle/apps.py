from django.apps import AppConfig


class LifecycleConfig(AppConfig):
    """Agents, sessions, lifecycle events, ingestion and the state machine."""

    name = "lifecycle"
