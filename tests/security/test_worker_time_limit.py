"""A worker process recovers after a run hit its time limit.

Celery's prefork pool delivers the soft time limit as an exception raised wherever the run is. A
first run cut off in the middle of ``import torch`` once left a half-initialised torch in the
process, and every later run of that process failed; each worker process now imports the model
libraries before its first run (``leaderboard.tasks.model_libraries_import_at_start``). Here a real
prefork worker gets a first run with a one-second budget whose artifact read blocks (a named pipe
stands in for storage that hangs), so the cut lands inside the run whatever the machine's speed; it
fails with the time-limit reason. A second run with the normal budget must then succeed in the same
worker process.
"""

from __future__ import annotations

import os

import pytest

from leaderboard.artifacts import artifact_abspath
from leaderboard.models import EvaluationRun
from leaderboard.tasks import evaluation_run_execute_task
from tests.integration.conftest import submit_dir, wait_for

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]
Run = EvaluationRun


def test_a_run_after_one_that_hit_its_time_limit_succeeds_in_the_same_worker(
    mini, trained, researcher, worker_env, start_worker, tmp_path
):
    from probebench.celery import app

    worker_env["PROBEBENCH_CACHE_DIR"] = str(tmp_path / "cache")

    sub = submit_dir(researcher, trained["truth"])
    app.control.purge()  # the runs are sent by hand below, one at a time
    runs = Run.objects.filter(submission=sub)
    artifact = artifact_abspath(sub.probe_version.artifact_path)
    kept = artifact.with_name(artifact.name + ".kept")
    artifact.rename(kept)
    os.mkfifo(artifact)  # opening it blocks until the test writes, which it never does
    worker = start_worker("time-limit", pool="prefork")

    evaluation_run_execute_task.apply_async(args=[runs[0].pk], soft_time_limit=1, time_limit=600)
    wait_for(
        lambda: runs.filter(status=Run.Status.FAILED).exists(),
        timeout=300,
        what="the first run to be cut",
        workers=[worker],
    )
    first = runs.get(status=Run.Status.FAILED)
    assert first.error_kind == "timeout", first.error
    artifact.unlink()
    kept.rename(artifact)

    second = runs.filter(status=Run.Status.QUEUED).order_by("pk").first()
    assert second is not None
    evaluation_run_execute_task.apply_async(args=[second.pk])
    wait_for(
        lambda: runs.filter(status=Run.Status.SUCCEEDED).exists(),
        timeout=600,
        what="the second run to finish",
        workers=[worker],
    )
    second = runs.get(status=Run.Status.SUCCEEDED)
    assert first.worker_host == second.worker_host
    assert "ForkPoolWorker-2" not in worker.output()  # one pool process ran both
