"""Reads for the submission pages, the submission API and the public queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Prefetch, Q, QuerySet
from django.utils import timezone

from leaderboard.models import EvaluationRun, Submission
from leaderboard.policy import REVIEW_GOAL_DAYS
from leaderboard.selectors.progress import run_seconds_measured
from leaderboard.selectors.shared import submission_runs

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
    """Where a submission stands in the workers' queue, and when it should be done.

    ``queue_position``: 1 when this submission's first queued run is the next run to start (runs
    of any submission, cycle or reference run, oldest first); None when none of its runs waits.
    ``eta_seconds``: the measured mean duration of each kind of run (its latest
    ``ETA_SAMPLE_RUNS`` finished runs) × the runs ahead and the submission's own unfinished runs,
    divided by the runs executing now (the busy workers, at least one); None when a kind it needs
    has never finished a run, or the submission is final.
    """

    queue_position: int | None = None
    runs_ahead: int | None = None
    eta_seconds: float | None = None
    #: kind → {"mean_s", "runs"}: the measured run times the ETA is made of
    run_seconds: dict[str, dict[str, float]] = field(default_factory=dict)


def submission_queue_estimate(*, sub: Submission, now: datetime | None = None) -> QueueEstimate:
    """The queue position and ETA of a submission loaded by ``submission_detail_get``."""
    if sub.status not in OPEN_STATUSES:
        return QueueEstimate()
    now = now or timezone.now()
    mine = [r for r in sub.runs_sorted if r.status in ACTIVE_RUN_STATUSES]
    if not mine:
        return QueueEstimate()
    waiting = [r for r in mine if r.status == EvaluationRun.Status.QUEUED]
    others = EvaluationRun.objects.filter(status__in=ACTIVE_RUN_STATUSES).exclude(
        pk__in=[r.pk for r in sub.runs_sorted]
    )
    running = list(others.filter(status=EvaluationRun.Status.RUNNING).values_list("kind", "started_at"))
    ahead_counts: dict[str, int] = {}
    position = runs_ahead = None
    if waiting:
        first = min(waiting, key=lambda r: (r.queued_at, r.pk))
        ahead = others.filter(status=EvaluationRun.Status.QUEUED).filter(
            Q(queued_at__lt=first.queued_at) | Q(queued_at=first.queued_at, pk__lt=first.pk)
        )
        ahead_counts = {
            row["kind"]: row["n"] for row in ahead.order_by().values("kind").annotate(n=Count("pk"))
        }
        runs_ahead = sum(ahead_counts.values())
        position = runs_ahead + 1
    kinds = {r.kind for r in mine} | set(ahead_counts) | {kind for kind, _ in running}
    measured = run_seconds_measured(kinds=kinds)
    estimate = QueueEstimate(queue_position=position, runs_ahead=runs_ahead, run_seconds=measured)
    if not kinds <= set(measured):
        return estimate  # a kind that never finished a run: no honest ETA

    def left(kind: str, started: datetime | None) -> float:
        mean = measured[kind]["mean_s"]
        return mean if started is None else max(mean - (now - started).total_seconds(), 0.0)

    work = sum(measured[kind]["mean_s"] * n for kind, n in ahead_counts.items())
    work += sum(left(kind, started) for kind, started in running)
    work += sum(
        left(r.kind, r.started_at if r.status == EvaluationRun.Status.RUNNING else None) for r in mine
    )
    busy = len(running) + sum(r.status == EvaluationRun.Status.RUNNING for r in mine)
    estimate.eta_seconds = round(work / max(busy, 1), 1)
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
