"""The Celery application; configuration comes from Django settings (``CELERY_*``)."""

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init
from django.conf import settings
from django.db import close_old_connections

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


@task_prerun.connect
@task_postrun.connect
def recycle_connections(sender: Any = None, **_: Any) -> None:
    """Between tasks, close the database connections Django would close between requests
    (past ``CONN_MAX_AGE``, broken, or left mid-transaction) and keep the rest.

    Not for a task run in the caller's process (embedded mode): its connection is the
    caller's, possibly inside a transaction.
    """
    if sender is not None and getattr(sender.request, "is_eager", False):
        return
    close_old_connections()
