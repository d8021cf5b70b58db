"""The web forms are throttled like the API (DRF's throttle classes and rates, one budget for the
form and the API), and logins are throttled per username and address (django-axes), on the site's
login page and the admin's."""

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.urls import reverse
from rest_framework.throttling import SimpleRateThrottle

PASSWORD = "correct horse battery staple"  # tests.factories.UserFactory


@pytest.fixture(autouse=True)
def empty_throttle_cache():
    cache.clear()
    yield
    cache.clear()


def test_the_submission_form_shares_the_api_submission_budget(client, researcher, registry, monkeypatch):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "submissions", "2/hour")
    client.force_login(researcher)
    for _ in range(2):  # two (invalid) submissions through the API use the budget
        assert client.post("/api/v1/submissions", {"metadata": "{}"}).status_code == 400
    response = client.post(reverse("submit:new"), {"layer": "3"})
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert b"rate limit" in response.content
    # reading the form is not limited
    assert client.get(reverse("submit:new")).status_code == 200


def test_the_form_budget_is_spent_by_the_form_too(client, researcher, registry, monkeypatch):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "submissions", "2/hour")
    client.force_login(researcher)
    for _ in range(2):
        assert client.post(reverse("submit:new"), {"layer": "3"}).status_code == 400
    assert client.post("/api/v1/submissions", {"metadata": "{}"}).status_code == 429


def _signup(client, name: str, **extra):
    data = {"username": name, "email": f"{name}@example.org", "password1": PASSWORD, "password2": PASSWORD}
    return client.post(reverse("submit:signup"), data, **extra)


def test_signup_is_throttled_per_address_and_a_forged_forwarded_for_does_not_help(client, db, monkeypatch):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "signup", "2/hour")
    assert _signup(client, "first", REMOTE_ADDR="203.0.113.5").status_code == 302
    client.logout()
    assert _signup(client, "second", REMOTE_ADDR="203.0.113.5").status_code == 302
    client.logout()
    refused = _signup(client, "third", REMOTE_ADDR="203.0.113.5", HTTP_X_FORWARDED_FOR="198.51.100.3")
    assert refused.status_code == 429
    assert not get_user_model().objects.filter(username="third").exists()
    assert _signup(client, "fourth", REMOTE_ADDR="203.0.113.6").status_code == 302


LOGIN_PAGES = [
    pytest.param("/accounts/login/", id="site"),
    pytest.param("/admin/login/", id="admin"),
]


def _login(client, url: str, username: str, password: str, **extra):
    return client.post(url, {"username": username, "password": password}, **extra)


@pytest.mark.parametrize("url", LOGIN_PAGES)
def test_logins_lock_after_repeated_failures_for_that_username_and_address(client, maintainer, settings, url):
    settings.AXES_FAILURE_LIMIT = 3
    for attempt in range(3):
        response = _login(client, url, "grace", f"wrong-{attempt}", REMOTE_ADDR="203.0.113.9")
        assert response.status_code in (200, 429)
    # locked: even the right password is refused, and a forged X-Forwarded-For does not unlock it
    for extra in ({}, {"HTTP_X_FORWARDED_FOR": "198.51.100.4"}):
        locked = _login(client, url, "grace", PASSWORD, REMOTE_ADDR="203.0.113.9", **extra)
        assert locked.status_code == 429
        assert "_auth_user_id" not in client.session
    assert b"Too many failed logins" in locked.content
    # the lock is for that username from that address
    assert _login(client, url, "grace", PASSWORD, REMOTE_ADDR="203.0.113.10").status_code == 302
    assert client.session["_auth_user_id"] == str(maintainer.pk)


def test_a_successful_login_before_the_limit_resets_the_count(client, researcher, settings):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(2):
        assert _login(client, "/accounts/login/", "ada", "wrong").status_code == 200
    assert _login(client, "/accounts/login/", "ada", PASSWORD).status_code == 302
    client.logout()
    for _ in range(2):
        assert _login(client, "/accounts/login/", "ada", "wrong").status_code == 200
    assert _login(client, "/accounts/login/", "ada", PASSWORD).status_code == 302
