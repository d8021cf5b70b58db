"""What happens when a run finishes, and the reconciler: the only services module that fans out
(to submissions, coverage, re-evaluation cycles and reference updates). The top of the services
order: nothing imports it but the Celery tasks, the admin and the management commands.

    evaluation_run_process     execute one run (services.runs; the run task: the next fair run of
                               its queue), then fan out
    evaluation_run_fan_out     a run finished: advance its submission(s), its cycle, the backfill
                               it completes, the reference update it belongs to
    evaluation_runs_reconcile  re-queue runs whose worker died or whose message was lost, and
                               complete what a lost message left waiting
    evaluation_runs_release    re-queue at once the runs a worker known to be gone still holds
                               (``manage.py demo`` after it stopped its own worker, or at start-up)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from leaderboard.models import EvaluationRun, ReferenceUpdate, Submission
from leaderboard.policy import MAX_ATTEMPTS
from leaderboard.services.coverage import coverage_advance_for_run, coverage_reconcile
from leaderboard.services.rank_intervals import rank_intervals_reconcile
from leaderboard.services.reevaluation import cycle_advance, cycles_reconcile
from leaderboard.services.reference_updates import reference_updates_reconcile
from leaderboard.services.runs import (
    REFERENCE_UPDATE_ADVANCE_TASK,
    evaluation_run_execute,
    evaluation_run_publish,
    run_held,
    tasks_delay_on_commit,
)
from leaderboard.services.submissions import BUNDLE_VIA, submission_advance, submissions_secondary_reconcile

log = logging.getLogger(__name__)
Run = EvaluationRun


def evaluation_run_process(
    *, run_id: int, worker: str | None = None, fair: bool = False, retry: bool = False
) -> str:
    """Execute one run end to end (:func:`services.runs.evaluation_run_execute`) and fan out once it
    has finished. Returns what happened: skipped | succeeded | failed | lost. ``fair`` (the run
    task): the next run of ``run_id``'s queue, round-robin across submitters, instead of
    ``run_id`` itself (``retry``: ``run_id`` first, a retry after an infrastructure fault)."""
    return evaluation_run_execute(
        run_id=run_id, worker=worker, on_finished=evaluation_run_fan_out, fair=fair, retry=retry
    )


def evaluation_run_fan_out(run: EvaluationRun) -> None:
    """After a run finishes: advance its submission, or every submission waiting on a shared
    reference run; advance its cycle, or rescore what its backfill completes; start recomputing
    the dependents of a new reference."""
    if run.submission_id:
        submission_advance(submission=Submission.objects.get(pk=run.submission_id))
    if run.kind == Run.Kind.REFERENCE:
        waiting = Submission.objects.filter(
            status__in=[Submission.Status.QUEUED, Submission.Status.RUNNING],
            probe_version__probe__base_model=run.base_model,
        )
        for sub in waiting:
            submission_advance(submission=sub)
        # an imported reference replicating its published reference runs: its own state moves too
        imported = Submission.objects.filter(probe_version_id=run.probe_version_id, via=BUNDLE_VIA).first()
        if imported is not None:
            submission_advance(submission=imported)
    if run.cycle_id:
        cycle_advance(cycle_id=run.cycle_id)
    else:
        try:
            coverage_advance_for_run(run)
        except Exception:  # the run itself is done; the reconciler retries the rescore
            log.exception("rescoring after run %s failed", run.pk)
    if run.kind == Run.Kind.REFERENCE:
        # recomputing the dependents needs no model: bookkeeping, on the default queue
        ids = list(
            ReferenceUpdate.objects.filter(
                new_version_id=run.probe_version_id, status=ReferenceUpdate.Status.RUNNING
            ).values_list("pk", flat=True)
        )
        tasks_delay_on_commit(REFERENCE_UPDATE_ADVANCE_TASK, ids)


def evaluation_runs_reconcile(*, now=None, dispatch: Callable[[int], None] | None = None) -> dict:
    """Recover from dead workers and lost messages. Safe to run any time, from beat or by hand.

    - running runs with no heartbeat for RUN_HEARTBEAT_TIMEOUT_S → back to queued, re-published;
    - queued runs not started for RUN_REQUEUE_AFTER_S (e.g. the broker lost them) → re-published.
    The conditional claim makes a duplicate message a no-op, so re-publishing never runs twice.

    A run put back keeps its ``queued_at``: its place in the queue (``evaluation_run_next`` takes
    the oldest first) is where it was first queued, not where it was put back. What the reconciler
    reads to know when a queued run was last published is its ``heartbeat_at`` (set when it is put
    back or re-published; a worker sets it again when it claims the run).
    """
    dispatch = dispatch or evaluation_run_publish
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT_S)
    requeue_before = now - timedelta(seconds=settings.RUN_REQUEUE_AFTER_S)
    report: dict[str, Any] = {"requeued_dead": [], "republished": [], "advanced": 0}
    for run in Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=stale_before):
        if run.attempts >= MAX_ATTEMPTS:
            if run_held(run).update(
                status=Run.Status.FAILED,
                error_kind="infrastructure",
                finished_at=now,
                error=f"worker lost {run.attempts} times (no heartbeat)",
            ):
                evaluation_run_fan_out(run)
            continue
        if (
            run_held(run)
            .filter(heartbeat_at__lt=stale_before)
            .update(status=Run.Status.QUEUED, heartbeat_at=now, step="re-queued: worker lost", worker_host="")
        ):
            report["requeued_dead"].append(run.pk)
    # queued for a while and not published since (heartbeat_at: when it was last published)
    unpublished = Q(queued_at__lt=requeue_before) & (
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=requeue_before)
    )
    for run_id in Run.objects.filter(unpublished, status=Run.Status.QUEUED).values_list("pk", flat=True):
        if Run.objects.filter(unpublished, pk=run_id, status=Run.Status.QUEUED).update(heartbeat_at=now):
            report["republished"].append(run_id)
    for run_id in report["requeued_dead"] + report["republished"]:
        dispatch(run_id)
    for sub in Submission.objects.filter(status__in=[Submission.Status.QUEUED, Submission.Status.RUNNING]):
        report["advanced"] += bool(submission_advance(submission=sub))
    report["cycles_completed"] = cycles_reconcile()
    report["reference_updates_completed"] = reference_updates_reconcile()
    report["rescored"] = coverage_reconcile()
    report["secondary_rescored"] = submissions_secondary_reconcile()
    report["rank_boards_recomputed"] = rank_intervals_reconcile()
    return report


def evaluation_runs_release(*, worker_host: str, dispatch: Callable[[int], None] | None = None) -> list[int]:
    """Put back in the queue, and re-publish, the runs still marked running by ``worker_host``, a
    worker the caller knows is gone (it stopped it, or holds the lock that worker ran under), so
    they need not wait RUN_HEARTBEAT_TIMEOUT_S for the reconciler. A run keeps its place in the
    queue (its ``queued_at``: a run interrupted just before it finished is taken again before the
    runs queued after it). The attempt counter is kept: a late write of the old attempt can never
    match the next one. Returns the re-queued run ids."""
    if not worker_host:
        return []
    dispatch = dispatch or evaluation_run_publish
    now = timezone.now()
    released = []
    for run in Run.objects.filter(status=Run.Status.RUNNING, worker_host=worker_host):
        if run_held(run).update(
            status=Run.Status.QUEUED,
            heartbeat_at=now,  # published now (the reconciler need not publish it again)
            progress=0.0,
            step="re-queued: its worker was stopped",
            worker_host="",
        ):
            released.append(run.pk)
    for run_id in released:
        dispatch(run_id)
    if released:
        log.info("re-queued %d run(s) held by the stopped worker %s", len(released), worker_host)
    return released
