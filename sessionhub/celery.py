"""The Celery application; configuration comes from Django settings (``CELERY_*``)."""

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import worker_init
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessionhub.settings")

app = Celery("sessionhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = logging.getLogger(__name__)


@worker_init.connect
def lower_priority(**_: Any) -> None:
    """Give the worker (and the pool processes it forks) a lower scheduling priority.

    A hook request waits while an agent does; memory work can wait a moment. On a machine
    where both share the cores, the kernel then runs ingestion first and the worker in
    what is left, instead of splitting the cores between them under load.
    """
    wanted = max(0, min(19, int(settings.SESSIONHUB["WORKER_NICE"])))
    current = os.nice(0)
    if wanted > current:
        os.nice(wanted - current)
        logger.info("worker priority lowered to nice %s", wanted)
