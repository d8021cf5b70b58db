"""Root pytest configuration: decide, before Django starts, which services the suite uses.

- ``DATABASE_URL`` / ``REDIS_URL`` set (CI, ``make test`` on a machine with the services):
  PostgreSQL and Redis are used for real; tests marked ``postgres`` / ``redis`` run.
- Not set: SQLite and eager Celery tasks; those tests are skipped and the summary says which.
The environment defaults of the test run are set in tests/env_defaults.py, loaded with ``-p``
before pytest-django reads the settings.
"""

import os

import pytest

pytest_plugins = ["tests.workers"]


def pytest_collection_modifyitems(config, items):
    have_pg = os.environ.get("DATABASE_URL", "").startswith("postgres")
    have_redis = os.environ.get("REDIS_URL", "").startswith("redis")
    skip_pg = pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL (make test does)")
    skip_redis = pytest.mark.skip(reason="needs Redis: set REDIS_URL (make test does)")
    for item in items:
        if "postgres" in item.keywords and not have_pg:
            item.add_marker(skip_pg)
        if "redis" in item.keywords and not have_redis:
            item.add_marker(skip_redis)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # make test hands whole files to the xdist workers in collection order
        # (--no-loadscope-reorder): the files with a real model or Chromium go first, so that the
        # last files left, while the other worker may already idle, are short ones
        heavy = {
            item.path
            for item in items
            if item.get_closest_marker("model") or item.get_closest_marker("browser")
        }
        items.sort(key=lambda item: item.path not in heavy)


def pytest_sessionfinish(session, exitstatus):
    """Remove this session's data directory (tests/env_defaults.py), unless it was given."""
    import shutil
    from pathlib import Path

    data_dir = Path(os.environ.get("PROBEBENCH_DATA_DIR", ""))
    if data_dir.name == f"session-{os.getpid()}":
        shutil.rmtree(data_dir, ignore_errors=True)
