"""Loaded with ``-p tests.env_defaults`` (pyproject addopts) before pytest-django reads the
settings, so these defaults shape the settings of the test run:

- everything the tests write goes under ``var/test`` (models are cached in ``var/cache``, shared
  with ``make demo``, so a model is converted once per machine);
- Celery tasks run eagerly unless a test starts real workers;
- without ``DATABASE_URL`` / ``REDIS_URL`` the suite uses SQLite and skips the tests that need the
  real services (root conftest.py).
"""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

os.environ.setdefault("PROBEBENCH_DATA_DIR", str(ROOT / "var" / "test"))
os.environ.setdefault("PROBEBENCH_CACHE_DIR", str(ROOT / "var" / "cache"))
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "True")
os.environ.setdefault("PROBEBENCH_RATE_SUBMISSIONS", "1000/hour")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
