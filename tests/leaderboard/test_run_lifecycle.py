"""Claiming, heartbeats and the reconciler, on the real database (PostgreSQL in CI)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from leaderboard.models import EvaluationRun
from leaderboard.policy import MAX_ATTEMPTS
from leaderboard.services import runs
from leaderboard.services.lifecycle import evaluation_runs_reconcile
from tests.factories import EvaluationRunFactory, ProbeVersionFactory

Run = EvaluationRun
pytestmark = pytest.mark.django_db


@pytest.fixture
def queued_run(registry):
    return EvaluationRunFactory(status=Run.Status.QUEUED)


def test_a_run_is_claimed_once(queued_run):
    first = runs.evaluation_run_claim(run_id=queued_run.pk, worker="a")
    second = runs.evaluation_run_claim(run_id=queued_run.pk, worker="b")
    assert first is not None and first.worker_host == "a" and first.attempts == 1
    assert second is None
    assert Run.objects.get(pk=queued_run.pk).status == Run.Status.RUNNING


def test_an_attempt_that_lost_its_run_cannot_complete_it(queued_run):
    run = runs.evaluation_run_claim(run_id=queued_run.pk, worker="a")
    # the reconciler gives it to another worker
    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED)
    again = runs.evaluation_run_claim(run_id=run.pk, worker="b")
    assert again.attempts == 2
    assert runs.run_held(run).update(status=Run.Status.SUCCEEDED) == 0  # the old attempt's write
    assert runs.run_held(again).update(status=Run.Status.SUCCEEDED) == 1


def test_a_progress_report_from_a_lost_attempt_stops_it(queued_run):
    run = runs.evaluation_run_claim(run_id=queued_run.pk, worker="a")
    beat = runs.Heartbeat(run)
    beat.progress(0.5, "harvesting")
    assert Run.objects.get(pk=run.pk).progress == 0.5
    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED)
    with pytest.raises(runs.RunLost):
        beat.progress(1.0, "done")


def test_the_reconciler_requeues_a_run_whose_worker_died(queued_run, settings):
    run = runs.evaluation_run_claim(run_id=queued_run.pk, worker="dead")
    Run.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT_S + 5)
    )
    dispatched = []
    report = evaluation_runs_reconcile(dispatch=dispatched.append)
    assert report["requeued_dead"] == [run.pk] and dispatched == [run.pk]
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED


def test_the_reconciler_leaves_a_live_run_alone(queued_run):
    run = runs.evaluation_run_claim(run_id=queued_run.pk, worker="alive")
    dispatched = []
    evaluation_runs_reconcile(dispatch=dispatched.append)
    assert dispatched == []
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING


def test_the_reconciler_republishes_a_queued_run_the_broker_lost(queued_run, settings):
    Run.objects.filter(pk=queued_run.pk).update(
        queued_at=timezone.now() - timedelta(seconds=settings.RUN_REQUEUE_AFTER_S + 5)
    )
    dispatched = []
    report = evaluation_runs_reconcile(dispatch=dispatched.append)
    assert report["republished"] == [queued_run.pk] and dispatched == [queued_run.pk]
    # ... and not again right away
    dispatched.clear()
    evaluation_runs_reconcile(dispatch=dispatched.append)
    assert dispatched == []


def test_a_run_lost_too_often_fails_with_the_reason(queued_run, settings):
    Run.objects.filter(pk=queued_run.pk).update(
        status=Run.Status.RUNNING,
        attempts=MAX_ATTEMPTS,
        heartbeat_at=timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT_S + 5),
    )
    evaluation_runs_reconcile(dispatch=lambda _: None)
    run = Run.objects.get(pk=queued_run.pk)
    assert run.status == Run.Status.FAILED and "no heartbeat" in run.error


# --------------------------------------------------------------------------- a run put back keeps its place


@pytest.fixture
def three_queued(registry):
    """Three queued score runs of one submitter, queued a day ago one second apart (oldest first)."""
    from leaderboard.policy import PRIMARY_QUEUE

    version = ProbeVersionFactory()
    t0 = timezone.now() - timedelta(days=1)
    found = [
        EvaluationRunFactory(
            probe_version=version,
            kind=Run.Kind.SCORE,
            status=Run.Status.QUEUED,
            queued_at=t0 + timedelta(seconds=i),
        )
        for i in range(3)
    ]
    return found, (lambda: runs.evaluation_run_next(queue=PRIMARY_QUEUE))


def test_a_run_released_by_a_stopped_worker_keeps_its_place_in_the_queue(three_queued, settings):
    from leaderboard.services.lifecycle import evaluation_runs_release

    (first, second, _), next_run = three_queued
    assert next_run() == first.pk
    runs.evaluation_run_claim(run_id=first.pk, worker="demo-1@h")
    assert next_run() == second.pk  # while it runs, the next one waits its turn
    queued_at = Run.objects.get(pk=first.pk).queued_at
    assert evaluation_runs_release(worker_host="demo-1@h", dispatch=lambda _: None) == [first.pk]
    released = Run.objects.get(pk=first.pk)
    assert released.status == Run.Status.QUEUED and released.queued_at == queued_at
    assert next_run() == first.pk  # taken again first, not after the runs queued after it
    # the reconciler's next pass (it was queued long ago) neither moves it nor publishes it again
    dispatched: list[int] = []
    report = evaluation_runs_reconcile(dispatch=dispatched.append)
    assert first.pk not in report["republished"] and first.pk not in dispatched
    assert Run.objects.get(pk=first.pk).queued_at == queued_at
    assert next_run() == first.pk


def test_a_run_requeued_after_its_worker_died_keeps_its_place_in_the_queue(three_queued, settings):
    (first, second, third), next_run = three_queued
    runs.evaluation_run_claim(run_id=first.pk, worker="dead")
    Run.objects.filter(pk=first.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT_S + 5)
    )
    dispatched: list[int] = []
    report = evaluation_runs_reconcile(dispatch=dispatched.append)
    assert report["requeued_dead"] == [first.pk]
    # the other two, queued a day ago and never published since, are published again once
    assert sorted(report["republished"]) == sorted([second.pk, third.pk])
    assert sorted(dispatched) == sorted([first.pk, second.pk, third.pk])
    assert next_run() == first.pk
    # re-publishing moves none of them: the order is still the order they were queued in
    dispatched.clear()
    assert evaluation_runs_reconcile(dispatch=dispatched.append)["republished"] == []
    assert dispatched == []
    order = list(
        Run.objects.filter(status=Run.Status.QUEUED).order_by("queued_at", "pk").values_list("pk", flat=True)
    )
    assert order == [first.pk, second.pk, third.pk]
