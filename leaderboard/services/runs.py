"""Evaluation runs: plan them, publish them once committed, claim one, heartbeat while it
executes, store its per-example scores. The bottom of the services order: imports no other
service. What happens once a run has finished is given as ``on_finished``
(``leaderboard.services.lifecycle`` passes its fan-out).

    evaluation_runs_plan       every run a submission waits on: each enabled axis's plan
                               (leaderboard.axes); score_runs_plan for the score and reference
                               runs alone
    evaluation_runs_dispatch_on_commit  publish them to the broker after the transaction commits,
                               each to its axis's queue (primary or secondary)
    evaluation_run_next        the run a worker takes next from a queue: the maintainers' own
                               work first, then round-robin across submitters
    evaluation_run_claim       a conditional UPDATE: one winner per queued run
    evaluation_run_claim_next  claim the next run of a message's queue (a message is a token:
                               the database decides which run it executes)
    evaluation_run_execute     claim, run the run's axis (leaderboard.axes.run_execute) under a Heartbeat,
                               store the result while this attempt still holds the run
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Collection
from datetime import datetime, timedelta

from celery import current_app
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Max, Min
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerOperationalError

from evaluator import CODE_VERSION
from evaluator.errors import EvaluatorError, InfrastructureError, RegistryError
from leaderboard import axes
from leaderboard.axes import AXES, axes_enabled, axis, run_queue, score
from leaderboard.axes.base import Planned
from leaderboard.errors import InfrastructureFault
from leaderboard.models import EvaluationRun, ProbeVersion, Submission, Task
from leaderboard.policy import MAX_ATTEMPTS, PRIMARY_QUEUE, RUN_RETRY_BACKOFF_MAX_S
from leaderboard.selectors.shared import (
    MAINTAINERS_WORK,
    REPLICATING,
    RUN_OWNER,
    attack_source_version,
    owner_turn,
    scored_versions,
    tasks_applicable,
)
from leaderboard.selectors.shared import enabled_models as enabled_models  # the demo's and the bench's name

log = logging.getLogger(__name__)

Run = EvaluationRun
TERMINAL = (Run.Status.SUCCEEDED, Run.Status.FAILED)
#: Celery task names (leaderboard/tasks.py). Services publish by name: the tasks import the
#: services inside their bodies, never the other way round.
EXECUTE_TASK = "leaderboard.tasks.evaluation_run_execute_task"
REFERENCE_UPDATE_ADVANCE_TASK = "leaderboard.tasks.reference_update_advance_task"
RANK_INTERVALS_REFRESH_TASK = "leaderboard.tasks.rank_intervals_refresh_task"
EXAMPLES_EXPORT_TASK = "leaderboard.tasks.examples_export_task"
BUNDLE_PUBLISH_TASK = "leaderboard.tasks.bundle_publish_task"
RELIABILITY_MEASURE_TASK = "leaderboard.tasks.reliability_measure_task"
OnFinished = Callable[[EvaluationRun], None]


def task_delay(name: str, *args) -> None:
    """Publish a Celery task by its registered name (eager in tests, like ``.delay``)."""
    current_app.tasks[name].delay(*args)


def tasks_delay_on_commit(name: str, ids: list[int]) -> None:
    """Publish the task once per id when the current transaction commits."""
    transaction.on_commit(lambda: [current_app.tasks[name].delay(i) for i in ids])


# --------------------------------------------------------------------------- planning runs


def evaluation_runs_plan(
    *, version: ProbeVersion, submission: Submission, kinds: Collection[str] | None = None
) -> list[EvaluationRun]:
    """Create every run a submission waits on; return the ones that need dispatching: the plan of
    each enabled axis (``leaderboard.axes.axes_enabled``: ``PROBEBENCH_AXES``) on the active tasks
    of its category that it can read (``selectors.shared.tasks_applicable``), in the order of AXES:
    score and reference runs, the recipe's transfer re-fits and reproduction, steer, stress and
    robustness runs where each applies (each axis's module says where). ``kinds``: only the axes
    of those run kinds (the replication of an imported entry plans its primary runs first)."""
    # only the tasks it can read (its input's template, its model's files for an on-policy task):
    # the others are shown as not applicable on its page, never planned
    tasks, _ = tasks_applicable(version=version)
    planned = [
        run
        for a in axes_enabled()
        if a.plan is not None and (kinds is None or a.name in kinds)
        for run in a.plan(version, tasks)
    ]
    return runs_get_or_create(planned, submission=submission)


def transfer_attacks_refresh(*, dispatch: bool = True) -> list[EvaluationRun]:
    """Queue again every finished robustness run of an active entry whose transfer attack was made
    against another source than its category's reference probe today (a new reference version, a
    reference added since): a quarterly cycle calls it. The rerun keeps the direct attack (the same
    artifact, task and protocol give the same suffix, kept in the cache) and measures the transfer
    with the current source's suffix; the Score keeps the old numbers until it has."""
    versions = {v.pk: v for v in scored_versions()}
    stale = []
    runs = Run.objects.filter(
        kind=Run.Kind.ROBUSTNESS, cycle=None, status=Run.Status.SUCCEEDED, probe_version_id__in=list(versions)
    ).select_related("probe_version__probe")
    for run in runs:
        version = versions[run.probe_version_id]
        source = attack_source_version(
            category_id=version.probe.category_id,
            base_model_id=version.probe.base_model_id,
            task_id=run.task_id,
        )
        stored = (run.metrics or {}).get("transfer") or None
        now = None if source is None else (source.probe.slug, source.number)
        before = None if stored is None else (stored.get("source"), stored.get("source_version"))
        if now != before:
            stale.append(run.pk)
    Run.objects.filter(pk__in=stale, status=Run.Status.SUCCEEDED).update(
        status=Run.Status.QUEUED,
        progress=0.0,
        step="",
        attempts=0,
        queued_at=timezone.now(),
        finished_at=None,
    )
    requeued = list(Run.objects.filter(pk__in=stale, status=Run.Status.QUEUED))
    if dispatch:
        evaluation_runs_dispatch_on_commit(requeued)
    return requeued


def score_runs_plan(
    *, version: ProbeVersion, tasks: list[Task], submission: Submission | None
) -> list[EvaluationRun]:
    """Create the runs that measure ``version`` on ``tasks`` (the score axis's) and the base model's
    eval-awareness reference runs on them (the reference axis's: shared, never tied to a
    submission); return the ones that need dispatching."""
    planned = [*score.plan(version, tasks), *score.reference_plan(version, tasks)]
    return runs_get_or_create(planned, submission=submission)


def runs_get_or_create(planned: list[Planned], *, submission: Submission | None) -> list[EvaluationRun]:
    """(version, kind, task, split, base model) → the run outside any cycle, created if missing;
    returns those to dispatch (created, or still queued). A run is tied to ``submission`` when it
    measures the submitted version (a shared reference run never is). A kind no axis declares is
    refused (``leaderboard.axes.UnknownAxisError``): the field takes any declared kind."""
    new = []
    for version, kind, task, split, base_model_id in planned:
        axis(kind)
        own = submission is not None and version.pk == submission.probe_version_id
        run, created = EvaluationRun.objects.get_or_create(
            probe_version=version,
            kind=kind,
            task=task,
            split=split,
            base_model_id=base_model_id,
            cycle=None,
            defaults={"submission": submission if own else None, "code_version": CODE_VERSION},
        )
        if created or run.status == Run.Status.QUEUED:
            new.append(run)
    return new


def _publish(run_id: int, kind: str) -> None:
    """Publish one run to its axis's queue (``leaderboard.axes.run_queue``): the runs the board
    ranks on to ``primary``, the secondary axes to ``secondary``."""
    current_app.tasks[EXECUTE_TASK].apply_async(args=[run_id], queue=run_queue(kind))


def evaluation_run_publish(run_id: int) -> None:
    """Publish a run again (the reconciler: a dead worker, a lost message), to its kind's queue."""
    kind = Run.objects.filter(pk=run_id).values_list("kind", flat=True).first()
    if kind is not None:
        _publish(run_id, kind)


def evaluation_runs_dispatch_on_commit(runs: list[EvaluationRun]) -> None:
    """Publish the runs to the broker once the transaction that created them commits, so a worker
    never sees an uncommitted row; primary runs first, each to its kind's queue. A broker that
    cannot be reached loses nothing: the runs stay queued and the reconciler publishes them again
    after ``RUN_REQUEUE_AFTER_S``."""
    ordered = sorted(
        ((r.pk, r.kind) for r in runs), key=lambda pk_kind: run_queue(pk_kind[1]) != PRIMARY_QUEUE
    )

    def publish() -> None:
        try:
            for pk, kind in ordered:
                _publish(pk, kind)
        except BrokerOperationalError as exc:
            log.warning(
                "broker unreachable (%s): %d run(s) stay queued for the reconciler to publish",
                exc,
                len(ordered),
            )

    transaction.on_commit(publish)


# --------------------------------------------------------------------------- executing runs


class RunLost(Exception):
    """The run was taken back (reconciled) while this worker held it: stop, write nothing."""


#: the submitter of a run: the owner of the probe it measures (the maintainers' work and the
#: round-robin's key live in selectors.shared: the queue estimate follows the same order)
OWNER = RUN_OWNER


def queue_kinds(queue: str) -> list[str]:
    """The run kinds published to ``queue`` (each axis's queue)."""
    return [a.name for a in AXES if a.queue == queue]


def evaluation_run_next(*, queue: str, now: datetime | None = None) -> int | None:
    """The queued run of ``queue`` that a worker should take next (its id), or None.

    - the maintainers' own work first (``MAINTAINERS_WORK``), oldest first, as before fair shares;
    - then round-robin across submitters: the submitter whose latest run on this queue started
      longest ago (one never served first; a tie goes to the oldest queued run), and that
      submitter's oldest queued run. So a second account's first run starts after at most one
      run of each other account that is waiting, however deep their queues.

    A run put back after an infrastructure fault is left to its own retry message for the
    backoff (up to ``RUN_RETRY_BACKOFF_MAX_S``); after that any message may take it.
    """
    now = now or timezone.now()
    kinds = queue_kinds(queue)
    queued = Run.objects.filter(status=Run.Status.QUEUED, kind__in=kinds).exclude(
        error_kind="infrastructure", queued_at__gt=now - timedelta(seconds=RUN_RETRY_BACKOFF_MAX_S)
    )
    # the replication of imported entries waits for every other run (REPLICATING)
    if queued.exclude(REPLICATING).exists():
        queued = queued.exclude(REPLICATING)
    oldest_first = queued.order_by("queued_at", "pk").values_list("pk", flat=True)
    maintainers = oldest_first.filter(MAINTAINERS_WORK).first()
    if maintainers is not None:
        return maintainers
    # submitter → their oldest queued run's time
    waiting = dict(queued.order_by().values_list(OWNER).annotate(first=Min("queued_at")))
    if not waiting:
        return None
    # submitter → their latest run start on this queue
    served = dict(
        Run.objects.filter(kind__in=kinds, started_at__isnull=False, **{f"{OWNER}__in": list(waiting)})
        .exclude(MAINTAINERS_WORK)
        .order_by()
        .values_list(OWNER)
        .annotate(last=Max("started_at"))
    )
    owner = min(waiting, key=lambda o: owner_turn(o, waiting=waiting, served=served))
    return oldest_first.filter(**{OWNER: owner}).first()


def evaluation_run_claim(*, run_id: int, worker: str) -> EvaluationRun | None:
    """Claim a queued run with a conditional UPDATE; None if another worker got there first."""
    now = timezone.now()
    claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING,
        started_at=now,
        heartbeat_at=now,
        attempts=F("attempts") + 1,
        worker_host=worker,
        progress=0.0,
        step="claimed",
        error="",
        error_kind="",
    )
    if not claimed:
        return None
    run = Run.objects.select_related("probe_version__probe", "task", "base_model", "submission").get(
        pk=run_id
    )
    if run.submission_id:
        Submission.objects.filter(pk=run.submission_id, status=Submission.Status.QUEUED).update(
            status=Submission.Status.RUNNING, updated_at=now
        )
    return run


def evaluation_run_claim_next(*, run_id: int, worker: str, retry: bool = False) -> EvaluationRun | None:
    """Claim the run a message for ``run_id`` executes: the next run of ``run_id``'s queue
    (:func:`evaluation_run_next`), not necessarily ``run_id``. Every queued run was published once
    to its queue (and again by the reconciler or a retry), so each queue holds at least as many
    messages as queued runs: a message is a token for one run of its queue. A ``retry`` message (a
    retry after an infrastructure fault) claims its own run first, when that run is still queued.
    None when nothing is queued there (a duplicate message)."""
    kind = Run.objects.filter(pk=run_id).values_list("kind", flat=True).first()
    if kind is None:
        return None
    if retry:
        own = evaluation_run_claim(run_id=run_id, worker=worker)
        if own is not None:
            return own
    # a lost race (another worker claimed the run first) tries the next one
    while (next_id := evaluation_run_next(queue=run_queue(kind))) is not None:
        run = evaluation_run_claim(run_id=next_id, worker=worker)
        if run is not None:
            return run
    return None


def run_held(run: EvaluationRun):
    """The queryset that matches this run only while this attempt still holds it."""
    return Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING, attempts=run.attempts)


class Heartbeat:
    """Beats every ``interval`` seconds in a thread while a run executes, and forwards progress.

    If a beat finds the run no longer held by this attempt, ``lost`` is set and the next progress
    call raises RunLost, so the worker stops without writing results.
    """

    def __init__(self, run: EvaluationRun, interval: float = 15.0):
        self.run, self.interval = run, interval
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{run.pk}", daemon=True)
        self._last_progress = 0.0

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self):
        try:
            while not self._stop.wait(self.interval):
                if not run_held(self.run).update(heartbeat_at=timezone.now()):
                    self.lost.set()
                    return
        finally:
            close_old_connections()
            connection.close()

    def progress(self, fraction: float, step: str) -> None:
        if self.lost.is_set():
            raise RunLost(f"run {self.run.pk} was re-queued while running")
        now = timezone.now().timestamp()
        if now - self._last_progress < 1.0 and fraction < 1.0:
            return
        self._last_progress = now
        if not run_held(self.run).update(
            progress=max(0.0, min(1.0, fraction)), step=step[:200], heartbeat_at=timezone.now()
        ):
            self.lost.set()
            raise RunLost(f"run {self.run.pk} was re-queued while running")


def evaluation_run_execute(
    *,
    run_id: int,
    worker: str | None = None,
    on_finished: OnFinished,
    fair: bool = False,
    retry: bool = False,
) -> str:
    """Execute one run end to end. Returns what happened: skipped | succeeded | failed | lost.
    ``on_finished(run)`` is called once the run has finished (succeeded or failed) under this
    attempt (``leaderboard.services.lifecycle.evaluation_run_fan_out``).

    ``fair`` (the run task): execute the next run of ``run_id``'s queue instead
    (:func:`evaluation_run_claim_next`; ``retry``: a retry of ``run_id``); else ``run_id`` or nothing.

    Artifact faults fail the run (and its submission) with the reason, no retry. Infrastructure
    faults put the run back in the queue and re-raise so the Celery task retries with backoff;
    after MAX_ATTEMPTS the run fails. A run past its time budget (the task's soft time limit,
    ``RUN_SOFT_LIMIT_S``) fails with that reason, no retry: running it again would take as long.
    """
    worker = worker or socket.gethostname()
    if fair:
        run = evaluation_run_claim_next(run_id=run_id, worker=worker, retry=retry)
    else:
        run = evaluation_run_claim(run_id=run_id, worker=worker)
    if run is None:
        return "skipped"
    try:
        with Heartbeat(run) as beat:
            outcome = axes.run_execute(run=run, progress=beat.progress)
    except RunLost:
        log.warning("run %s lost while running; another attempt owns it", run.pk)
        return "lost"
    except InfrastructureError as exc:  # a missing model package, a full disk...: retry later
        return _run_infrastructure_fault(run, exc, on_finished)
    except RegistryError as exc:  # a split file that no longer matches its hash: never retried
        return _run_fail(run, f"registry: {exc}", kind="infrastructure", on_finished=on_finished)
    except EvaluatorError as exc:  # the artifact's fault (shape, NaN, a recipe that cannot fit)
        return _run_fail(run, str(exc), kind="artifact", on_finished=on_finished)
    except SoftTimeLimitExceeded:  # the time budget is spent: never retried
        message = (
            f"the run exceeded its time budget of {settings.RUN_SOFT_LIMIT_S} s"
            " (PROBEBENCH_RUN_SOFT_LIMIT_S) and was stopped; it is not retried"
        )
        return _run_fail(run, message, kind="timeout", on_finished=on_finished)
    except Exception as exc:  # an unexpected fault of the machine, not of the artifact
        return _run_infrastructure_fault(run, exc, on_finished)
    done = run_held(run).update(
        status=Run.Status.SUCCEEDED,
        progress=1.0,
        step="done",
        finished_at=timezone.now(),
        example_scores=outcome.example_scores,
        metrics=outcome.metrics,
        timings=outcome.timings,
        cache_key=outcome.cache_key,
        split_sha256=outcome.split_sha256,
        code_version=CODE_VERSION,
        protocol=outcome.protocol,
        environment=outcome.environment,
    )
    if not done:
        return "lost"
    on_finished(run)
    return "succeeded"


def _run_fail(run: EvaluationRun, message: str, *, kind: str, on_finished: OnFinished) -> str:
    if run_held(run).update(
        status=Run.Status.FAILED, error=message[:2000], error_kind=kind, finished_at=timezone.now()
    ):
        # the worker's log names the failure (Celery's own line only says the task returned 'failed')
        log.warning(
            "run %s failed (%s of %s on %s/%s, %s, %s fault): %s",
            run.pk,
            run.kind,
            run.probe_version.probe.slug,
            run.task_id,
            run.split,
            run.base_model_id,
            kind,
            message,
        )
        on_finished(run)
    return "failed"


def _run_infrastructure_fault(run: EvaluationRun, exc: Exception, on_finished: OnFinished) -> str:
    message = f"{type(exc).__name__}: {exc}"[:2000]
    log.exception("run %s attempt %s: infrastructure fault", run.pk, run.attempts)
    if run.attempts >= MAX_ATTEMPTS:
        return _run_fail(
            run,
            f"infrastructure fault after {run.attempts} attempts: {message}",
            kind="infrastructure",
            on_finished=on_finished,
        )
    run_held(run).update(
        status=Run.Status.QUEUED, error=message, error_kind="infrastructure", queued_at=timezone.now()
    )
    raise InfrastructureFault(message, run_id=run.pk) from exc
