"""Reads for the submission pages, the submission API and the public queue: its open submissions,
a submission's queue position and ETA (``submission_queue_estimate``, counting the queued runs in
the order the workers take them), each submitter's share of the workers' queue
(``queue_shares``), an account's queued work in estimated run-seconds (``queued_work``, what the
queue cap counts)."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Max, Prefetch, QuerySet
from django.utils import timezone

from leaderboard.axes import KINDS, PRIMARY_KINDS, run_queue
from leaderboard.models import EvaluationRun, Submission, SystemAccount
from leaderboard.policy import (
    REVIEW_GOAL_DAYS,
    RUN_SECONDS_DEFAULT,
    RUN_SECONDS_DEFAULT_OTHER,
    WORKER_QUEUES,
)
from leaderboard.selectors.progress import run_seconds_measured
from leaderboard.selectors.shared import MAINTAINERS_WORK, REPLICATING, RUN_OWNER, owner_turn, submission_runs

OPEN_STATUSES = (
    Submission.Status.SUBMITTED,
    Submission.Status.VALIDATED,
    Submission.Status.QUEUED,
    Submission.Status.RUNNING,
)


REVIEW_GOAL = timedelta(days=REVIEW_GOAL_DAYS)
#: the ETA's measured run time of a kind is the mean of its latest finished runs
ACTIVE_RUN_STATUSES = (EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING)


@dataclass
class QueueEntry:
    id: int
    probe_name: str
    category: str
    base_model: str
    version: int
    status: str
    progress: float
    created_at: datetime
    age: timedelta

    @property
    def age_days(self) -> float:
        return self.age.total_seconds() / 86400

    @property
    def overdue(self) -> bool:
        return self.age > REVIEW_GOAL

    @property
    def goal_fraction(self) -> float:
        return min(self.age / REVIEW_GOAL, 1.0)


def submission_queue(*, now: datetime | None = None) -> list[QueueEntry]:
    """Open submissions, oldest first, with public fields only (no submitter, no failure reason)."""
    now = now or timezone.now()
    rows = (
        Submission.objects.filter(status__in=OPEN_STATUSES)
        .order_by("created_at", "pk")
        .values(
            "pk",
            "status",
            "progress",
            "created_at",
            "probe_version__number",
            "probe_version__probe__name",
            "probe_version__probe__category__name",
            "probe_version__probe__base_model_id",
        )
    )
    return [
        QueueEntry(
            id=r["pk"],
            probe_name=r["probe_version__probe__name"],
            category=r["probe_version__probe__category__name"],
            base_model=r["probe_version__probe__base_model_id"],
            version=r["probe_version__number"],
            status=r["status"],
            progress=r["progress"],
            created_at=r["created_at"],
            age=now - r["created_at"],
        )
        for r in rows
    ]


@dataclass
class QueueEstimate:
    """Where a submission stands in the workers' queue, and when it should be scored.

    The runs are counted in the order a worker takes them (:func:`queued_in_worker_order`): every
    queued primary run before any secondary run, and within a queue the maintainers' work first,
    then round-robin across submitters. While some run the submission is scored on (a primary run:
    its score runs, the shared reference runs it waits on) is open, only those runs are its own
    here: its secondary runs start after every queued primary run, once it is already on the board.

    ``queue_position``: 1 when this submission's next queued run is the next run a worker takes
    (``runs_ahead`` are taken before it); None when none of its runs waits (they are running).
    ``eta_seconds``: the measured mean duration of each kind of run (its latest
    ``ETA_SAMPLE_RUNS`` finished runs) × the runs taken before its last run and its own, plus what
    is left of the runs executing now, divided by those (the busy workers, at least one); None
    when one of those kinds has never finished a run, or the submission is final.
    """

    queue_position: int | None = None
    runs_ahead: int | None = None
    eta_seconds: float | None = None
    #: kind → {"mean_s", "runs"}: the measured run times the ETA is made of
    run_seconds: dict[str, dict[str, float]] = field(default_factory=dict)


def _round_robin(queued: QuerySet, *, kinds: list[str], until: AbstractSet[int]) -> list[tuple[int, str]]:
    """The queued runs of one queue as (pk, kind), in the order a worker takes them
    (``services.runs.evaluation_run_next``, each pick moving its submitter to the back of the
    round); stops once every run of ``until`` is placed (all of them when it is empty)."""
    maintainers = set(queued.filter(MAINTAINERS_WORK).values_list("pk", flat=True))
    rows = queued.order_by("queued_at", "pk").values_list("pk", "kind", "queued_at", RUN_OWNER)
    order: list[tuple[int, str]] = []
    per_owner: dict[int, deque[tuple[int, str, datetime]]] = defaultdict(deque)
    for pk, kind, queued_at, owner in rows:
        if pk in maintainers:
            order.append((pk, kind))
        else:
            per_owner[owner].append((pk, kind, queued_at))
    left = set(until) - {pk for pk, _ in order}
    if until and not left:
        return order
    waiting = {owner: runs[0][2] for owner, runs in per_owner.items()}
    served = dict(
        EvaluationRun.objects.filter(
            kind__in=kinds, started_at__isnull=False, **{f"{RUN_OWNER}__in": list(waiting)}
        )
        .exclude(MAINTAINERS_WORK)
        .order_by()
        .values_list(RUN_OWNER)
        .annotate(last=Max("started_at"))
    )
    # a pick is the latest start on the queue: later than every stored one
    tick = max([timezone.now(), *served.values()]) + timedelta(seconds=1)
    while waiting:
        owner = min(waiting, key=lambda o: owner_turn(o, waiting=waiting, served=served))
        pk, kind, _ = per_owner[owner].popleft()
        order.append((pk, kind))
        left.discard(pk)
        if until and not left:
            break
        served[owner], tick = tick, tick + timedelta(microseconds=1)
        if per_owner[owner]:
            waiting[owner] = per_owner[owner][0][2]
        else:
            del waiting[owner]
    return order


def queued_in_worker_order(*, until: AbstractSet[int] = frozenset()) -> list[tuple[int, str]]:
    """Every queued run as (pk, kind) in the order the workers take them: the queues in the
    order a worker consumes them (``policy.WORKER_QUEUES``: primary before secondary), each in
    its own order (:func:`_round_robin`); stops once every run of ``until`` is placed."""
    order: list[tuple[int, str]] = []
    left = set(until)
    queued = EvaluationRun.objects.filter(status=EvaluationRun.Status.QUEUED)
    for queue in WORKER_QUEUES.split(","):
        kinds = [kind for kind in KINDS if run_queue(kind) == queue]
        if not kinds:
            continue
        # within a queue, the replication of imported entries after everything else
        in_queue = queued.filter(kind__in=kinds)
        taken = _round_robin(in_queue.exclude(REPLICATING), kinds=kinds, until=left)
        rest = left - {pk for pk, _ in taken}
        if not left or rest:
            taken += _round_robin(in_queue.filter(REPLICATING), kinds=kinds, until=rest)
        order += taken
        left -= {pk for pk, _ in taken}
        if until and not left:
            break
    return order


def submission_queue_estimate(*, sub: Submission, now: datetime | None = None) -> QueueEstimate:
    """The queue position and ETA of a submission loaded by ``submission_detail_get``."""
    if sub.status not in OPEN_STATUSES:
        return QueueEstimate()
    now = now or timezone.now()
    mine = [r for r in sub.runs_sorted if r.status in ACTIVE_RUN_STATUSES]
    # what it is scored on first (its secondary runs wait behind every queued primary run)
    scored_on = [r for r in mine if r.kind in PRIMARY_KINDS]
    mine = scored_on or mine
    if not mine:
        return QueueEstimate()
    waiting = {r.pk for r in mine if r.status == EvaluationRun.Status.QUEUED}
    order = queued_in_worker_order(until=waiting) if waiting else []
    at = [i for i, (pk, _) in enumerate(order) if pk in waiting]
    position = runs_ahead = None
    if at:
        runs_ahead = at[0]
        position = runs_ahead + 1
    # the queued runs taken up to its last one (its own among them), and every run executing now
    counted = [kind for _, kind in order[: at[-1] + 1]] if at else []
    running = list(
        EvaluationRun.objects.filter(status=EvaluationRun.Status.RUNNING).values_list("kind", "started_at")
    )
    kinds = set(counted) | {kind for kind, _ in running}
    measured = run_seconds_measured(kinds=kinds)
    estimate = QueueEstimate(queue_position=position, runs_ahead=runs_ahead, run_seconds=measured)
    if not kinds <= set(measured):
        return estimate  # a kind that never finished a run: no honest ETA

    def left(kind: str, started: datetime | None) -> float:
        mean = measured[kind]["mean_s"]
        return mean if started is None else max(mean - (now - started).total_seconds(), 0.0)

    work = sum(measured[kind]["mean_s"] for kind in counted)
    work += sum(left(kind, started) for kind, started in running)
    estimate.eta_seconds = round(work / max(len(running), 1), 1)
    return estimate


def submission_detail_get(*, pk: int, user) -> Submission | None:
    """The submission with its runs, if ``user`` may see it (its submitter, or staff)."""
    qs = Submission.objects.select_related(
        "probe_version__probe__category",
        "probe_version__probe__base_model",
        "probe_version__license",
        "submitter",
    )
    if not user.is_staff:
        qs = qs.filter(submitter=user)
    sub = qs.filter(pk=pk).first()
    if sub is None:
        return None
    runs = submission_runs(sub).select_related("task", "base_model").defer("example_scores")
    sub.runs_sorted = sorted(runs, key=lambda r: (r.kind != "score", r.task_id, r.split, r.base_model_id))
    sub.scores_sorted = list(sub.probe_version.scores.select_related("spec").order_by("spec_id"))
    return sub


def submissions_for_user(*, user, probe: str | None = None) -> QuerySet[Submission]:
    """The user's submissions, newest first; with ``probe``, only that probe's (its slug)."""
    qs = Submission.objects.filter(submitter=user)
    if probe:
        qs = qs.filter(probe_version__probe__slug=probe)
    return (
        qs.select_related("probe_version__probe")
        .prefetch_related(Prefetch("runs", queryset=EvaluationRun.objects.defer("example_scores", "metrics")))
        .order_by("-created_at", "-pk")
    )


# --------------------------------------------------------------------------- queued work, shares


def run_seconds_estimated(kinds) -> dict[str, float]:
    """kind → the estimated seconds of one run: the measured mean of its latest finished runs, or,
    for a kind that has never finished one, ``policy.RUN_SECONDS_DEFAULT``."""
    measured = run_seconds_measured(kinds=kinds)
    return {
        kind: measured[kind]["mean_s"]
        if kind in measured
        else float(RUN_SECONDS_DEFAULT.get(kind, RUN_SECONDS_DEFAULT_OTHER))
        for kind in set(kinds)
    }


@dataclass
class QueuedWork:
    """Runs waiting or executing, and their estimated run-seconds: a queued run counts its kind's
    estimate, a running one what is left of it (at least nothing)."""

    queued: int = 0
    running: int = 0
    seconds: float = 0.0

    @property
    def runs(self) -> int:
        return self.queued + self.running


def _work(rows, *, estimate: dict[str, float], now: datetime) -> QueuedWork:
    """``rows``: (kind, status, started_at) of queued and running runs."""
    work = QueuedWork()
    for kind, status, started in rows:
        if status == EvaluationRun.Status.RUNNING:
            work.running += 1
            elapsed = (now - started).total_seconds() if started is not None else 0.0
            work.seconds += max(estimate[kind] - elapsed, 0.0)
        else:
            work.queued += 1
            work.seconds += estimate[kind]
    return work


def queued_work(
    *, submitter=None, submission: Submission | None = None, now: datetime | None = None
) -> QueuedWork:
    """The queued and running runs of the submissions of ``submitter`` (or of one ``submission``),
    with their estimated run-seconds (:func:`run_seconds_estimated`). Runs no submission waits on
    alone (shared reference runs, a cycle's, the coverage backfill's) are the maintainers' work and
    not counted."""
    now = now or timezone.now()
    runs = EvaluationRun.objects.filter(status__in=ACTIVE_RUN_STATUSES)
    if submission is not None:
        runs = runs.filter(submission=submission)
    else:
        runs = runs.filter(submission__submitter=submitter)
    rows = list(runs.values_list("kind", "status", "started_at"))
    return _work(rows, estimate=run_seconds_estimated({kind for kind, _, _ in rows}), now=now)


@dataclass
class QueueShare:
    """One submitter's share of the workers' queue (public: no name, only the ids of the open
    submissions the runs belong to), or the maintainers' own work."""

    label: str
    submissions: list[int]
    work: QueuedWork
    share: float = 0.0  # of every share's estimated run-seconds
    maintainers: bool = False


def queue_shares(*, now: datetime | None = None) -> list[QueueShare]:
    """Each submitter's queued and running runs and their estimated run-seconds, most work first,
    after the maintainers' own work (reference probes, the quarterly re-evaluation), which the
    workers take first (``services.runs.evaluation_run_next``); the other runs are taken
    round-robin across submitters."""
    now = now or timezone.now()
    rows = list(
        EvaluationRun.objects.filter(status__in=ACTIVE_RUN_STATUSES).values_list(
            "kind", "status", "started_at", "cycle_id", "submission_id", "probe_version__probe__owner_id"
        )
    )
    estimate = run_seconds_estimated({r[0] for r in rows})
    system = set(SystemAccount.objects.values_list("user_id", flat=True))
    # one lane per submitter (the probe's owner), as the workers take turns; the maintainers' two
    lanes: dict[str | int, list] = {}
    for kind, status, started, cycle, submission, owner in rows:
        key = "cycle" if cycle is not None else "reference" if owner in system else owner
        lanes.setdefault(key, []).append((kind, status, started, submission))
    shares = []
    for lane, runs in lanes.items():
        work = _work([r[:3] for r in runs], estimate=estimate, now=now)
        ids = sorted({r[3] for r in runs if r[3] is not None})
        if lane == "cycle":
            share = QueueShare("Quarterly re-evaluation (maintainers)", ids, work, maintainers=True)
        elif lane == "reference":
            share = QueueShare("Reference probes (maintainers)", ids, work, maintainers=True)
        elif ids:
            share = QueueShare("The submitter of " + ", ".join(f"#{i}" for i in ids), ids, work)
        else:
            share = QueueShare("A submitter's probes, on tasks added since (coverage backfill)", ids, work)
        shares.append(share)
    total = sum(s.work.seconds for s in shares)
    for share in shares:
        share.share = share.work.seconds / total if total else 0.0
    return sorted(shares, key=lambda s: (not s.maintainers, -s.work.seconds, s.label))
