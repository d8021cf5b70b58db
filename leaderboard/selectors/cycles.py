"""Reads for the public records: re-evaluation cycles and their diffs, eval-awareness reference
updates, confirmed leakage records."""

from __future__ import annotations

from django.db.models import Count, Exists, OuterRef, Q

from leaderboard.models import (
    CycleResult,
    LeakageRecord,
    ProbeVersion,
    ReevaluationCycle,
    ReferenceUpdate,
    public_q,
)


def _public_results():
    return CycleResult.objects.filter(public_q("probe_version__"))


def reevaluation_list() -> list[ReevaluationCycle]:
    """Cycles, newest first, with their public results counted by outcome (one query)."""
    public = public_q("results__probe_version__")
    counts = {
        outcome: Count("results", filter=public & Q(results__outcome=outcome))
        for outcome in CycleResult.Outcome.values
    }
    cycles: list[ReevaluationCycle] = list(
        ReevaluationCycle.objects.annotate(
            n_results=Count("results", filter=public), **{f"n_{k}": v for k, v in counts.items()}
        ).order_by("-quarter")
    )
    for cycle in cycles:
        cycle.outcome_counts = {k: getattr(cycle, f"n_{k}") for k in CycleResult.Outcome.values}
    return cycles


def reevaluation_detail(*, quarter: str) -> tuple[ReevaluationCycle, list[CycleResult]] | None:
    """The cycle (with ``progress``: its runs total/done/failed) and its public results."""
    cycle = ReevaluationCycle.objects.filter(quarter=quarter).first()
    if cycle is None:
        return None
    cycle.progress = cycle.runs.aggregate(
        total=Count("pk"),
        done=Count("pk", filter=Q(status__in=["succeeded", "failed"])),
        failed=Count("pk", filter=Q(status="failed")),
    )
    results = list(
        _public_results()
        .filter(cycle=cycle)
        .select_related("probe_version__probe__category", "probe_version__probe__base_model")
        .order_by(
            "probe_version__probe__category__order", "probe_version__probe__slug", "probe_version__number"
        )
    )
    return cycle, results


def reference_update_list() -> list[ReferenceUpdate]:
    """Completed eval-awareness reference updates, newest first, with their public diff."""
    return list(
        ReferenceUpdate.objects.filter(status=ReferenceUpdate.Status.COMPLETED)
        .select_related("base_model", "old_version", "new_version__probe")
        .order_by("-finished_at", "-pk")
    )


def reference_update_get(*, pk: int) -> ReferenceUpdate | None:
    return (
        ReferenceUpdate.objects.filter(pk=pk, status=ReferenceUpdate.Status.COMPLETED)
        .select_related("base_model", "old_version", "new_version__probe")
        .first()
    )


def leakage_public_list() -> list[LeakageRecord]:
    """Confirmed records, newest first; ``probe_public`` says whether the probe page exists."""
    public = ProbeVersion.objects.public().filter(probe_id=OuterRef("probe_id"))
    return list(
        LeakageRecord.objects.filter(status=LeakageRecord.Status.CONFIRMED)
        .select_related("probe__category", "probe_version")
        .annotate(probe_public=Exists(public))
        .order_by("-reviewed_at", "-created_at")
    )
