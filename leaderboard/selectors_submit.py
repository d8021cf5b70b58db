"""Reads for the submission pages and the submission API."""

from __future__ import annotations

from django.db.models import Prefetch

from leaderboard.models import EvaluationRun, Submission
from leaderboard.services import submission_runs


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
