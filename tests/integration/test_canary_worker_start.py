"""A real ``celery worker`` whose canary differs exits with status 1 before it takes any message:
the message queued before it started is still queued after it stopped, and the log names the row
and the difference. The same worker with the committed canary starts and takes that message (so
the count above could have dropped). The real SmolLM2, on the configured broker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from leaderboard.tasks import evaluation_runs_reconcile_task
from tests.integration.conftest import wait_for

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
SMOLLM = "smollm2-135m-instruct"


def registry_root_with_canary(tmp_path: Path, canary: dict) -> Path:
    """The project's registry (its files linked, not copied) with another canary file."""
    root = tmp_path / "root"
    (root / "registry").mkdir(parents=True)
    (root / "tasks.yaml").symlink_to(ROOT / "tasks.yaml")
    for child in (ROOT / "registry").iterdir():
        if child.name != "canary.json":
            (root / "registry" / child.name).symlink_to(child)
    (root / "registry" / "canary.json").write_text(json.dumps(canary))
    return root


def queued(queue: str = "default") -> int:
    from amqp.exceptions import ChannelError

    from probebench.celery import app

    with app.connection_for_write() as conn:
        try:
            return conn.default_channel.queue_declare(queue=queue, passive=True).message_count
        except ChannelError:  # Redis drops an emptied queue's key: no queue is an empty queue
            return 0


def test_a_worker_whose_canary_differs_exits_1_and_takes_no_message(worker_env, start_worker, tmp_path):
    canary = json.loads((ROOT / "registry" / "canary.json").read_text())
    row = next(m for m in canary["models"] if m["model"] == SMOLLM)["rows"][1]
    row["expected"] += 0.25
    worker_env["PROBEBENCH_CANARY"] = "True"
    worker_env["PROBEBENCH_MODELS"] = SMOLLM
    worker_env["PROBEBENCH_REGISTRY_ROOT"] = str(registry_root_with_canary(tmp_path, canary))
    evaluation_runs_reconcile_task.delay()
    assert queued() == 1

    refused = start_worker("refused")
    assert refused.proc is not None
    assert refused.proc.wait(timeout=600) == 1, refused.output()[-3000:]
    log = refused.output()
    assert "refusing to start" in log and row["id"] in log and "|Δ| 0.25" in log, log[-3000:]
    assert " ready." not in log
    assert queued() == 1  # the message is still there: the worker never consumed

    shutil.rmtree(tmp_path / "root")
    worker_env["PROBEBENCH_REGISTRY_ROOT"] = str(ROOT)  # the committed canary
    agreeing = start_worker("agreeing")
    wait_for(
        lambda: queued() == 0, timeout=600, what="the agreeing worker to take the message", workers=[agreeing]
    )
    assert f"canary: {SMOLLM}: agree" in agreeing.output()
