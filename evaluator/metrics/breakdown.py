"""One task's test results broken down by group (the rows' ``domain``, the rows' ``source``).

A task's AUROC is one number over rows of many kinds; the breakdown says how the probe does on each
kind: per group its positives and negatives, its AUROC with the 95% bootstrap interval the per-task
AUROC has (:func:`evaluator.metrics.metrics.auroc_ci`), and its recall at the task's operating
point (the threshold fixed on the train split's negatives at the 1% operating FPR, the one
``task_metrics`` uses) with a Wilson 95% interval. A group with fewer than
:data:`MIN_ROWS_PER_CLASS` rows of either class is reported with its counts and no numbers.

Pure and deterministic (fixed bootstrap seed, groups in sorted order).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from evaluator.errors import MetricInputError
from evaluator.metrics import metrics as m

#: a group needs at least this many rows of each class for its numbers to be shown
MIN_ROWS_PER_CLASS = 20
#: the group of a row whose split file names no domain (or no source)
UNLABELLED = "unlabelled"
#: the kinds of breakdown, and the row key each reads
KINDS: tuple[str, ...] = ("domain", "source")
MEASURED = "measured"
TOO_FEW_ROWS = "too_few_rows"
_Z95 = NormalDist().inv_cdf(0.975)


def wilson_interval(successes: int, n: int, *, z: float = _Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion (95% by default); n must be positive."""
    if n <= 0:
        raise MetricInputError("a proportion's interval needs at least one trial")
    if not 0 <= successes <= n:
        raise MetricInputError(f"{successes} successes out of {n} trials")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the ends, no rounding residue
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


@dataclass(frozen=True)
class GroupResult:
    """One group's results: counts always; AUROC and recall only when ``status`` is ``measured``
    (recall also needs the task's threshold: None without a train run)."""

    n_pos: int
    n_neg: int
    status: str  # MEASURED | TOO_FEW_ROWS
    auroc: float | None = None
    auroc_ci: tuple[float, float] | None = None
    recall_at_1pct_fpr: float | None = None
    recall_at_1pct_fpr_ci: tuple[float, float] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "n_pos": self.n_pos,
            "n_neg": self.n_neg,
            "status": self.status,
            "auroc": self.auroc,
            "auroc_ci": None if self.auroc_ci is None else list(self.auroc_ci),
            "recall_at_1pct_fpr": self.recall_at_1pct_fpr,
            "recall_at_1pct_fpr_ci": None
            if self.recall_at_1pct_fpr_ci is None
            else list(self.recall_at_1pct_fpr_ci),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> GroupResult:
        """A stored group; anything malformed reads as missing (counts as 0)."""

        def num(v: Any) -> float | None:
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        def pair(v: Any) -> tuple[float, float] | None:
            if isinstance(v, (list, tuple)) and len(v) == 2 and all(num(x) is not None for x in v):
                return float(v[0]), float(v[1])
            return None

        def count(v: Any) -> int:
            return int(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0

        status = raw.get("status")
        return cls(
            n_pos=count(raw.get("n_pos")),
            n_neg=count(raw.get("n_neg")),
            status=status if status in (MEASURED, TOO_FEW_ROWS) else TOO_FEW_ROWS,
            auroc=num(raw.get("auroc")),
            auroc_ci=pair(raw.get("auroc_ci")),
            recall_at_1pct_fpr=num(raw.get("recall_at_1pct_fpr")),
            recall_at_1pct_fpr_ci=pair(raw.get("recall_at_1pct_fpr_ci")),
        )


def _group_result(scores: np.ndarray, labels: np.ndarray, threshold: float | None) -> GroupResult:
    n_pos = int(labels.sum())
    n_neg = int(labels.size - n_pos)
    if n_pos < MIN_ROWS_PER_CLASS or n_neg < MIN_ROWS_PER_CLASS:
        return GroupResult(n_pos=n_pos, n_neg=n_neg, status=TOO_FEW_ROWS)
    recall = recall_ci = None
    if threshold is not None:
        hits = int((scores[labels == 1] > threshold).sum())  # the side metrics.recall_at_fpr counts
        recall = m.recall_at_fpr(scores, labels, threshold)
        recall_ci = wilson_interval(hits, n_pos)
    return GroupResult(
        n_pos=n_pos,
        n_neg=n_neg,
        status=MEASURED,
        auroc=m.auroc(scores, labels),
        auroc_ci=m.auroc_ci(scores, labels),
        recall_at_1pct_fpr=recall,
        recall_at_1pct_fpr_ci=recall_ci,
    )


def breakdown(
    ids: Sequence[str],
    labels: Sequence[int] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
    *,
    threshold: float | None,
    groups: Mapping[str, str | None],
) -> dict[str, GroupResult]:
    """Group → its results, groups in sorted order. ``groups``: test id → its group (a missing id
    or None: :data:`UNLABELLED`). ``threshold``: the task's operating point (None: no recall).
    Empty when no test row has a group (the split file names none)."""
    if len(ids) != len(labels) or len(ids) != len(scores):
        raise MetricInputError(f"{len(ids)} ids, {len(labels)} labels and {len(scores)} scores")
    if not any(groups.get(i) is not None for i in ids):
        return {}
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    members: dict[str, list[int]] = defaultdict(list)
    for index, row_id in enumerate(ids):
        group = groups.get(row_id)
        members[UNLABELLED if group is None else str(group)].append(index)
    return {g: _group_result(s[idx], y[idx], threshold) for g, idx in sorted(members.items())}


def breakdowns(
    ids: Sequence[str],
    labels: Sequence[int] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
    *,
    threshold: float | None,
    row_groups: Mapping[str, Mapping[str, str | None]],
) -> dict[str, dict[str, GroupResult]]:
    """Each kind of :data:`KINDS` → :func:`breakdown` by it. ``row_groups``: test id →
    ``{"domain": ..., "source": ...}`` (as the split file's rows name them)."""
    return {
        kind: breakdown(
            ids,
            labels,
            scores,
            threshold=threshold,
            groups={i: g.get(kind) for i, g in row_groups.items()},
        )
        for kind in KINDS
    }
