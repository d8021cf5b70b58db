"""Rank intervals and tie groups for one board (one category under one weights spec).

A paired, stratified bootstrap over the rows the entries were measured on:

- **Rows.** For every task, the test rows (and, separately, the distshift rows) are drawn again
  with replacement within each label (positives and negatives keep their counts), from a
  generator seeded by ``(seed, task, split, the rows)``. Every entry measured on that task's rows
  is scored on the SAME drawn rows (looked up by row id), so differences between entries are
  paired. Entries on different base models share the task's rows (a row id is the task's, not the
  model's) — except on an on-policy task, whose rows are generated per model: entries scored on
  different row sets get their own draws and are not paired.
- **Recomputed on every resample** (what comes from those rows): per-task AUROC, AUROC_ea (the
  base model's eval-awareness reference scores of the drawn rows fix the quintile bins again),
  ECE and AUROC_ds; then the per-task means exactly as ``evaluator.metrics.measure.aggregate_measurements``
  takes them (a task without a distshift split imputes ``factor × its resampled AUROC``), and the
  ProbeScore with ``evaluator.metrics.scoring.probe_score`` itself.
- **Held fixed** (not measured on test rows): ρ_CE (re-fits on other base models), latency, the
  license, the imputation factors of the weights spec. An entry given without any task rows (its
  per-example results are not stored; none in normal operation) is held at its stored
  measurements: it still takes its place in every resample's ranking.

From B resamples (``BOOTSTRAP_RESAMPLES`` = 1000 unless told): each entry's ProbeScore 95%
percentile interval and its 95% rank interval (the 2.5% and 97.5% percentiles of its rank, where
the rank in a resample is 1 + the number of entries with a strictly higher norm-2 ranking key,
``evaluator.metrics.scoring.ranking_key``). When two or more entries' rank intervals include 1, each of
them is **tied for first** (a single one is simply first). **Tie groups**: walk the board in its order; an entry joins the group of the entry just
above it when the paired 95% interval of the difference of their ranking keys (over the same
resamples) contains 0, that is when the data cannot tell those two adjacent entries apart.
Groups are chained this way, so a group can hold a first and a last entry that are themselves
separable: a group says "no step inside it is resolved", not "all members are equal".

Only numpy and scipy (``scipy.stats.rankdata``), imported inside the functions; no Django.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evaluator.data.registry.licenses import LicenseSpec
from evaluator.data.registry.weights import WeightsSpec
from evaluator.errors import MetricInputError
from evaluator.metrics.metrics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, EA_QUANTILES, ECE_BINS
from evaluator.metrics.scoring import Measurements, probe_score, ranking_key

#: components whose measurements the bootstrap recomputes from resampled rows, and those held fixed
RESAMPLED_COMPONENTS = ("auroc", "auroc_ea", "auroc_ds", "calibration")
FIXED_COMPONENTS = ("rho_ce", "latency", "license", "goodhart")


@dataclass(frozen=True)
class TaskRows:
    """One entry's stored per-example results on one task."""

    test_ids: Sequence[str]
    test_labels: Sequence[int] | np.ndarray
    test_scores: Sequence[float] | np.ndarray
    test_probs: Sequence[float] | np.ndarray
    #: the base model's eval-awareness reference score r(x) by test row id; None: no reference
    #: probe (auroc_ea imputed) or an eval_awareness probe (n/a)
    ea_reference: Mapping[str, float] | None = None
    distshift_ids: Sequence[str] | None = None  # None: the task has no distshift split
    distshift_labels: Sequence[int] | np.ndarray | None = None
    distshift_scores: Sequence[float] | np.ndarray | None = None


@dataclass(frozen=True)
class BoardEntry:
    key: str  # what the caller identifies the entry by (a probe version id, a slug)
    tasks: Mapping[str, TaskRows]  # empty: held fixed (see the module docstring)
    #: the stored aggregate measurements; the fixed components (latency_ms, license, rho_ce,
    #: ea_not_applicable, auroc_ds_partial_note) are taken from here
    measurements: Measurements


@dataclass(frozen=True)
class RankInterval:
    key: str
    score: float  # ProbeScore on the rows as stored (the point estimate)
    score_ci: tuple[float, float]
    rank: int  # board rank of the point estimate (1 + entries strictly ahead)
    rank_ci: tuple[int, int]
    tied_for_first: bool
    tie_group: int  # 1, 2, ... in board order; adjacent entries that cannot be told apart share one

    def to_dict(self) -> dict:
        return {
            "score": self.score,
            "score_ci": list(self.score_ci),
            "rank": self.rank,
            "rank_ci": list(self.rank_ci),
            "tied_for_first": self.tied_for_first,
            "tie_group": self.tie_group,
        }


# --------------------------------------------------------------------------- row draws


def _row_groups(
    per_entry: dict[str, tuple[Sequence[str], Sequence[int] | np.ndarray]],
    *,
    seed: int,
    what: str,
    n_resamples: int,
) -> dict[str, tuple[list[str], int, np.ndarray]]:
    """entry key → (row ids, number of positives, draws) for the entries of one task split.

    Entries scored on the same set of rows (the normal case: a row id is the task's, whatever the
    base model) form one group and get the same draws: they are paired. An on-policy task's rows
    are generated per base model, so its entries on different models fall in different groups
    with their own draws (seeded by the rows themselves): they cannot be paired, and are not.
    """
    groups: dict[frozenset, list[str]] = {}
    for key, (ids, _) in per_entry.items():
        groups.setdefault(frozenset(ids), []).append(key)
    out = {}
    for members in groups.values():
        ids0, _ = per_entry[members[0]]
        labels: dict[str, int] = {}
        for key in members:
            ids, lab = per_entry[key]
            for i, y in zip(ids, np.asarray(lab).tolist(), strict=True):
                if labels.setdefault(i, int(y)) != int(y):
                    raise MetricInputError(f"{what}: row {i} has different labels for different entries")
        rows = list(ids0)
        y = np.array([labels[i] for i in rows], dtype=np.int64)
        if y.sum() < 1 or y.size - y.sum() < 1:
            raise MetricInputError(f"{what}: the rows do not hold both classes")
        digest = zlib.crc32("\n".join(sorted(rows)).encode())
        rng = np.random.default_rng([seed, zlib.crc32(what.encode()), digest])
        draws = _draws(y, rng, n_resamples)
        for key in members:
            out[key] = (rows, int(y.sum()), draws)
    return out


def _draws(y: np.ndarray, rng: np.random.Generator, n_resamples: int) -> np.ndarray:
    """Row indices, shape "B n": positives first (m of them), then the negatives, each drawn
    with replacement within its class. Row 0 is the identity (the rows as stored)."""
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    draws = np.empty((n_resamples + 1, y.size), dtype=np.int64)
    draws[0] = np.concatenate((pos, neg))
    draws[1:, : pos.size] = rng.choice(pos, (n_resamples, pos.size))
    draws[1:, pos.size :] = rng.choice(neg, (n_resamples, neg.size))
    return draws


# --------------------------------------------------------------------------- vectorised metrics


def _auroc_rows(s: np.ndarray, m: int) -> np.ndarray:
    """AUROC of each row of ``s`` ("B n", positives in the first ``m`` columns), ties ½."""
    from scipy.stats import rankdata

    n = s.shape[1] - m
    ranks = rankdata(s, axis=1)
    return (ranks[:, :m].sum(axis=1) - m * (m + 1) / 2.0) / (m * n)


def _ece_rows(p: np.ndarray, m: int) -> np.ndarray:
    """ECE (evaluator.metrics.metrics.ece) of each row: (1/N) Σ_bins |Σ labels − Σ probs|."""
    b, n = p.shape
    bins = np.minimum(np.floor(ECE_BINS * p).astype(np.int64), ECE_BINS - 1)
    flat = (np.arange(b)[:, None] * ECE_BINS + bins).ravel()
    y = np.zeros((b, n))
    y[:, :m] = 1.0
    sum_y = np.bincount(flat, weights=y.ravel(), minlength=b * ECE_BINS).reshape(b, ECE_BINS)
    sum_p = np.bincount(flat, weights=p.ravel(), minlength=b * ECE_BINS).reshape(b, ECE_BINS)
    return np.abs(sum_y - sum_p).sum(axis=1) / n


def _auroc_ea_rows(s: np.ndarray, r: np.ndarray, m: int) -> np.ndarray:
    """auroc_ea (evaluator.metrics.metrics.auroc_ea) of each row; NaN where no bin holds both classes.

    Per row: bins from the quintiles of that row's reference scores; the pairs inside a bin are
    counted with midranks of (bin, score) minus the rows of lower bins (Mann–Whitney per bin).
    """
    from scipy.stats import rankdata

    b, n = s.shape
    n_bins = len(EA_QUANTILES) + 1
    edges = np.quantile(r, EA_QUANTILES, axis=1).T  # "B 4"
    bins = (r[:, :, None] >= edges[:, None, :]).sum(axis=2)  # searchsorted(side="right")
    # order-preserving map of the scores into (0, 1), so bin + u sorts by bin, then score
    u = rankdata(s, axis=1) / (n + 1.0)
    within = rankdata(bins + u, axis=1)
    flat = (np.arange(b)[:, None] * n_bins + bins).ravel()
    is_pos = np.zeros((b, n))
    is_pos[:, :m] = 1.0
    count = np.bincount(flat, minlength=b * n_bins).reshape(b, n_bins)
    count_pos = np.bincount(flat, weights=is_pos.ravel(), minlength=b * n_bins).reshape(b, n_bins)
    below = np.cumsum(count, axis=1) - count  # rows in lower bins
    rank_in_bin = within - np.take_along_axis(below, bins, axis=1)
    numerator = (rank_in_bin * is_pos).sum(axis=1) - (count_pos * (count_pos + 1) / 2.0).sum(axis=1)
    denominator = (count_pos * (count - count_pos)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / np.maximum(denominator, 1), np.nan)


# --------------------------------------------------------------------------- the bootstrap


def _task_resamples(
    entries: Sequence[BoardEntry], task_id: str, *, n_resamples: int, seed: int
) -> dict[str, dict[str, np.ndarray]]:
    """entry key → {"auroc", "ece", "auroc_ea", "auroc_ds"}: "B+1" arrays (row 0 = as stored)."""
    on_task = [e for e in entries if task_id in e.tasks]
    test_groups = _row_groups(
        {e.key: (e.tasks[task_id].test_ids, e.tasks[task_id].test_labels) for e in on_task},
        seed=seed,
        what=f"task {task_id} test",
        n_resamples=n_resamples,
    )
    ds_groups = _row_groups(
        {
            e.key: (ds.distshift_ids, ds.distshift_labels)
            for e in on_task
            if (ds := e.tasks[task_id]).distshift_ids is not None and ds.distshift_labels is not None
        },
        seed=seed,
        what=f"task {task_id} distshift",
        n_resamples=n_resamples,
    )
    out = {}
    for e in on_task:
        rows = e.tasks[task_id]
        ids, m, draws = test_groups[e.key]
        position = {i: k for k, i in enumerate(rows.test_ids)}
        take = np.array([position[i] for i in ids])
        s = np.asarray(rows.test_scores, dtype=np.float64)[take][draws]
        p = np.asarray(rows.test_probs, dtype=np.float64)[take][draws]
        res = {"auroc": _auroc_rows(s, m), "ece": _ece_rows(p, m)}
        if rows.ea_reference is not None:
            missing = [i for i in ids if i not in rows.ea_reference]
            if missing:
                raise MetricInputError(
                    f"task {task_id}: reference scores missing for {len(missing)} row(s), e.g. {missing[0]}"
                )
            r = np.array([rows.ea_reference[i] for i in ids], dtype=np.float64)[draws]
            res["auroc_ea"] = _auroc_ea_rows(s, r, m)
        if e.key in ds_groups and rows.distshift_ids is not None:
            ds_ids, ds_m, ds_draws = ds_groups[e.key]
            ds_pos = {i: k for k, i in enumerate(rows.distshift_ids)}
            ds_take = np.array([ds_pos[i] for i in ds_ids])
            ds_s = np.asarray(rows.distshift_scores, dtype=np.float64)[ds_take][ds_draws]
            res["auroc_ds"] = _auroc_rows(ds_s, ds_m)
        out[e.key] = res
    return out


def _entry_measurements(
    entry: BoardEntry, per_task: list[dict[str, np.ndarray]], b: int, imputation: Mapping[str, float]
) -> Measurements:
    """Resample ``b``'s Measurements, aggregated as evaluator.metrics.measure.aggregate_measurements does."""
    m0 = entry.measurements
    aurocs = [t["auroc"][b] for t in per_task]
    auroc = float(np.mean(aurocs))
    auroc_ea = None
    if not m0.ea_not_applicable:
        ea = [t["auroc_ea"][b] if "auroc_ea" in t else np.nan for t in per_task]
        auroc_ea = None if np.isnan(ea).any() else float(np.mean(ea))
    if any("auroc_ds" in t for t in per_task):
        auroc_ds = float(
            np.mean(
                [
                    t["auroc_ds"][b] if "auroc_ds" in t else imputation["auroc_ds"] * a
                    for t, a in zip(per_task, aurocs, strict=True)
                ]
            )
        )
    else:
        auroc_ds = None
    ece = float(np.mean([t["ece"][b] for t in per_task]))
    return dataclasses.replace(m0, auroc=auroc, auroc_ea=auroc_ea, auroc_ds=auroc_ds, ece=ece)


def board_rank_intervals(
    entries: Sequence[BoardEntry],
    *,
    spec: WeightsSpec,
    licenses: Mapping[str, LicenseSpec],
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> list[RankInterval]:
    """Rank intervals and tie groups of one board, in board order (see the module docstring)."""
    if not entries:
        return []
    if len({e.key for e in entries}) != len(entries):
        raise MetricInputError("board entries must have distinct keys")
    task_ids = sorted({t for e in entries for t in e.tasks})
    resampled = {t: _task_resamples(entries, t, n_resamples=n_resamples, seed=seed) for t in task_ids}

    n_draws = n_resamples + 1  # draw 0 is the rows as stored
    totals = np.empty((n_draws, len(entries)))
    keys = np.empty((n_draws, len(entries)))
    licenses = dict(licenses)
    for k, e in enumerate(entries):
        if not e.tasks:  # no stored rows: held at its stored measurements in every resample
            score = probe_score(e.measurements, spec=spec, licenses=licenses)
            totals[:, k] = score.total
            keys[:, k] = ranking_key(score.total, score.components["license"].contribution)[0]
            continue
        per_task = [resampled[t][e.key] for t in sorted(e.tasks)]
        for b in range(n_draws):
            score = probe_score(
                _entry_measurements(e, per_task, b, spec.imputation), spec=spec, licenses=licenses
            )
            totals[b, k] = score.total
            keys[b, k] = ranking_key(score.total, score.components["license"].contribution)[0]

    # board order: the norm-2 key of the point estimate, then the total, then the given order
    order = sorted(range(len(entries)), key=lambda k: (-keys[0, k], -totals[0, k], k))
    ranks = _competition_ranks(keys)  # "B+1 E"
    alpha = (1 - level) / 2
    boot_totals, boot_ranks, boot_keys = totals[1:], ranks[1:], keys[1:]
    score_lo, score_hi = np.quantile(boot_totals, [alpha, 1 - alpha], axis=0)
    rank_lo = np.quantile(boot_ranks, alpha, axis=0, method="lower")
    rank_hi = np.quantile(boot_ranks, 1 - alpha, axis=0, method="higher")

    groups = {order[0]: 1}
    for above, below in zip(order, order[1:], strict=False):
        diff_lo, diff_hi = np.quantile(boot_keys[:, above] - boot_keys[:, below], [alpha, 1 - alpha])
        separable = diff_lo > 0 or diff_hi < 0
        groups[below] = groups[above] + 1 if separable else groups[above]

    # "tied for first" needs company: a lone entry whose interval includes 1 is simply first
    tied_first = rank_lo == 1 if int((rank_lo == 1).sum()) > 1 else np.zeros(len(entries), dtype=bool)
    return [
        RankInterval(
            key=entries[k].key,
            score=float(totals[0, k]),
            score_ci=(float(score_lo[k]), float(score_hi[k])),
            rank=int(ranks[0, k]),
            rank_ci=(int(rank_lo[k]), int(rank_hi[k])),
            tied_for_first=bool(tied_first[k]),
            tie_group=groups[k],
        )
        for k in order
    ]


def _competition_ranks(keys: np.ndarray) -> np.ndarray:
    """Per row: 1 + the number of entries with a strictly higher key ("1224" ranking)."""
    ranks = np.empty(keys.shape, dtype=np.int64)
    n = keys.shape[1]
    for b in range(keys.shape[0]):
        ascending = np.sort(keys[b])
        ranks[b] = 1 + n - np.searchsorted(ascending, keys[b], side="right")
    return ranks
