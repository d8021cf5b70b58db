"""Root pytest configuration: decide, before Django starts, which services the suite uses.

- ``DATABASE_URL`` / ``REDIS_URL`` set (CI, ``make test`` on a machine with the services):
  PostgreSQL and Redis are used for real; tests marked ``postgres`` / ``redis`` run.
- Not set: SQLite and eager Celery tasks; those tests are skipped and the summary says which.
Everything the tests write goes under ``var/test`` (models are cached in ``var/cache`` and shared
with ``make demo`` so a model is converted once per machine).
"""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


def pytest_configure(config):
    os.environ.setdefault("PROBEBENCH_DATA_DIR", str(ROOT / "var" / "test"))
    os.environ.setdefault("PROBEBENCH_CACHE_DIR", str(ROOT / "var" / "cache"))
    os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "True")
    os.environ.setdefault("PROBEBENCH_RATE_SUBMISSIONS", "1000/hour")


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
