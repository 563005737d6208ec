"""A guard on kombu's Redis transport, so that a worker survives its broker going away.

When Redis goes away while the worker holds unacknowledged messages (``acks_late``, a
task running), Celery's consumer collects the broken connection and closes it, then
restarts its bootsteps, which close the task consumer's channel. Closing a channel
restores its unacknowledged messages (kombu's ``QoS.restore_unacked``). The connection
closes its channels one by one and stops at the first that raises (Redis is away, so
the first restore does), then forgets its transport's client; a channel left open is
closed afterwards, and its restore builds a new Redis pool from a client that is now
``None``: ``AttributeError: 'NoneType' object has no attribute 'hostname'``. Celery
treats that as unrecoverable and the worker process exits (kombu 5.7.0).

There is nothing to restore through a closed connection anyway: Redis keeps its own
copy of every unacknowledged message (the ``unacked`` hash) and gives it back once the
visibility timeout has passed; a Redis that lost its data lost the queue too, and the
outbox sweep queues that work again. So a restore with no connection left is skipped
with a log line instead of raising.
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

logger = logging.getLogger(__name__)

_restore_unacked = kombu_redis.QoS.restore_unacked
_ack = kombu_redis.QoS.ack


def _closed(qos: Any) -> bool:
    transport = qos.channel.connection
    return transport is None or transport.client is None


def restore_unacked_unless_closed(self: Any, client: Any = None) -> None:
    """kombu's ``QoS.restore_unacked``, skipped when the channel's connection is closed."""
    if client is None and _closed(self):
        if self._delivered:
            logger.warning(
                "broker connection closed: %d unacknowledged message(s) left to Redis "
                "(given back after the visibility timeout) and to the outbox sweep",
                len(self._delivered),
            )
        self._delivered.clear()
        return
    _restore_unacked(self, client)


def ack_unless_closed(self: Any, delivery_tag: Any) -> None:
    """kombu's ``QoS.ack``: a task that finishes after its connection closed acknowledges
    nothing in Redis (the same missing client would raise); Redis gives the message back
    after the visibility timeout, and the task's work is idempotent."""
    if _closed(self):
        logger.warning("broker connection closed: acknowledgement left to Redis")
        virtual.QoS.ack(self, delivery_tag)  # forgotten in this process only
        return
    _ack(self, delivery_tag)


def install() -> None:
    """Put the guards in place (idempotent)."""
    if kombu_redis.QoS.restore_unacked is not restore_unacked_unless_closed:
        kombu_redis.QoS.restore_unacked = restore_unacked_unless_closed  # type: ignore[method-assign]
    if kombu_redis.QoS.ack is not ack_unless_closed:
        kombu_redis.QoS.ack = ack_unless_closed  # type: ignore[method-assign]
