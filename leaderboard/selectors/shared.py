"""Reads that the writers need too: the current eval-awareness reference probe of a base model,
the runs a submission waits on, the latest scored version of each probe. Services import these
(services may read); nothing here imports a service.
"""

from __future__ import annotations

from django.db.models import Q

from evaluator.registry import EVAL_AWARENESS
from leaderboard.models import BaseModel, EvaluationRun, Probe, ProbeVersion, Submission

Run = EvaluationRun


def ea_reference_version(*, base_model: BaseModel) -> ProbeVersion | None:
    """The current eval-awareness reference probe of a base model: the newest scored version."""
    return (
        ProbeVersion.objects.filter(
            probe__base_model=base_model,
            probe__reference_role=EVAL_AWARENESS,
            submission__status=Submission.Status.SCORED,
        )
        .order_by("-created_at", "-pk")
        .first()
    )


def submission_runs(submission: Submission):
    """Every run a submission waits on: its own runs and the shared reference runs it uses."""
    version = submission.probe_version
    own = Q(submission=submission)
    if version.probe.category_id == EVAL_AWARENESS:
        return EvaluationRun.objects.filter(own)
    ref = ea_reference_version(base_model=version.probe.base_model)
    if ref is None:
        return EvaluationRun.objects.filter(own)
    task_ids = EvaluationRun.objects.filter(own, kind=Run.Kind.SCORE).values("task_id")
    shared = Q(probe_version=ref, kind=Run.Kind.REFERENCE, task_id__in=task_ids, cycle=None)
    return EvaluationRun.objects.filter(own | shared)


def scored_versions() -> list[ProbeVersion]:
    """The entries a cycle re-evaluates: the latest scored version of every active probe."""
    return [v for v in scored_versions_all() if v.probe.status == Probe.Status.ACTIVE]


def scored_versions_all() -> list[ProbeVersion]:
    """The latest scored version of every probe, active or deprecated."""
    latest: dict[int, ProbeVersion] = {}
    qs = (
        ProbeVersion.objects.filter(submission__status=Submission.Status.SCORED)
        .select_related("probe")
        .order_by("probe_id", "-number")
    )
    for v in qs:
        latest.setdefault(v.probe_id, v)
    return list(latest.values())
