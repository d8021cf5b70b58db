"""DRF's throttles (the API's and, through ``probebench.security.form_throttled``, the web forms'),
counted once across all the site's processes.

A throttle reads a client's history (DRF's sliding window: the times of its requests inside the
window), checks it and writes it back, in the cache ``CACHES["throttle"]``, which every process
shares: Redis when ``REDIS_URL`` is set (``probebench.cache.RedisCache``), else a SQLite file under
the data directory (``probebench.throttle_store``), where the read-check-write is one transaction,
so two requests served at once by two processes cannot both take the last place. Neither store
drops a live count to make room. With Redis, DRF's own counting is used as it is.

When the counts cannot be reached (Redis down, the SQLite file locked past its wait or unreadable),
a read (GET, HEAD, OPTIONS) is served without being counted, and logged; anything else is refused
with 503 (``CountsUnavailable``, the API's error body; the forms answer a 503 page), so a write
that is rate limited never goes through unthrottled.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator

from django.core.cache import caches
from rest_framework import throttling
from rest_framework.exceptions import APIException
from rest_framework.permissions import SAFE_METHODS

from probebench.cache import UNREACHABLE

log = logging.getLogger(__name__)

#: the cache alias the throttles count in (settings.CACHES)
THROTTLE_CACHE = "throttle"
#: what the count stores raise when they cannot be reached
STORE_DOWN = (*UNREACHABLE, sqlite3.OperationalError)


class CountsUnavailable(APIException):
    status_code = 503
    default_detail = (
        "the rate-limit counts cannot be reached right now, so this request was not carried out and"
        " nothing was stored; try again in a minute"
    )
    default_code = "rate_limits_unavailable"


@contextlib.contextmanager
def _counting(cache) -> Iterator[None]:
    """The store's transaction around a read-check-write, where it has one (the SQLite store)."""
    transaction = getattr(cache, "transaction", None)
    if transaction is None:
        yield
        return
    with transaction():
        yield


class _Counted:
    def __init__(self) -> None:
        self.cache = caches[THROTTLE_CACHE]
        super().__init__()

    def allow_request(self, request, view) -> bool:
        try:
            with _counting(self.cache):
                return super().allow_request(request, view)  # type: ignore[misc]
        except STORE_DOWN as exc:
            served = request.method in SAFE_METHODS
            log.warning(
                "rate limits: the counts cannot be reached (%s); %s %s %s",
                exc,
                request.method,
                request.path,
                "served without counting" if served else "refused with 503",
            )
            if served:
                return True
            raise CountsUnavailable from None


class AnonRateThrottle(_Counted, throttling.AnonRateThrottle):
    pass


class UserRateThrottle(_Counted, throttling.UserRateThrottle):
    pass


class ScopedRateThrottle(_Counted, throttling.ScopedRateThrottle):
    pass
