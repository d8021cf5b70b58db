"""The embedded broker: kombu's filesystem transport, consuming its queues in priority order.

The stock virtual transports poll a consumer's queues in turn (after a message from ``primary``
the next poll starts at ``secondary``), so a long secondary run could start while score runs
wait. Here every poll starts again at the first queue the worker was given (``-Q
default,primary,secondary``): the next message always comes from the first non-empty queue, as
Redis's BRPOP does with ``queue_order_strategy: priority``. Selected in settings with
``CELERY_BROKER_TRANSPORT = "probebench.broker:FilesystemTransport"`` when no REDIS_URL is set.

``broker_reachable`` asks the configured broker (Redis or these folders) whether a message can be
published now: the health endpoint and the submission check ask it.
"""

from __future__ import annotations

import logging
import os

from celery import current_app
from django.conf import settings
from kombu.exceptions import OperationalError
from kombu.transport import filesystem
from kombu.transport.virtual.base import Empty
from kombu.utils.scheduling import FairCycle

log = logging.getLogger(__name__)


class InOrderCycle(FairCycle):
    """A cycle over a channel's queues that starts at the first queue on every poll."""

    def get(self, callback, **kwargs):
        self.pos = 0
        return super().get(callback, **kwargs)


class FilesystemChannel(filesystem.Channel):
    def _reset_cycle(self):
        self._cycle = InOrderCycle(self._get_and_deliver, self._active_queues, Empty)


class FilesystemTransport(filesystem.Transport):
    Channel = FilesystemChannel


def broker_reachable() -> bool:
    """Whether a message can be published now: one connection to the configured broker, no retry
    (the filesystem broker: its folders are there and writable)."""
    folders = getattr(settings, "BROKER_DIR", None)
    if folders is not None and not all(
        os.access(folders / name, os.W_OK) for name in ("queue", "control", "processed")
    ):
        return False
    try:
        with current_app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=0)
    except (OperationalError, OSError) as exc:
        log.warning("broker: unreachable (%s)", exc)
        return False
    return True
