from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """Redaction, reasoning tails, observations, pins, summaries, features, continuity."""

    name = "memory"

    def ready(self) -> None:
        from celery.signals import task_failure

        from .signals import record_task_failure

        task_failure.connect(record_task_failure, weak=False)
