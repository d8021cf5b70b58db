"""The client of a rate limit is the socket's address unless proxies are declared: a forged
X-Forwarded-For does not reset the anonymous limit (PROBEBENCH_NUM_PROXIES, default 0)."""

import pytest
from django.core.cache import cache
from rest_framework.throttling import SimpleRateThrottle

CATEGORIES = "/api/v1/categories"


@pytest.fixture
def anon_limit_of_three(monkeypatch, registry):
    cache.clear()
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "anon", "3/min")
    yield
    cache.clear()


def test_a_forged_x_forwarded_for_does_not_reset_the_anonymous_limit(client, anon_limit_of_three):
    for _ in range(3):
        assert client.get(CATEGORIES, REMOTE_ADDR="203.0.113.7").status_code == 200
    assert client.get(CATEGORIES, REMOTE_ADDR="203.0.113.7").status_code == 429
    for forged in ("198.51.100.1", "198.51.100.2, 10.0.0.1", "unknown"):
        response = client.get(CATEGORIES, REMOTE_ADDR="203.0.113.7", HTTP_X_FORWARDED_FOR=forged)
        assert response.status_code == 429, forged
    # the limit is per address: another machine is not affected
    assert client.get(CATEGORIES, REMOTE_ADDR="203.0.113.8").status_code == 200


def test_behind_a_declared_proxy_the_address_it_saw_is_the_client(client, anon_limit_of_three, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    proxy = {"REMOTE_ADDR": "10.0.0.2"}
    for _ in range(3):
        assert client.get(CATEGORIES, HTTP_X_FORWARDED_FOR="198.51.100.1", **proxy).status_code == 200
    # the proxy appends the address it saw; what the client put before it does not count
    forged = client.get(CATEGORIES, HTTP_X_FORWARDED_FOR="192.0.2.99, 198.51.100.1", **proxy)
    assert forged.status_code == 429
    # another client behind the same proxy has its own budget
    assert client.get(CATEGORIES, HTTP_X_FORWARDED_FOR="198.51.100.2", **proxy).status_code == 200
