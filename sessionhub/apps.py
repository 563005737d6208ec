from django.apps import AppConfig


class SessionHubConfig(AppConfig):
    """Teams, API tokens and health."""

    name = "sessionhub"
    verbose_name = "SessionHub"

    def ready(self) -> None:
        from . import schema  # noqa: F401 - registers the OpenAPI auth extension
