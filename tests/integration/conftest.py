"""The worker-process fixtures live in tests/workers.py (a plugin of the root conftest, so the
browser tests share them); the helpers are re-exported here for the tests that import them."""

from tests.workers import SOURCE, TARGET, WorkerProcess, settled, submit_dir, train_probe, wait_for  # noqa: F401
