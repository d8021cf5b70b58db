"""`make demo` / `manage.py demo` as a user runs them: real processes on a fresh data directory
(SQLite and the filesystem broker under it), a free port, one small reference probe (``--only``).

The board answers at once; a second demo on the same data directory refuses, naming the first;
SIGTERM stops the server, the worker and its beat (no process left behind) and puts the run the
worker held back in the queue. The runs are never waited for: the worker is stopped while it
loads its model at most."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.model  # the worker may start loading MiniLM before it is stopped

ROOT = Path(__file__).resolve().parents[2]
PROBE = "refusal-dom-minilm"  # MiniLM: the smallest model of the manifest
EA_REFERENCE = "ea-minilm"  # its eval-awareness reference: submitted first, never waited for
CATEGORY = "refusal"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def demo_env(data_dir: Path) -> dict:
    """The embedded default on a fresh data directory, whatever services the test session uses."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "PROBEBENCH_DB_NAME")
    }
    env |= {
        "PROBEBENCH_DATA_DIR": str(data_dir),
        "CELERY_TASK_ALWAYS_EAGER": "False",
        "DJANGO_SETTINGS_MODULE": "probebench.settings",
        "PYTHONUNBUFFERED": "1",
    }
    return env


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return 0, ""


def wait_until(predicate, timeout: float, what: str, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{log.read_text()[-4000:]}")


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def assert_all_gone(procs: list[psutil.Process], timeout: float) -> None:
    gone, alive = psutil.wait_procs(procs, timeout=timeout)
    left = [f"{p.pid} {' '.join(p.cmdline())[:120]}" for p in alive if p.is_running()]
    for p in alive:  # do not leave them to the next test
        p.kill()
    assert not left, f"still running after the stop: {left}"


def runs_by_status(data_dir: Path) -> dict[str, int]:
    with sqlite3.connect(data_dir / "probebench.sqlite3") as db:
        return dict(db.execute("SELECT status, COUNT(*) FROM leaderboard_evaluationrun GROUP BY status"))


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def demo(tmp_path):
    """Start ``manage.py demo`` (or ``make demo``) in its own process group; kill what is left."""
    started: list[subprocess.Popen] = []

    def start(*cmd: str, data_dir: Path, log_name: str = "demo.out") -> tuple[subprocess.Popen, Path]:
        log = tmp_path / log_name
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=demo_env(data_dir),
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # Ctrl-C as in a terminal: a suite started in the background (`cmd &`) inherits SIGINT
            # ignored, and Python then installs no KeyboardInterrupt handler in the demo
            preexec_fn=_sigint_default,
        )
        started.append(proc)
        return proc, log

    yield start
    for proc in started:
        for child in descendants(proc.pid):
            child.kill()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_the_demo_serves_at_once_refuses_a_second_start_and_stops_cleanly_on_sigterm(demo, tmp_path):
    data_dir, port = tmp_path / "data", free_port()
    manage = [
        sys.executable,
        "manage.py",
        "demo",
        "--only",
        f"{EA_REFERENCE},{PROBE}",
        "--progress-every",
        "1",
    ]
    started_at = time.monotonic()
    proc, log = demo(*manage, "--port", str(port), data_dir=data_dir)

    wait_until(lambda: get(f"http://127.0.0.1:{port}/")[0] == 200, 60, "HTTP 200 on /", log)
    assert time.monotonic() - started_at < 60
    # the category of the submitted probe says it is being measured, not "open slot"
    page = wait_until(
        lambda: (
            (body := get(f"http://127.0.0.1:{port}/category/{CATEGORY}/")[1])
            and "being measured" in body
            and body
        ),
        30,
        "the category page to say what is being measured",
        log,
    )
    assert "1 reference probe is being measured" in page and "Open slot" not in page
    # the terminal reports progress
    wait_until(
        lambda: "reference probes scored: 0 of 2; runs:" in log.read_text(), 30, "a progress line", log
    )

    # a second demo on the same data directory refuses, naming the first one's pid and address
    second = subprocess.run(
        [*manage, "--port", str(free_port())],
        cwd=ROOT,
        env=demo_env(data_dir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode != 0
    assert f"pid {proc.pid}" in second.stderr and f":{port}/" in second.stderr, second.stderr

    # the worker and its beat are children of the demo (in their own process group)
    children = wait_until(
        lambda: len(descendants(proc.pid)) >= 2 and descendants(proc.pid), 30, "worker + beat", log
    )
    wait_until(lambda: runs_by_status(data_dir).get("running"), 60, "the worker to claim a run", log)

    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert_all_gone(children, timeout=5)
    assert "stopping" in log.read_text()
    # the interrupted run is queued again ("back in the queue"), unless it finished within the
    # worker's grace: either way no run is left running
    assert "running" not in runs_by_status(data_dir)


def test_make_demo_passes_sigterm_through_and_requeues_a_run_left_running(demo, tmp_path):
    """SIGTERM to `make` itself; then a demo killed outright (SIGKILL) leaves a run `running`, and
    the next start puts it back in the queue."""
    data_dir, port = tmp_path / "data", free_port()
    make = ["make", "-s", "-o", ".venv/.installed", "demo", f"PORT={port}", f"ONLY={PROBE}"]
    proc, log = demo(*make, data_dir=data_dir)
    wait_until(lambda: get(f"http://127.0.0.1:{port}/")[0] == 200, 60, "HTTP 200 on /", log)
    children = wait_until(
        lambda: len(descendants(proc.pid)) >= 3 and descendants(proc.pid), 30, "demo + worker", log
    )
    wait_until(lambda: runs_by_status(data_dir).get("running"), 60, "the worker to claim a run", log)

    os.kill(proc.pid, signal.SIGTERM)  # to make, not to the demo
    proc.wait(timeout=20)
    assert_all_gone(children, timeout=5)
    assert "stopping" in log.read_text()

    # a demo killed with no chance to clean up: its worker's run stays `running`
    manage = [sys.executable, "manage.py", "demo", "--only", PROBE, "--progress-every", "1"]
    killed, log = demo(*manage, "--port", str(port), data_dir=data_dir, log_name="killed.out")
    wait_until(lambda: runs_by_status(data_dir).get("running"), 90, "the worker to claim a run", log)
    children = descendants(killed.pid)
    for p in [psutil.Process(killed.pid), *children]:
        p.kill()
    psutil.wait_procs(children, timeout=10)
    killed.wait(timeout=10)
    assert runs_by_status(data_dir).get("running") == 1

    again, log = demo(*manage, "--port", str(port), data_dir=data_dir, log_name="again.out")
    wait_until(lambda: "back in the queue" in log.read_text(), 60, "the start-up to re-queue the run", log)
    assert "stale lock" in log.read_text()
    os.kill(again.pid, signal.SIGINT)  # Ctrl-C
    # the worker's grace (demo.STOP_GRACE_S), then the kill, the release and the server's exit: well
    # under a minute, also on a loaded machine
    assert again.wait(timeout=60) == 0
    assert "stopping" in log.read_text()
