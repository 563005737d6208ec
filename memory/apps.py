from celery.signals import task_failure
from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """Redaction, reasoning tails, observations, pins, summaries, features, continuity."""

    name = "memory"

    def ready(self) -> None:
        # Modules that define or use models load once the app registry is ready.
        from lifecycle.signals import (
            register_prompt_context,
            register_session_task,
            session_closed,
        )

        from .services.continuity import manual_continue_deliver
        from .signals import record_task_failure, release_pins_at_close
        from .tasks import process_session

        task_failure.connect(record_task_failure, weak=False)
        session_closed.connect(release_pins_at_close, weak=False)
        register_session_task(process_session)
        register_prompt_context(manual_continue_deliver)
