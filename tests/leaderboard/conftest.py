"""Fixtures of the leaderboard tests that need a registry with real split files (Django imports
stay inside the fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def small_registry(db, settings, tmp_path) -> Path:
    """The mini registry of the integration tests, in this test's database; holdouts of 16 rows
    are drawn from sealed pools of 200 rows (``mini_registry.seal_pools``) and written under a
    data directory of this test."""
    from leaderboard.registry_sync import registry_sync
    from tests.integration.mini_registry import build_mini_registry, seal_pools
    from tests.leaderboard.reevaluation_data import HOLDOUT_SIZE

    root = build_mini_registry(tmp_path / "registry")
    settings.REGISTRY_ROOT = root
    settings.DATA_DIR = tmp_path / "data"
    settings.HOLDOUT_SIZE = HOLDOUT_SIZE
    seal_pools(root, settings.DATA_DIR, settings.HOLDOUT_SEALING_KEY_FILE)
    registry_sync()
    return root
