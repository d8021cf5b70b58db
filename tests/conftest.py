"""Shared fixtures: named personas and the real registry mirrored into the test database.
Django-dependent imports stay inside fixtures so evaluator tests can run with ``-p no:django``."""

import pytest


@pytest.fixture
def registry(db):
    """The real registry (tasks.yaml, registry/) mirrored into the test database."""
    from leaderboard.registry_sync import registry_sync

    registry_sync(verify_hashes=False)


@pytest.fixture
def researcher(db):
    from tests.factories import UserFactory

    return UserFactory(username="ada")


@pytest.fixture
def stranger(db):
    from tests.factories import UserFactory

    return UserFactory(username="mallory")


@pytest.fixture
def maintainer(db):
    from tests.factories import UserFactory

    return UserFactory(username="grace", is_staff=True, is_superuser=True)


@pytest.fixture
def system_account(db):
    """The account the reference probes are installed under, made as the install makes it."""
    from leaderboard.services.accounts import system_account_get_or_create

    return system_account_get_or_create()


@pytest.fixture(autouse=True)
def _empty_cache():
    """Each test starts with empty Django caches: the board caches its counts (under a stamp of
    the newest rows, which a rolled-back SQLite test can hand out again) and comparisons, the
    throttles their counts (every test starts with its whole budget)."""
    import contextlib

    from django.core.cache import caches

    with contextlib.suppress(Exception):  # no Django settings (evaluator tests with -p no:django)
        for alias in ("default", "throttle"):
            caches[alias].clear()
    yield
