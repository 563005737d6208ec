"""The Celery application; configuration comes from Django settings (``CELERY_*``)."""

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init
from django.conf import settings
from django.db import close_old_connections

from sessionhub import broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessionhub.settings")
broker.install()  # a worker that survives Redis going away (see sessionhub/broker.py)

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
    _autogroup_lower(wanted)


AUTOGROUP = "/proc/self/autogroup"


def _autogroup_lower(wanted: int, path: str = AUTOGROUP) -> bool:
    """Lower the worker's scheduling group too, where it leads a session of its own.

    With Linux's autogroup scheduling (on by default on desktop and most server kernels),
    the kernel shares the cores out between sessions first and applies nice values only
    within a session. A worker started in its own session (by systemd, ``setsid``, a
    supervisor or a container) would keep an equal share beside the web server whatever its nice
    value; the group's own nice value is what lowers it. A worker in a session it does not
    lead (started from a terminal beside other programs) leaves the group alone, since
    lowering it would lower everything else in that session.
    """
    if os.getsid(0) != os.getpid():
        return False
    try:
        with open(path) as handle:
            current = int(handle.read().rsplit("nice", 1)[1])
        if current >= wanted:
            return False
        with open(path, "w") as handle:
            handle.write(str(wanted))
    except (OSError, ValueError, IndexError):
        return False  # no autogroup on this kernel, or not allowed: the nice value stands
    logger.info("worker scheduling group lowered to nice %s", wanted)
    return True


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
