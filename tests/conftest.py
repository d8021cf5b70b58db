import pytest

from tests.factories import UserFactory


@pytest.fixture
def registry(db):
    """The real registry (tasks.yaml, registry/) mirrored into the test database."""
    from leaderboard.registry_sync import registry_sync

    registry_sync(verify_hashes=False)


@pytest.fixture
def researcher(db):
    return UserFactory(username="ada")


@pytest.fixture
def stranger(db):
    return UserFactory(username="mallory")


@pytest.fixture
def maintainer(db):
    return UserFactory(username="grace", is_staff=True, is_superuser=True)
