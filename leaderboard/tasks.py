"""Celery tasks: thin, idempotent wrappers that take an id and call a service.

Evaluation runs go to the ``primary`` or ``secondary`` queue by kind, with ``acks_late`` (a
worker that dies mid-run leaves the message to be redelivered; the conditional claim in the service makes a redelivery of a run
that is already running or finished a no-op). A run message is a token of its queue: the service
executes the next run of that queue, round-robin across submitters, which need not be the run the
message names (``services.runs.evaluation_run_claim_next``). Retries with backoff live here (for
the run that faulted), state rules in the service. The services are imported inside the task
bodies (the services publish tasks by name, see ``leaderboard.services.runs``); what a decorator needs comes from ``leaderboard.errors`` and
``leaderboard.policy``. Task names (``leaderboard.tasks.<function>``) are what
probebench/celery.py routes and schedules.
"""

import logging
import sys

from celery import shared_task
from celery.exceptions import WorkerShutdown
from celery.signals import worker_init, worker_process_init
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings

from leaderboard.errors import InfrastructureFault
from leaderboard.policy import MAX_ATTEMPTS, RUN_RETRY_BACKOFF_MAX_S, RUN_RETRY_BACKOFF_S


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=MAX_ATTEMPTS,
    # the run's time budget: past the soft limit the service fails the run with that reason (no
    # retry); the hard limit stops a worker process stuck in native code (prefork pool)
    soft_time_limit=settings.RUN_SOFT_LIMIT_S,
    time_limit=settings.RUN_HARD_LIMIT_S,
)
def evaluation_run_execute_task(self, run_id: int) -> str:
    from leaderboard.services.lifecycle import evaluation_run_process

    try:
        return evaluation_run_process(
            run_id=run_id, worker=self.request.hostname, fair=True, retry=self.request.retries > 0
        )
    except InfrastructureFault as exc:
        # the retry is for the run that faulted (the message may have executed another run than
        # the one it names), after an exponential backoff with full jitter
        countdown = get_exponential_backoff_interval(
            factor=RUN_RETRY_BACKOFF_S,
            retries=self.request.retries,
            maximum=RUN_RETRY_BACKOFF_MAX_S,
            full_jitter=True,
        )
        raise self.retry(args=[exc.run_id or run_id], exc=exc, countdown=countdown) from exc


@shared_task(acks_late=True)
def evaluation_runs_reconcile_task() -> dict:
    from leaderboard.services.lifecycle import evaluation_runs_reconcile

    return evaluation_runs_reconcile()


@shared_task(acks_late=True)
def reference_update_advance_task(update_id: int) -> str:
    """Recompute the dependents of an eval-awareness reference update (no model: bookkeeping,
    on the default queue)."""
    from leaderboard.services.reference_updates import reference_update_advance

    return reference_update_advance(update_id=update_id).status


@shared_task(acks_late=True)
def rank_intervals_refresh_task(category_id: str, force: bool = False) -> dict:
    """Recompute the rank intervals of a category's boards after its scores changed, or (``force``)
    after a quarterly cycle completed (no model: the default queue; a duplicate message finds the
    boards current and does nothing)."""
    from leaderboard.services.rank_intervals import rank_intervals_refresh

    return rank_intervals_refresh(category_id=category_id, force=force)


@shared_task(acks_late=True)
def examples_export_task(quarter: str) -> dict:
    """Write a quarter's per-example bulk export once its cycle completed (no model: the default
    queue; a duplicate message rewrites the same file)."""
    from leaderboard.services.exports import examples_export_write

    return examples_export_write(quarter)


@shared_task(acks_late=True)
def bundle_publish_task(quarter: str) -> str:
    """Publish the board's signed result bundle once a quarterly cycle completed (no model: the
    default queue; a duplicate message writes a second bundle of the same entries). A bundle that
    cannot be written is logged, not retried: ``manage.py export_bundle`` writes it once fixed."""
    from evaluator.errors import EvaluatorError
    from leaderboard.errors import ServiceError
    from leaderboard.services.bundles import bundle_export

    try:
        return bundle_export(quarter=quarter).id
    except (EvaluatorError, ServiceError) as exc:
        logging.getLogger(__name__).error("the %s bundle was not published: %s", quarter, exc)
        return ""


@shared_task(acks_late=True)
def reliability_measure_task(quarter: str) -> dict:
    """Measure the metric reliability table once a quarterly cycle completed (a model forward and
    refits of one reference probe; a duplicate message rewrites the same file)."""
    from leaderboard.services.reliability import reliability_measure

    return reliability_measure(quarter)


@worker_process_init.connect
def model_libraries_import_at_start(**kwargs) -> None:
    """Each worker process imports torch, transformers and the rest before its first run: a run
    cut off by its soft time limit in the middle of a first ``import torch`` left a half-imported
    torch that failed every later run of the process (``leaderboard.runner.model_libraries_import``)."""
    from leaderboard.runner import model_libraries_import

    model_libraries_import()


#: the pools whose tasks run in the worker's own process (a prefork pool forks processes for them)
POOLS_IN_PROCESS = ("celery.concurrency.solo", "celery.concurrency.thread")


def pool_runs_in_process(worker) -> bool:
    """Whether ``worker``'s runs execute in its own process (solo, threads) or in forked ones."""
    from celery.concurrency import get_implementation

    pool = get_implementation(getattr(worker, "pool_cls", None) or "prefork")
    return getattr(pool, "__module__", "") in POOLS_IN_PROCESS


@worker_init.connect
def canary_at_worker_start(sender=None, **kwargs) -> None:
    """Score the canary of each base model the worker serves before it takes any run
    (``leaderboard.runner.canary_refusal``); on a mismatch, a stale canary or a canary that cannot
    run, log the reason and stop with exit status 1. ``worker_init`` is sent while the worker is
    built, before its pool starts and before it connects to the broker, so a refused worker never
    receives a message. Celery's signal dispatch logs and swallows an ``Exception`` from a handler;
    ``WorkerShutdown`` is a ``SystemExit``, which it lets through. Off with PROBEBENCH_CANARY=False
    (settings.CANARY; the test suite's workers)."""
    if not settings.CANARY:
        return
    from leaderboard.runner import canary_refusal

    reason = canary_refusal(in_process=pool_runs_in_process(sender))
    if reason:
        print(f"canary: refusing to start this worker: {reason}", file=sys.stderr, flush=True)
        raise WorkerShutdown(1)
