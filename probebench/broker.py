"""The embedded broker: kombu's filesystem transport, consuming its queues in priority order.

The stock virtual transports poll a consumer's queues in turn (after a message from ``primary``
the next poll starts at ``secondary``), so a long secondary run could start while score runs
wait. Here every poll starts again at the first queue the worker was given (``-Q
default,primary,secondary``): the next message always comes from the first non-empty queue, as
Redis's BRPOP does with ``queue_order_strategy: priority``. Selected in settings with
``CELERY_BROKER_TRANSPORT = "probebench.broker:FilesystemTransport"`` when no REDIS_URL is set.
"""

from __future__ import annotations

from kombu.transport import filesystem
from kombu.transport.virtual.base import Empty
from kombu.utils.scheduling import FairCycle


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
