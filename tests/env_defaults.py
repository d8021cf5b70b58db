"""Loaded with ``-p tests.env_defaults`` (pyproject addopts) before pytest-django reads the
settings, so these defaults shape the settings of the test run:

- everything a test session writes goes under ``var/test/session-<pid>`` (removed at the end), so
  two sessions on one machine never share a database file or a filesystem broker; models and
  activations are cached in ``var/cache``, shared with ``make demo`` (content-addressed, safe);
- Celery tasks run eagerly unless a test starts real workers;
- without ``DATABASE_URL`` / ``REDIS_URL`` the suite uses SQLite and skips the tests that need the
  real services (root conftest.py);
- under pytest-xdist (``make test`` runs ``-n 2``) each worker is a test session of its own: its
  data directory is ``<the session's>/gw<N>`` and its Redis database is REDIS_URL's plus N (Celery
  workers started by a test inherit both); pytest-django gives it its own test database.
"""

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

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
# the canary at a worker's start loads every model the worker serves: only where a test asks
os.environ.setdefault("PROBEBENCH_CANARY", "False")


def _worker_redis_url(url: str, index: int) -> str:
    """REDIS_URL with its database number moved up by ``index`` (Redis has databases 0-15)."""
    parts = urlsplit(url)
    db = int(parts.path.strip("/") or 0) + index
    if db > 15:
        raise RuntimeError(f"REDIS_URL={url}: worker {index} would need Redis database {db}; 15 is the last")
    return urlunsplit(parts._replace(path=f"/{db}"))


# the xdist controller set the session's defaults above before starting the workers, which
# inherit them: each worker writes below its own directory and uses its own Redis database
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ...; unset without -n
if _WORKER:
    os.environ["PROBEBENCH_DATA_DIR"] = str(Path(os.environ["PROBEBENCH_DATA_DIR"]) / _WORKER)
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = _worker_redis_url(os.environ["REDIS_URL"], int(_WORKER.removeprefix("gw")))


def shared_by_workers(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """A directory that ``build(path)`` fills once per test run. Under xdist it lies in the run's
    temporary directory, which every worker sees: the first worker to ask builds it under a file
    lock while the others wait, then all of them read it (a build that failed is redone)."""
    if not _WORKER:
        path = tmp_path_factory.mktemp(name)
        build(path)
        return path
    path = tmp_path_factory.getbasetemp().parent / name
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        built = Path(f"{path}.built")
        if not built.exists():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            build(path)
            built.touch()
    return path
