"""The metrics of docs/METHODOLOGY.md as small pure functions on numpy arrays.

Only numpy here: scikit-learn is used by the tests as an independent reference. Callers name
the functions directly (``evaluator.metrics.measure`` for the board, ``summarize`` for the CLI).
"""

from __future__ import annotations

import numpy as np

from evaluator.errors import MetricInputError
from evaluator.metrics.metric_table import OPERATING_FPR

BOOTSTRAP_SEED = 20260401  # fixed: every interval on the board is reproducible
BOOTSTRAP_RESAMPLES = 1000
EA_QUANTILES = (0.2, 0.4, 0.6, 0.8)  # 5 bins of the reference probe's score
ECE_BINS = 10


# --------------------------------------------------------------------------- input checks


def _as_arrays(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1)
    if s.shape != y.shape:
        raise MetricInputError(f"{s.size} scores but {y.size} labels")
    if s.size == 0:
        raise MetricInputError("no examples")
    if not np.all(np.isfinite(s)):
        raise MetricInputError("scores contain NaN or infinite values")
    if not np.isin(y, (0, 1)).all():
        raise MetricInputError("labels must be 0 or 1")
    return s, y.astype(np.int64)


def _two_classes(y: np.ndarray) -> None:
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == y.size:
        raise MetricInputError(
            f"AUROC needs both classes; got {n_pos} positive and {y.size - n_pos} negative"
        )


def sigmoid(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))


# --------------------------------------------------------------------------- AUROC


def _auroc_unchecked(s: np.ndarray, y: np.ndarray) -> float:
    """Mann–Whitney AUROC with ties counted ½, via average ranks (O(n log n))."""
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(s.size, dtype=np.float64)
    sorted_s = s[order]
    # average rank of each run of ties
    boundaries = np.flatnonzero(np.diff(sorted_s)) + 1
    starts = np.concatenate(([0], boundaries))
    ends = np.concatenate((boundaries, [s.size]))
    avg = (starts + ends + 1) / 2.0  # 1-based average rank for each run
    ranks[order] = np.repeat(avg, ends - starts)
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def auroc(scores, labels) -> float:
    s, y = _as_arrays(scores, labels)
    _two_classes(y)
    return _auroc_unchecked(s, y)


def auroc_ci(
    scores, labels, *, n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the AUROC, resampling within each class (fixed seed)."""
    s, y = _as_arrays(scores, labels)
    _two_classes(y)
    rng = np.random.default_rng(seed)
    pos, neg = s[y == 1], s[y == 0]
    labels_bs = np.concatenate((np.ones(pos.size, np.int64), np.zeros(neg.size, np.int64)))
    stats = np.empty(n_resamples)
    for i in range(n_resamples):
        sample = np.concatenate((rng.choice(pos, pos.size), rng.choice(neg, neg.size)))
        stats[i] = _auroc_unchecked(sample, labels_bs)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(lo), float(hi)


def auroc_mean_ci(
    groups, *, n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the MEAN AUROC over several tasks: each resample draws
    every task's test set again (within class) and averages the tasks' AUROCs.

    ``groups``: [(scores, labels), ...], one pair per task.
    """
    rng = np.random.default_rng(seed)
    prepared = []
    for scores, labels in groups:
        s, y = _as_arrays(scores, labels)
        _two_classes(y)
        labels_bs = np.concatenate(
            (np.ones(int(y.sum()), np.int64), np.zeros(int(y.size - y.sum()), np.int64))
        )
        prepared.append((s[y == 1], s[y == 0], labels_bs))
    if not prepared:
        raise MetricInputError("no tasks to average")
    stats = np.empty(n_resamples)
    for i in range(n_resamples):
        values = [
            _auroc_unchecked(np.concatenate((rng.choice(pos, pos.size), rng.choice(neg, neg.size))), lab)
            for pos, neg, lab in prepared
        ]
        stats[i] = np.mean(values)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(lo), float(hi)


def auroc_ea(scores, labels, ref_scores) -> float:
    """Eval-awareness-corrected AUROC, exactly as docs/METHODOLOGY.md defines it.

    edges = quantile(r, [.2,.4,.6,.8]); bin = searchsorted(edges, r, side="right"); count only
    (positive, negative) pairs inside the same bin, ties ½.
    """
    s, y = _as_arrays(scores, labels)
    r = np.asarray(ref_scores, dtype=np.float64).reshape(-1)
    if r.shape != s.shape:
        raise MetricInputError(f"{s.size} scores but {r.size} reference scores")
    if not np.all(np.isfinite(r)):
        raise MetricInputError("reference scores contain NaN or infinite values")
    _two_classes(y)
    edges = np.quantile(r, EA_QUANTILES)
    bins = np.searchsorted(edges, r, side="right")
    numerator = 0.0
    denominator = 0
    for b in np.unique(bins):
        in_bin = bins == b
        pos, neg = s[in_bin & (y == 1)], s[in_bin & (y == 0)]
        if pos.size == 0 or neg.size == 0:
            continue
        diff = pos[:, None] - neg[None, :]
        numerator += float((diff > 0).sum() + 0.5 * (diff == 0).sum())
        denominator += pos.size * neg.size
    if denominator == 0:
        raise MetricInputError(
            "no reference-score bin holds both a positive and a negative example; auroc_ea undefined"
        )
    return numerator / denominator


# --------------------------------------------------------------------------- calibration


def _as_probs(probs, labels) -> tuple[np.ndarray, np.ndarray]:
    p, y = _as_arrays(probs, labels)
    if (p < 0).any() or (p > 1).any():
        raise MetricInputError("probabilities must lie in [0, 1]")
    return p, y


def ece(probs, labels, n_bins: int = ECE_BINS) -> float:
    """bin = min(floor(10·p), 9); ECE = Σ_b (n_b/N)·|mean label_b − mean p_b| over non-empty bins."""
    p, y = _as_probs(probs, labels)
    bins = np.minimum(np.floor(n_bins * p).astype(np.int64), n_bins - 1)
    total = 0.0
    for b in np.unique(bins):
        mask = bins == b
        total += mask.sum() / p.size * abs(y[mask].mean() - p[mask].mean())
    return float(total)


def reliability_bins(probs, labels, n_bins: int = ECE_BINS) -> list[dict]:
    """Per-bin counts, mean probability and positive rate: the data of a reliability diagram."""
    p, y = _as_probs(probs, labels)
    bins = np.minimum(np.floor(n_bins * p).astype(np.int64), n_bins - 1)
    out = []
    for b in range(n_bins):
        mask = bins == b
        n = int(mask.sum())
        out.append(
            {
                "bin": b,
                "lo": b / n_bins,
                "hi": (b + 1) / n_bins,
                "n": n,
                "mean_prob": float(p[mask].mean()) if n else None,
                "positive_rate": float(y[mask].mean()) if n else None,
            }
        )
    return out


def brier(probs, labels) -> float:
    p, y = _as_probs(probs, labels)
    return float(np.mean((p - y) ** 2))


# --------------------------------------------------------------------------- thresholds


def threshold_at_fpr(negative_scores, fpr: float = OPERATING_FPR) -> float:
    """The threshold t such that at most ``fpr`` of the given negatives score strictly above t."""
    neg = np.sort(np.asarray(negative_scores, dtype=np.float64).reshape(-1))
    if neg.size == 0:
        raise MetricInputError("no negative examples to fix a threshold on")
    k = int(np.floor(fpr * neg.size))  # number of negatives allowed above the threshold
    return float(neg[neg.size - 1 - k])


def recall_at_fpr(scores, labels, threshold: float) -> float:
    s, y = _as_arrays(scores, labels)
    if y.sum() == 0:
        raise MetricInputError("recall needs at least one positive example")
    return float((s[y == 1] > threshold).mean())


def fpr_at_threshold(scores, labels, threshold: float) -> float:
    """The fraction of negatives scoring strictly above ``threshold`` (the side recall counts)."""
    s, y = _as_arrays(scores, labels)
    if y.sum() == y.size:
        raise MetricInputError("a false-positive rate needs at least one negative example")
    return float((s[y == 0] > threshold).mean())


def roc_curve_points(scores, labels, max_points: int = 200) -> list[tuple[float, float]]:
    """(FPR, TPR) points of the ROC curve, thinned to at most ``max_points`` for plotting."""
    s, y = _as_arrays(scores, labels)
    _two_classes(y)
    order = np.argsort(-s, kind="mergesort")
    s_sorted, y_sorted = s[order], y[order]
    distinct = np.flatnonzero(np.diff(s_sorted)) if s.size > 1 else np.array([], dtype=int)
    idx = np.concatenate((distinct, [s.size - 1]))
    tps = np.cumsum(y_sorted)[idx]
    fps = (idx + 1) - tps
    tpr = np.concatenate(([0.0], tps / y.sum()))
    fpr = np.concatenate(([0.0], fps / (y.size - y.sum())))
    if tpr.size > max_points:
        keep = np.unique(np.linspace(0, tpr.size - 1, max_points).round().astype(int))
        tpr, fpr = tpr[keep], fpr[keep]
    return [(float(f), float(t)) for f, t in zip(fpr, tpr, strict=True)]


def pearson(a, b) -> float:
    """Pearson correlation; 0.0 when either side is constant (no signal to correlate)."""
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    if a.shape != b.shape or a.size < 2:
        raise MetricInputError("pearson needs two equal-length vectors of at least 2 values")
    if a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def summarize(scores, labels, *, probs=None, ref_scores=None) -> dict:
    """The metrics of ``python -m evaluator metrics``: n, auroc, auroc_ci, auroc_ea, ece, brier."""
    s, y = _as_arrays(scores, labels)
    p = sigmoid(s) if probs is None else np.asarray(probs, dtype=np.float64)
    lo, hi = auroc_ci(s, y)
    return {
        "n": int(s.size),
        "auroc": auroc(s, y),
        "auroc_ci": [lo, hi],
        "auroc_ea": auroc_ea(s, y, ref_scores) if ref_scores is not None else None,
        "ece": ece(p, y),
        "brier": brier(p, y),
    }
