"""Nothing is lost and nothing runs twice to completion: a worker killed mid-run, a broker that
forgot its messages, two workers racing on one run. Real worker processes, real database."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from leaderboard.models import EvaluationRun
from leaderboard.services.lifecycle import evaluation_runs_reconcile
from leaderboard.tasks import evaluation_run_execute_task
from tests.integration.conftest import settled, submit_dir, wait_for

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]
Run = EvaluationRun


def finished(sub_id: int) -> bool:
    return settled(sub_id)


def successes(*workers) -> int:
    """How many runs the workers' logs say they completed."""
    return sum(len(re.findall(r"succeeded in [\d.]+s: 'succeeded'", w.output())) for w in workers)


def test_a_run_whose_worker_is_killed_completes_once_after_reconciling(
    mini, trained, researcher, start_worker, worker_env, settings
):
    worker_env["PROBEBENCH_HEARTBEAT_TIMEOUT_S"] = "10"
    settings.RUN_HEARTBEAT_TIMEOUT_S = 10
    doomed = start_worker("doomed")
    sub = submit_dir(researcher, trained["truth"])
    wait_for(
        lambda: Run.objects.filter(submission=sub, status=Run.Status.RUNNING).exists(),
        timeout=120,
        interval=0.05,
        what="a run to start",
        workers=[doomed],
    )
    victim = Run.objects.get(submission=sub, status=Run.Status.RUNNING)
    doomed.kill()  # SIGKILL: no cleanup, no ack
    assert Run.objects.get(pk=victim.pk).status == Run.Status.RUNNING  # orphaned

    rescuer = start_worker("rescuer")
    time.sleep(11)  # let the orphan's heartbeat go stale
    report = evaluation_runs_reconcile()
    assert victim.pk in report["requeued_dead"]
    # runs still queued for the dead worker's prefetch are re-published the same way
    Run.objects.filter(submission=sub, status=Run.Status.QUEUED).update(
        queued_at=timezone.now() - timedelta(hours=1)
    )
    evaluation_runs_reconcile()
    wait_for(lambda: finished(sub.pk), timeout=600, what="the submission to finish", workers=[rescuer])

    sub.refresh_from_db()
    assert sub.status == "scored", sub.failure_reason
    victim.refresh_from_db()
    assert (
        victim.status == Run.Status.SUCCEEDED
        and victim.attempts == 2
        and victim.worker_host.startswith("rescuer")
    )
    runs = list(sub.runs.all())
    assert all(r.status == Run.Status.SUCCEEDED for r in runs)
    assert successes(doomed, rescuer) == len(runs), "some run completed twice (or not at all)"


@pytest.mark.redis
def test_runs_lost_when_redis_is_flushed_are_recovered_by_the_reconciler(
    mini, trained, researcher, start_worker, settings
):
    import redis

    sub = submit_dir(researcher, trained["truth"])  # published to Redis, no worker yet
    assert sub.runs.filter(status=Run.Status.QUEUED).count() == sub.runs.count()
    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # the broker forgets every message
    worker = start_worker("after-flush")
    time.sleep(5)
    assert sub.runs.filter(status=Run.Status.QUEUED).count() == sub.runs.count()  # nothing arrives

    settings.RUN_REQUEUE_AFTER_S = 1
    time.sleep(1.5)
    report = evaluation_runs_reconcile()
    assert len(report["republished"]) == sub.runs.count()
    wait_for(lambda: finished(sub.pk), timeout=600, what="the submission to finish", workers=[worker])
    sub.refresh_from_db()
    assert sub.status == "scored", sub.failure_reason
    assert all(r.attempts == 1 for r in sub.runs.all())


def test_two_workers_racing_on_the_same_runs_execute_each_once(mini, trained, researcher, start_worker):
    first, second = start_worker("first"), start_worker("second")
    sub = submit_dir(researcher, trained["truth"])
    for run_id in sub.runs.values_list("pk", flat=True):  # every run delivered twice
        evaluation_run_execute_task.delay(run_id)
    wait_for(lambda: finished(sub.pk), timeout=600, what="the submission to finish", workers=[first, second])
    sub.refresh_from_db()
    assert sub.status == "scored", sub.failure_reason
    runs = list(sub.runs.all())
    assert all(r.attempts == 1 for r in runs), [(r.pk, r.attempts) for r in runs]
    wait_for(
        lambda: sum(w.output().count("'skipped'") for w in (first, second)) == len(runs),
        timeout=60,
        what="the duplicate deliveries to be skipped",
        workers=[first, second],
    )
    assert successes(first, second) == len(runs)
