"""A worker process recovers after a run hit its time limit in the middle of its first heavy import.

Celery's prefork pool delivers the soft time limit as an exception raised wherever the run is. The
first run of a fresh worker process imports torch and transformers; cut off in the middle of
``import torch``, it left a half-initialised torch in the process, and every later run of that
process failed. Here a real prefork worker gets a first run with a one-second budget (it fails with
the time-limit reason), then a second run with the normal budget, which must succeed in the same
worker process.
"""

from __future__ import annotations

import pytest

from leaderboard.models import EvaluationRun
from leaderboard.tasks import evaluation_run_execute_task
from tests.integration.conftest import submit_dir, wait_for

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]
Run = EvaluationRun


def _done(run: Run) -> bool:
    run.refresh_from_db()
    return run.status in (Run.Status.SUCCEEDED, Run.Status.FAILED)


def test_a_run_after_one_that_hit_its_time_limit_succeeds_in_the_same_worker(
    mini, trained, researcher, worker_env, start_worker, tmp_path
):
    from probebench.celery import app

    # An empty cache for the worker: on the suite's warm cache the first run can finish inside its
    # one-second budget (the model and the activations already on disk), and then nothing is cut.
    worker_env["PROBEBENCH_CACHE_DIR"] = str(tmp_path / "cache")

    sub = submit_dir(researcher, trained["truth"])
    app.control.purge()  # the runs are sent by hand below, one at a time
    first, second = Run.objects.filter(submission=sub, kind=Run.Kind.SCORE).order_by("pk")[:2]
    worker = start_worker("time-limit", pool="prefork")

    evaluation_run_execute_task.apply_async(args=[first.pk], soft_time_limit=1, time_limit=600)
    wait_for(lambda: _done(first), timeout=300, what="the first run to fail", workers=[worker])
    assert first.status == Run.Status.FAILED and first.error_kind == "timeout", first.error

    evaluation_run_execute_task.apply_async(args=[second.pk])
    wait_for(lambda: _done(second), timeout=600, what="the second run to finish", workers=[worker])
    assert second.status == Run.Status.SUCCEEDED, f"{second.error}\n{worker.output()[-3000:]}"
    assert first.worker_host == second.worker_host
    assert "ForkPoolWorker-2" not in worker.output()  # one pool process ran both
