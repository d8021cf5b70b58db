"""Loaded with ``-p tests.env_defaults`` (pyproject addopts) before pytest-django reads the
settings, so these defaults shape the settings of the test run:

- everything a test session writes goes under ``var/test/session-<pid>`` (removed at the end), so
  two sessions on one machine never share a database file or a filesystem broker; models and
  activations are cached in ``var/cache``, shared with ``make demo`` (content-addressed, safe);
- Celery tasks run eagerly unless a test starts real workers;
- without ``DATABASE_URL`` / ``REDIS_URL`` the suite uses SQLite and skips the tests that need the
  real services (root conftest.py).
"""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

os.environ.setdefault("PROBEBENCH_DATA_DIR", str(ROOT / "var" / "test" / f"session-{os.getpid()}"))
os.environ.setdefault("PROBEBENCH_CACHE_DIR", str(ROOT / "var" / "cache"))
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "True")
os.environ.setdefault("SECRET_KEY", "test-suite-only-not-secret")  # settings refuse to start without one
os.environ.setdefault("PROBEBENCH_RATE_SUBMISSIONS", "1000/hour")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# steer runs (direction utility) replay the model 2K+2 times per task: only where a test asks
os.environ.setdefault("PROBEBENCH_STEER_RUNS", "False")
# stress runs score 8× the test rows per task: only where a test asks
os.environ.setdefault("PROBEBENCH_STRESS_RUNS", "False")
# robustness runs attack the probe for the protocol's steps per task: only where a test asks
os.environ.setdefault("PROBEBENCH_ROBUSTNESS_RUNS", "False")
# the reliability table refits and scores a reference probe on a model: only where a test asks
os.environ.setdefault("PROBEBENCH_RELIABILITY_EACH_CYCLE", "False")
