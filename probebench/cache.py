"""The site's Redis cache backends, for the times Redis cannot be reached.

- ``RedisCache`` (``CACHES["throttle"]``, the rate limits' counts): Django's, failing fast. After
  a failure to reach Redis it raises at once for ``RETRY_AFTER_S`` seconds instead of trying to
  connect on every request; the throttles decide what a request without counts gets
  (``probebench.throttling``).
- ``ResilientRedisCache`` (``CACHES["default"]``: the board's counts, comparisons): while Redis is
  unreachable a read finds nothing and a write is dropped, each logged, so pages and the API are
  served uncached instead of failing. ``incr``/``decr`` still raise (nothing of ours uses them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import redis
from django.core.cache.backends import redis as django_redis
from django.core.cache.backends.base import DEFAULT_TIMEOUT

log = logging.getLogger(__name__)
T = TypeVar("T")

#: seconds a Redis server that could not be reached is not asked again (per process)
RETRY_AFTER_S = 5.0
#: what redis-py raises when the server cannot be reached or does not answer in time
UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)

#: server location → the monotonic time until which it is taken as down
_down_until: dict[str, float] = {}


class RedisCache(django_redis.RedisCache):
    #: answer a fallback (find nothing, store nothing) instead of raising while Redis is down
    answer_when_down = False

    def __init__(self, server: str | list[str], params: dict[str, Any]):
        super().__init__(server, params)
        self._location = server if isinstance(server, str) else ",".join(server)

    def _run(self, operation: Callable[[], T], fallback: T) -> T:
        location = self._location
        if time.monotonic() < _down_until.get(location, 0.0):
            if self.answer_when_down:
                return fallback
            raise redis.exceptions.ConnectionError(f"Redis was unreachable less than {RETRY_AFTER_S:g} s ago")
        try:
            return operation()
        except UNREACHABLE as exc:
            _down_until[location] = time.monotonic() + RETRY_AFTER_S
            if not self.answer_when_down:
                raise
            # the location is not logged: its URL may hold a password
            log.warning(
                "cache: Redis is unreachable (%s); served uncached for the next %g s", exc, RETRY_AFTER_S
            )
            return fallback

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._run(partial(super().add, key, value, timeout, version), False)

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self._run(partial(super().get, key, default, version), default)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        self._run(partial(super().set, key, value, timeout, version), None)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._run(partial(super().touch, key, timeout, version), False)

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._run(partial(super().delete, key, version), False)

    def get_many(self, keys: Any, version: int | None = None) -> dict[Any, Any]:
        return self._run(partial(super().get_many, keys, version), {})

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self._run(partial(super().has_key, key, version), False)

    def set_many(self, data: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> list[Any]:
        return self._run(partial(super().set_many, data, timeout, version), list(data))

    def delete_many(self, keys: Any, version: int | None = None) -> None:
        self._run(partial(super().delete_many, keys, version), None)

    def clear(self) -> None:
        self._run(super().clear, None)


class ResilientRedisCache(RedisCache):
    answer_when_down = True
