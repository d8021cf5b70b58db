"""``GET /health``: whether each service the site needs answers, for a load balancer or a person.

    200 {"status": "ok", "services": {"database": "ok", "cache": "ok", "rate_limits": "ok", "broker": "ok"}}
    503 the same body, with "down" for each service that did not answer and "status": "down"

``database``: one query; ``cache`` (the pages' cache) and ``rate_limits`` (the throttles'
counts): a value written and read back; ``broker``: one connection to the task broker
(``probebench.broker.broker_reachable``). With Redis, cache, rate limits and broker are one
server. The answer never says why a service is down (the reason can name a host or a path; it is
logged), is never cached, and is not rate limited (it is not an API view).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

from django.core.cache import caches
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from probebench.broker import broker_reachable
from probebench.throttling import THROTTLE_CACHE

log = logging.getLogger(__name__)

HEALTH_KEY = "health:probe"


def database_up() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone() == (1,)


def cache_up(alias: str) -> bool:
    """A value written to the cache ``alias`` is read back (a cache that answers "nothing" while
    its server is down, ``probebench.cache.ResilientRedisCache``, reads back nothing)."""
    cache = caches[alias]
    token = secrets.token_hex(8)
    cache.set(HEALTH_KEY, token, timeout=30)
    return cache.get(HEALTH_KEY) == token


CHECKS: dict[str, Callable[[], bool]] = {
    "database": database_up,
    "cache": lambda: cache_up("default"),
    "rate_limits": lambda: cache_up(THROTTLE_CACHE),
    "broker": broker_reachable,
}


def _up(name: str, check: Callable[[], bool]) -> bool:
    try:
        if check():
            return True
    except Exception:  # noqa: BLE001 - whatever a service raises, it is down; the reason is logged
        log.warning("health: %s is down", name, exc_info=True)
        return False
    log.warning("health: %s is down", name)
    return False


@never_cache
@require_safe
def health(request: HttpRequest) -> JsonResponse:
    services = {name: "ok" if _up(name, check) else "down" for name, check in CHECKS.items()}
    down = "down" in services.values()
    return JsonResponse(
        {"status": "down" if down else "ok", "services": services}, status=503 if down else 200
    )
