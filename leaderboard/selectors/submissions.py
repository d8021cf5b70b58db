"""Reads for the submission pages, the submission API and the public queue."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Prefetch
from django.utils import timezone

from leaderboard.models import EvaluationRun, Submission
from leaderboard.policy import REVIEW_GOAL_DAYS
from leaderboard.selectors.shared import submission_runs

OPEN_STATUSES = (
    Submission.Status.SUBMITTED,
    Submission.Status.VALIDATED,
    Submission.Status.QUEUED,
    Submission.Status.RUNNING,
)


REVIEW_GOAL = timedelta(days=REVIEW_GOAL_DAYS)


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


def submissions_for_user(*, user):
    return (
        Submission.objects.filter(submitter=user)
        .select_related("probe_version__probe")
        .prefetch_related(Prefetch("runs", queryset=EvaluationRun.objects.defer("example_scores", "metrics")))
        .order_by("-created_at", "-pk")
    )
