"""Paired comparison of two probes scored on the same rows.

- ``delong_test``: DeLong, DeLong & Clarke-Pearson (1988) test for two correlated ROC curves,
  computed with the fast midrank algorithm of Sun & Xu (2014, IEEE Signal Processing Letters
  21(11)): O(n log n) instead of the O(m·n) structural components, with the same numbers (ties
  count ½). Two-sided p-value from the normal approximation.
- ``paired_delta_ci``: percentile bootstrap interval of ΔAUROC = AUROC_a − AUROC_b, resampling
  the rows within each class (the same rows for both probes, so the interval is paired), fixed
  seed.
- ``scores_compare``: both, as ``python -m evaluator compare`` prints them.
- ``rows_compare``: the same on the rows two probes share (paired by row id), or why not.

Only numpy (and ``math``); the p-value uses ``math.erfc``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from evaluator.errors import MetricInputError
from evaluator.metrics.metrics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED


@dataclass(frozen=True)
class DeLongResult:
    auroc_a: float
    auroc_b: float
    delta: float  # auroc_a − auroc_b
    variance: float  # DeLong's estimate of Var(delta)
    z: float | None  # None when the variance is 0 (see delong_test)
    p_value: float


def _paired_arrays(scores_a, scores_b, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.asarray(scores_a, dtype=np.float64).reshape(-1)
    b = np.asarray(scores_b, dtype=np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1)
    if not (a.size == b.size == y.size):
        raise MetricInputError(f"{a.size} scores_a, {b.size} scores_b and {y.size} labels: lengths differ")
    if y.size == 0:
        raise MetricInputError("no examples")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise MetricInputError("scores contain NaN or infinite values")
    if not np.isin(y, (0, 1)).all():
        raise MetricInputError("labels must be 0 or 1")
    y = y.astype(np.int64)
    n_pos = int(y.sum())
    if n_pos < 2 or y.size - n_pos < 2:
        raise MetricInputError(
            f"a paired comparison needs at least 2 positive and 2 negative rows; got {n_pos} positive"
            f" and {y.size - n_pos} negative"
        )
    return a, b, y


def midranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x`` with tied values given the average of their ranks."""
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    boundaries = np.flatnonzero(np.diff(sorted_x)) + 1
    starts = np.concatenate(([0], boundaries))
    ends = np.concatenate((boundaries, [x.size]))
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def delong_components(scores: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """AUROC and DeLong's structural components of one score vector (Sun & Xu 2014, eq. 4–6).

    Returns ``(auroc, v10, v01)``: ``v10[i]`` is the fraction of negatives that positive ``i``
    beats (ties ½), ``v01[j]`` the fraction of positives that beat negative ``j``.
    """
    pos, neg = scores[labels == 1], scores[labels == 0]
    m, n = pos.size, neg.size
    tz = midranks(np.concatenate((pos, neg)))
    tx, ty = midranks(pos), midranks(neg)
    auroc = float((tz[:m].sum() - m * (m + 1) / 2.0) / (m * n))
    v10 = (tz[:m] - tx) / n
    v01 = 1.0 - (tz[m:] - ty) / m
    return auroc, v10, v01


def delong_test(scores_a, scores_b, labels) -> DeLongResult:
    """DeLong's two-sided test of H0: AUROC_a = AUROC_b for two probes scored on the same rows.

    Var(Δ) = (s10_aa + s10_bb − 2·s10_ab)/m + (s01_aa + s01_bb − 2·s01_ab)/n with the sample
    covariances (denominator m − 1, n − 1) of the structural components. When that variance is 0
    (e.g. identical score vectors, or both curves perfect) the test is degenerate: p = 1 if
    Δ = 0, else p = 0, and ``z`` is None.
    """
    a, b, y = _paired_arrays(scores_a, scores_b, labels)
    auc_a, v10_a, v01_a = delong_components(a, y)
    auc_b, v10_b, v01_b = delong_components(b, y)
    m, n = v10_a.size, v01_a.size
    s10 = np.cov(np.vstack((v10_a, v10_b)))
    s01 = np.cov(np.vstack((v01_a, v01_b)))
    variance = float(
        (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / m + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / n
    )
    delta = auc_a - auc_b
    if variance <= 1e-15:
        return DeLongResult(auc_a, auc_b, delta, max(variance, 0.0), None, 1.0 if abs(delta) < 1e-12 else 0.0)
    z = delta / math.sqrt(variance)
    return DeLongResult(auc_a, auc_b, delta, variance, z, math.erfc(abs(z) / math.sqrt(2.0)))


def paired_delta_ci(
    scores_a,
    scores_b,
    labels,
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of AUROC_a − AUROC_b: each resample draws the positives and
    the negatives again (with replacement, class sizes kept) and both probes are measured on the
    same drawn rows."""
    a, b, y = _paired_arrays(scores_a, scores_b, labels)
    pos_idx, neg_idx = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    m, n = pos_idx.size, neg_idx.size
    rng = np.random.default_rng(seed)
    deltas = np.empty(n_resamples)
    for i in range(n_resamples):
        rows = np.concatenate((rng.choice(pos_idx, m), rng.choice(neg_idx, n)))
        deltas[i] = _auroc_of_drawn(a[rows], m, n) - _auroc_of_drawn(b[rows], m, n)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(deltas, [alpha, 1 - alpha])
    return float(lo), float(hi)


def _auroc_of_drawn(s: np.ndarray, m: int, n: int) -> float:
    """AUROC of scores whose first ``m`` entries are the positives and the next ``n`` negatives."""
    return float((midranks(s)[:m].sum() - m * (m + 1) / 2.0) / (m * n))


def scores_compare(
    scores_a, scores_b, labels, *, n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict:
    """What ``python -m evaluator compare`` prints: n, both AUROCs, Δ, its paired 95% bootstrap
    interval and DeLong's two-sided p-value."""
    test = delong_test(scores_a, scores_b, labels)
    lo, hi = paired_delta_ci(scores_a, scores_b, labels, n_resamples=n_resamples, seed=seed)
    return {
        "n": int(np.asarray(labels).size),
        "auroc_a": test.auroc_a,
        "auroc_b": test.auroc_b,
        "delta": test.delta,
        "delta_ci": [lo, hi],
        "p_value": test.p_value,
    }


def rows_compare(
    *,
    a: Mapping[str, tuple[int, float]],
    b: Mapping[str, tuple[int, float]],
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict:
    """Compare two probes on the rows they share: ``a`` and ``b`` map a row id to (label, score).

    Probes on different base models read the same task rows (a row id is the task's), so they are
    paired on the ids both were scored on. Returns ``{"paired": True, "n_shared", "n_a", "n_b",
    **scores_compare(...)}``, or ``{"paired": False, "reason", ...}`` when the shared rows cannot
    support a paired comparison (no shared rows, as on a task whose rows are generated per model,
    or fewer than two of a class).
    """
    shared = [i for i in a if i in b]
    base = {"n_shared": len(shared), "n_a": len(a), "n_b": len(b)}
    mismatched = [i for i in shared if int(a[i][0]) != int(b[i][0])]
    if mismatched:
        raise MetricInputError(
            f"row {mismatched[0]} has label {a[mismatched[0]][0]} for one probe and "
            f"{b[mismatched[0]][0]} for the other"
        )
    if not shared:
        return base | {"paired": False, "reason": "the two probes share no scored row on this task"}
    labels = np.array([int(a[i][0]) for i in shared])
    n_pos = int(labels.sum())
    if n_pos < 2 or labels.size - n_pos < 2:
        return base | {
            "paired": False,
            "reason": f"the shared rows hold {n_pos} positive and {labels.size - n_pos} negative;"
            " a paired comparison needs at least 2 of each",
        }
    out = scores_compare(
        [a[i][1] for i in shared], [b[i][1] for i in shared], labels, n_resamples=n_resamples, seed=seed
    )
    out.pop("n")
    return base | {"paired": True} | out


Z95 = 1.959963984540054


def mean_delta_ci(deltas: Iterable[tuple[float, tuple[float, float]]]) -> tuple[float, float] | None:
    """95% interval of the mean of per-task AUROC differences (a lift, a controlled AUROC), each
    given as (difference, its 95% interval): the tasks' rows are disjoint, so the differences are
    independent and the variance of the mean is the sum of the per-task variances (each read back
    from its interval) over k²."""
    items = list(deltas)
    if not items:
        return None
    mean = sum(v for v, _ in items) / len(items)
    variance = sum(((hi - lo) / (2 * Z95)) ** 2 for _, (lo, hi) in items) / len(items) ** 2
    half = Z95 * math.sqrt(variance)
    return round(mean - half, 6), round(mean + half, 6)
