"""Reads for the public records: re-evaluation cycles, their diffs and, once completed, their
revealed seeds and holdouts; eval-awareness reference updates, confirmed leakage records."""

from __future__ import annotations

import json
import logging
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q

from evaluator.errors import EvaluatorError
from leaderboard.models import (
    CycleResult,
    LeakageRecord,
    ProbeVersion,
    ReevaluationCycle,
    ReferenceUpdate,
    holdout_items,
    public_q,
)
from leaderboard.sealed import holdout_read

log = logging.getLogger(__name__)


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


#: a revealed holdout's fields, besides its task, base model and rows
REVEALED_FIELDS = ("pool", "pool_sha256", "pool_rows", "size", "sha256", "reused_rows", "avoided_ids", "note")


def reevaluation_reveal(*, quarter: str) -> tuple[ReevaluationCycle | None, dict[str, Any] | None]:
    """(the cycle, its reveal): the secret seed and every holdout's rows, with what the verifier
    needs to redraw them (the pool, the size, the earlier quarters' rows avoided) and the
    commitment as it was published. The reveal is None while the cycle is not completed, or for a
    cycle drawn before commitments (no seed); the cycle is None when there is no such quarter.
    ``python -m evaluator verify-holdout`` reads this document."""
    cycle = ReevaluationCycle.objects.filter(quarter=quarter).first()
    if cycle is None or not cycle.is_revealed:
        return cycle, None
    holdouts = []
    for task, model, entry in holdout_items(cycle.holdouts):
        revealed = {"task": task, "base_model": model} | {k: entry[k] for k in REVEALED_FIELDS if k in entry}
        try:
            data = holdout_read(cycle.quarter, task, model, entry["path"])
        except (OSError, EvaluatorError) as exc:  # a data directory restored without it, another key
            log.error("cycle %s: the holdout file of %s cannot be read: %s", cycle.quarter, task, exc)
            revealed["note"] = "; ".join(
                filter(None, [entry.get("note", ""), "its file cannot be read here"])
            )
            data = b""
        rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
        holdouts.append(revealed | {"rows": rows})
    assert cycle.revealed_at is not None  # is_revealed
    return cycle, {
        "quarter": cycle.quarter,
        "scheme": cycle.commitment.get("scheme", ""),
        "seed": cycle.seed,
        "seed_sha256": cycle.commitment.get("seed_sha256", ""),
        "revealed_at": cycle.revealed_at.isoformat(),
        "commitment": cycle.commitment,
        "holdouts": holdouts,
    }


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
