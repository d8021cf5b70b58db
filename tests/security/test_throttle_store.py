"""Without Redis the rate limits count in a SQLite file (probebench.throttle_store), not in Django's
file cache: that cache culled a random third of its entries once it held 20,000 (a submitter's
spent budget among them: the next request was let through), and each check listed every file
under a lock (about 0.1 s per check at 20,000 entries). Here the store holds 25,000 live entries
of other clients: the submitter's budget survives, nothing was dropped, and a check stays fast.

When the counts cannot be reached (here: a store that cannot be opened), a read is served
without counting and a write is refused with 503, never let through unthrottled."""

from __future__ import annotations

import statistics
import time

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.cache import caches
from django.test import RequestFactory
from django.urls import reverse
from rest_framework.throttling import SimpleRateThrottle

from probebench.throttle_store import SQLiteCache
from probebench.throttling import THROTTLE_CACHE, AnonRateThrottle
from tests.security.test_headers_security import _start

BACKEND = "probebench.throttle_store.SQLiteCache"
OTHER_CLIENTS = 25_000  # past the file cache's 20,000 (MAX_ENTRIES)
SUBMISSIONS = "/api/v1/submissions"
PASSWORD = "correct horse battery staple"  # tests.factories.UserFactory


@pytest.fixture(autouse=True)
def sqlite_counts(settings, tmp_path):
    """The embedded mode's store, also where this test session runs with REDIS_URL."""
    location = str(tmp_path / "ratelimits.sqlite3")
    settings.CACHES = {**settings.CACHES, THROTTLE_CACHE: {"BACKEND": BACKEND, "LOCATION": location}}
    yield


def _store() -> SQLiteCache:
    store = caches[THROTTLE_CACHE]
    assert isinstance(store, SQLiteCache)
    return store


def test_without_redis_the_settings_count_in_the_sqlite_store():
    started = _start(
        "from django.conf import settings; print(settings.CACHES['throttle']['BACKEND'])", SECRET_KEY="x"
    )
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == BACKEND


def _live_entries(store: SQLiteCache) -> int:
    return (
        store.connection()
        .execute("SELECT COUNT(*) FROM entries WHERE expires > ?", (time.time(),))
        .fetchone()[0]
    )


def _fill(store: SQLiteCache, n: int) -> None:
    """n clients, each with a live history of one request (as DRF writes it), in one transaction."""
    now = time.time()
    with store.transaction():
        for i in range(n):
            store.set(f"throttle_anon_198.51.{i // 256}.{i % 256}", [now], 3600)


def test_a_budget_survives_a_store_of_25000_entries_and_a_check_stays_fast(
    client, researcher, registry, monkeypatch
):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "submissions", "2/hour")
    store = _store()
    client.force_login(researcher)
    for _ in range(2):  # two (invalid) submissions spend the budget
        assert client.post(SUBMISSIONS, {"metadata": "{}"}).status_code == 400

    _fill(store, OTHER_CLIENTS)
    assert _live_entries(store) >= OTHER_CLIENTS + 1  # nothing was culled to make room

    refused = client.post(SUBMISSIONS, {"metadata": "{}"})
    assert refused.status_code == 429, refused.content
    assert refused.json()["error"].startswith("Request was throttled")
    assert int(refused["Retry-After"]) > 3000  # the window is an hour, started a moment ago

    # one check (DRF's anonymous throttle, read-check-write in one transaction) at 25,000 entries
    request = RequestFactory().get("/api/v1/categories", REMOTE_ADDR="203.0.113.77")
    request.user = AnonymousUser()
    timings = []
    for _ in range(200):
        started = time.perf_counter()
        assert AnonRateThrottle().allow_request(request, None)
        timings.append(time.perf_counter() - started)
    assert statistics.median(timings) < 0.010, f"median check {statistics.median(timings) * 1000:.1f} ms"
    assert _live_entries(store) >= OTHER_CLIENTS + 2


def test_only_expired_entries_are_removed(db):
    store = _store()
    store.set("live", [1.0], 3600)
    store.set("forever", [1.0], None)
    for i in range(100):
        store.set(f"expired-{i}", [1.0], 0)  # Django's timeout 0: expired at once
    assert store.get("expired-0") is None and not store.has_key("expired-0")
    store._next_purge = 0.0  # the next write purges (at most once a minute otherwise)
    store.set("another", [1.0], 3600)
    keys = {row[0] for row in store.connection().execute("SELECT key FROM entries")}
    assert not any("expired" in key for key in keys), keys
    assert store.get("live") == [1.0] and store.get("forever") == [1.0] and store.get("another") == [1.0]
    assert store.add("live", [2.0], 60) is False and store.get("live") == [1.0]  # a live value stays
    assert store.add("expired-again", [3.0], 60) is True and store.get("expired-again") == [3.0]


@pytest.fixture
def counts_unreachable(settings, tmp_path):
    """The throttles' store cannot be opened (its path is a directory)."""
    settings.CACHES = {**settings.CACHES, THROTTLE_CACHE: {"BACKEND": BACKEND, "LOCATION": str(tmp_path)}}
    yield


def test_without_counts_reads_are_served_and_writes_refused_with_503(
    client, researcher, registry, counts_unreachable
):
    assert client.get("/api/v1/categories", REMOTE_ADDR="203.0.113.5").status_code == 200
    assert client.get(reverse("leaderboard:index")).status_code == 200

    client.force_login(researcher)
    refused = client.post(SUBMISSIONS, {"metadata": "{}"})
    assert refused.status_code == 503
    body = refused.json()
    assert body["field"] is None and "rate-limit counts cannot be reached" in body["error"]

    client.logout()
    data = {"username": "newcomer", "email": "n@example.org", "password1": PASSWORD, "password2": PASSWORD}
    page = client.post(reverse("submit:signup"), data, REMOTE_ADDR="203.0.113.6")
    assert page.status_code == 503
    assert b"rate-limit counts cannot be reached" in page.content
    assert not get_user_model().objects.filter(username="newcomer").exists()
