"""Real Celery worker processes for end-to-end tests (a pytest plugin loaded by the root conftest,
so integration and browser tests share these fixtures).

``start_worker`` starts ``celery -A probebench worker`` as a separate OS process on the
test database (PostgreSQL in CI, the SQLite test file otherwise) and the configured broker (Redis
in CI, the filesystem broker otherwise), and turns eager mode off in this process so that
dispatches really go through the broker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from leaderboard.policy import WORKER_QUEUES
from tests.env_defaults import shared_by_workers

ROOT = Path(__file__).resolve().parents[1]


class WorkerProcess:
    def __init__(self, env: dict, name: str, queues: str = WORKER_QUEUES, pool: str = "solo"):
        self.env, self.name, self.queues, self.pool = env, name, queues, pool
        self.proc: subprocess.Popen | None = None
        self.log = Path(env["PROBEBENCH_DATA_DIR"]) / f"worker-{name}.log"

    def start(self) -> WorkerProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "probebench",
            "worker",
            "-Q",
            self.queues,
            "--concurrency",
            "1",
            "--pool",
            self.pool,  # "prefork" where a test needs Celery's time limits (solo has none)
            "--hostname",
            f"{self.name}@%h",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=self.env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def kill(self) -> None:
        """SIGKILL the whole process group: no chance to clean up, as when a machine dies."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@pytest.fixture
def worker_env(transactional_db):
    """Environment for worker processes on this test's database; eager mode off here."""
    from django.db import connection

    from probebench.celery import app

    env = dict(os.environ)
    env["PROBEBENCH_DB_NAME"] = str(connection.settings_dict["NAME"])
    env["CELERY_TASK_ALWAYS_EAGER"] = "False"
    env["DJANGO_SETTINGS_MODULE"] = "probebench.settings"
    app.conf.task_always_eager = False
    app.control.purge()  # no message of an earlier test is delivered to this test's workers
    yield env
    app.conf.task_always_eager = True


@pytest.fixture
def start_worker(worker_env):
    workers: list[WorkerProcess] = []

    def start(name: str | None = None, pool: str = "solo") -> WorkerProcess:
        w = WorkerProcess(worker_env, name or f"w{uuid.uuid4().hex[:6]}", pool=pool).start()
        workers.append(w)
        return w

    yield start
    for w in workers:
        w.stop()


def settled(sub_id: int) -> bool:
    """The submission failed, was rejected, or is scored with every axis (its secondary runs too)."""
    from leaderboard.models import Submission
    from leaderboard.selectors.shared import submission_settled

    return submission_settled(Submission.objects.get(pk=sub_id))


def wait_for(predicate, *, timeout: float, interval: float = 0.5, what: str = "condition", workers=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    logs = "\n".join(f"--- {w.name}\n{w.output()[-3000:]}" for w in workers)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{logs}")


# --------------------------------------------------------------------------- a small real registry

SOURCE = "smollm2-135m-instruct"
TARGET = "all-minilm-l6-v2"


@pytest.fixture(scope="session")
def mini_root(tmp_path_factory):
    from tests.integration.mini_registry import build_mini_registry

    return shared_by_workers(tmp_path_factory, "registry", build_mini_registry)


def train_probe(
    registry: Path, out: Path, *, task: str, layer: int = 12, method: str = "logistic_regression"
) -> Path:
    """A real probe trained with the evaluator's CLI on the small registry."""
    cache = os.environ["PROBEBENCH_CACHE_DIR"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "train",
            "--registry",
            str(registry),
            "--cache-dir",
            cache,
            "--task",
            task,
            "--model",
            SOURCE,
            "--layer",
            str(layer),
            "--method",
            method,
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def trained(mini_root, tmp_path_factory):
    """Real probes on SmolLM2: the eval-awareness reference and a truth probe (trained once per
    run, shared by the xdist workers)."""

    def train_both(base: Path) -> None:
        train_probe(mini_root, base / "ref", task="benchmark-vs-user-v1")
        train_probe(mini_root, base / "truth", task="cities-truth-v1")

    base = shared_by_workers(tmp_path_factory, "probes", train_both)
    return {"reference": base / "ref", "truth": base / "truth"}


@pytest.fixture
def mini(mini_root, settings, worker_env):
    """The small registry in this test's database, for this process and its workers, with its
    sealed pools under the data directory they share."""
    from django.core.management import call_command

    from tests.integration.mini_registry import seal_pools

    seal_pools(mini_root, settings.DATA_DIR, settings.HOLDOUT_SEALING_KEY_FILE)
    settings.REGISTRY_ROOT = mini_root
    settings.ENABLED_MODELS = [SOURCE, TARGET]
    worker_env["PROBEBENCH_REGISTRY_ROOT"] = str(mini_root)
    worker_env["PROBEBENCH_MODELS"] = f"{SOURCE},{TARGET}"
    call_command("sync_registry", verbosity=0)
    return mini_root


def submit_dir(user, probe_dir: Path, **kwargs):
    """Submit a probe directory through the submission service."""
    import json

    from leaderboard.services.submissions import submission_create

    with open(probe_dir / "probe.safetensors", "rb") as fh:
        return submission_create(
            user=user, artifact=fh, metadata=json.loads((probe_dir / "probe.json").read_text()), **kwargs
        )
