"""Metrics from stored per-example scores: what the web side needs, with no model code.

A run's stored result is its per-example scores (:class:`ScoredExamples`); everything here is
computed from those alone, so the leaderboard re-scores every entry without loading a model:

- :func:`task_metrics` — stored per-example results → AUROC + CI, auroc_ea, auroc_ds, ECE, Brier,
  recall@1%FPR, ROC points, reliability bins.
- :func:`aggregate_measurements` — means over tasks → the aggregate and ``scoring.Measurements``.
- :func:`declared_gaps` — declared vs measured, flagged over :data:`DECLARED_GAP`.

Imports numpy and the pure evaluator modules only (``evaluator.metrics.metrics``, ``evaluator.metrics.scoring``);
model running lives in :mod:`evaluator.axes.evaluate`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from evaluator.errors import MetricInputError
from evaluator.metrics import metric_table
from evaluator.metrics import metrics as m
from evaluator.metrics.metric_table import DECLARED_GAP, OPERATING_FPR
from evaluator.metrics.results import fields_dict
from evaluator.metrics.scoring import Measurements


class ExampleRecord(NamedTuple):
    """One stored per-example result, an item of a run's ``example_scores``:
    ``{"id", "label", "score", "prob"}`` (``prob`` may be missing from a stored row: None). The one
    place a stored row is decoded; :meth:`ScoredExamples.from_records` reads a run's rows through it."""

    id: str
    label: int  # 0/1
    score: float  # s(x)
    prob: float | None  # p(x)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> ExampleRecord:
        prob = row.get("prob")
        return cls(
            str(row["id"]), int(row["label"]), float(row["score"]), None if prob is None else float(prob)
        )

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "score": self.score, "prob": self.prob}


def example_records(rows: Iterable[Mapping[str, Any]]) -> list[ExampleRecord]:
    """A run's stored ``example_scores``, decoded."""
    return [ExampleRecord.from_dict(row) for row in rows]


@dataclass
class ScoredExamples:
    """Per-example results of one run: what the leaderboard stores."""

    ids: list[str]
    labels: np.ndarray  # "n" 0/1
    scores: np.ndarray  # "n" s(x)
    probs: np.ndarray  # "n" p(x)

    def to_records(self) -> list[dict[str, Any]]:
        """``[{"id", "label", "score", "prob"}]`` (docs/ARCHITECTURE.md, :class:`ExampleRecord`)."""
        return [
            ExampleRecord(i, int(y), float(s), float(p)).to_dict()
            for i, y, s, p in zip(self.ids, self.labels, self.scores, self.probs, strict=True)
        ]

    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]]) -> ScoredExamples:
        """A run's stored ``example_scores`` (every row with its ``prob``)."""
        rows = example_records(records)
        if any(r.prob is None for r in rows):
            raise MetricInputError("a stored per-example row has no prob")
        return cls(
            ids=[r.id for r in rows],
            labels=np.array([r.label for r in rows], dtype=np.int64),
            scores=np.array([r.score for r in rows]),
            probs=np.array([r.prob for r in rows]),
        )

    def scores_by_id(self) -> dict[str, float]:
        return dict(zip(self.ids, self.scores.tolist(), strict=True))


@dataclass
class TaskMetrics:
    """Every per-task number of docs/METHODOLOGY.md for one probe on one task."""

    task_id: str
    n_test: int
    auroc: float
    auroc_ci: tuple[float, float]  # 95% percentile bootstrap, fixed seed
    auroc_ea: float | None  # None when n/a or imputed (see auroc_ea_status)
    auroc_ea_status: str  # "measured" | "imputed" (no reference probe) | "n/a" (eval_awareness probe)
    auroc_ds: float  # measured on distshift, or imputed (factor × auroc)
    auroc_ds_imputed: bool
    n_distshift: int
    ece: float
    brier: float
    recall_at_1pct_fpr: float | None  # threshold fixed on the train split's negatives
    threshold_1pct_fpr: float | None
    roc_points: list[tuple[float, float]]
    reliability: list[dict[str, Any]]
    #: the test split's false-positive rate at that train-fixed threshold (near 1% when the test
    #: negatives look like the train ones): with recall, the operating point
    fpr_at_1pct_threshold: float | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return fields_dict(self)


def task_metrics(
    *,
    task_id: str,
    test: ScoredExamples,
    distshift: ScoredExamples | None = None,
    ea_reference: Mapping[str, float] | None = None,
    train_negative_scores: Sequence[float] | np.ndarray | None = None,
    ea_applicable: bool = True,
    imputation: Mapping[str, float],
) -> TaskMetrics:
    """Per-task metrics from stored per-example results; no model involved.

    ``ea_reference``: the eval-awareness reference probe's scores r(x) by test id (must cover
    every test id). ``train_negative_scores``: s(x) on the train split's negatives, which fix
    the 1%-FPR threshold. ``imputation``: the weights spec's factors (``spec.imputation``).
    """
    notes: list[str] = []
    auroc = m.auroc(test.scores, test.labels)
    ci = m.auroc_ci(test.scores, test.labels)

    auroc_ea: float | None = None
    if not ea_applicable:
        ea_status = "n/a"
    elif ea_reference is None:
        ea_status = "imputed"
        notes.append("no eval-awareness reference probe for this base model: auroc_ea imputed")
    else:
        missing = [i for i in test.ids if i not in ea_reference]
        if missing:
            raise MetricInputError(
                f"reference scores missing for {len(missing)} test id(s), e.g. {missing[0]}"
            )
        ref = np.array([ea_reference[i] for i in test.ids])
        try:
            auroc_ea, ea_status = m.auroc_ea(test.scores, test.labels, ref), "measured"
        except MetricInputError as exc:
            ea_status = "imputed"
            notes.append(f"auroc_ea undefined ({exc}): imputed")

    if distshift is not None:
        auroc_ds, ds_imputed, n_ds = m.auroc(distshift.scores, distshift.labels), False, len(distshift.ids)
    else:
        auroc_ds, ds_imputed, n_ds = imputation["auroc_ds"] * auroc, True, 0
        notes.append(f"no distshift split: auroc_ds imputed as {imputation['auroc_ds']} × auroc")

    recall = threshold = test_fpr = None
    if train_negative_scores is not None and len(train_negative_scores) > 0:
        threshold = m.threshold_at_fpr(train_negative_scores, OPERATING_FPR)
        recall = m.recall_at_fpr(test.scores, test.labels, threshold)
        test_fpr = m.fpr_at_threshold(test.scores, test.labels, threshold)

    return TaskMetrics(
        task_id=task_id,
        n_test=len(test.ids),
        auroc=auroc,
        auroc_ci=ci,
        auroc_ea=auroc_ea,
        auroc_ea_status=ea_status,
        auroc_ds=auroc_ds,
        auroc_ds_imputed=ds_imputed,
        n_distshift=n_ds,
        ece=m.ece(test.probs, test.labels),
        brier=m.brier(test.probs, test.labels),
        recall_at_1pct_fpr=recall,
        threshold_1pct_fpr=threshold,
        fpr_at_1pct_threshold=test_fpr,
        roc_points=m.roc_curve_points(test.scores, test.labels),
        reliability=m.reliability_bins(test.probs, test.labels),
        notes=notes,
    )


def aggregate_measurements(
    metrics: Sequence[TaskMetrics],
    *,
    lifts: Sequence[Mapping[str, Any]],
    latency_ms: float,
    license_id: str,
    transfer_pearsons: Sequence[float] | None,
    has_recipe: bool,
    ea_applicable: bool,
    has_reference: bool,
    imputation: Mapping[str, float],
    did_transfer: bool = True,
    goodhart: float | None = None,
    goodhart_note: str = "the attack was not run",
):
    """Means over tasks → (aggregate dict, imputed reasons, scoring.Measurements).

    Pure: the pipeline calls it with metrics recomputed from stored per-example scores, the CLI
    with freshly measured ones; both get the same numbers. ``lifts``: BaselineResult dicts.
    ``transfer_pearsons``: one Pearson per target model (None: not measured). ``goodhart``: the
    Goodhart resistance from the robustness runs (None: not measured, for ``goodhart_note``).
    """
    imputed: dict[str, str] = {}
    auroc = float(np.mean([m.auroc for m in metrics]))
    ea_values = [m.auroc_ea for m in metrics if m.auroc_ea is not None]
    auroc_ea = None
    if ea_applicable and len(ea_values) == len(metrics):
        auroc_ea = float(np.mean(ea_values))
    elif ea_applicable:
        imputed["auroc_ea"] = (
            "no eval-awareness reference probe for this base model"
            if not has_reference
            else "auroc_ea undefined on some task"
        )
    ds_imputed = [m.task_id for m in metrics if m.auroc_ds_imputed]
    partial_note = ""
    if len(ds_imputed) == len(metrics):
        auroc_ds = None  # probe_score imputes factor × raw AUROC and flags it
        imputed["auroc_ds"] = "no task has a distshift split"
    else:
        auroc_ds = float(np.mean([m.auroc_ds for m in metrics]))
        if ds_imputed:
            partial_note = (
                f"partially imputed ({imputation['auroc_ds']} × AUROC) for tasks without a"
                f" distshift split: {', '.join(ds_imputed)}"
            )
            imputed["auroc_ds"] = partial_note
    rho = float(np.mean([max(0.0, p) for p in transfer_pearsons])) if transfer_pearsons else None
    if rho is None:
        imputed["rho_ce"] = (
            "no usable recipe: the probe cannot be re-fit on other base models"
            if not has_recipe
            else "transfer not computed"
            if not did_transfer
            else "no other base model"
        )
    recalls = [m.recall_at_1pct_fpr for m in metrics if m.recall_at_1pct_fpr is not None]
    test_fprs = [m.fpr_at_1pct_threshold for m in metrics if m.fpr_at_1pct_threshold is not None]
    measurements = Measurements(
        auroc=auroc,
        ece=float(np.mean([m.ece for m in metrics])),
        latency_ms=latency_ms,
        license=license_id,
        auroc_ea=auroc_ea,
        auroc_ds=auroc_ds,
        rho_ce=rho,
        ea_not_applicable=not ea_applicable,
        auroc_ds_partial_note=partial_note,
        goodhart=goodhart,
        goodhart_note="" if goodhart is not None else goodhart_note,
    )
    if goodhart is None:
        imputed["goodhart"] = goodhart_note
    keys = ("auroc", "auroc_ea", "auroc_ds", "ece", "rho_ce", "latency_ms", "license", "ea_not_applicable")
    aggregate = {
        **{k: getattr(measurements, k) for k in keys},
        "brier": float(np.mean([m.brier for m in metrics])),
        "recall_at_1pct_fpr": float(np.mean(recalls)) if recalls else None,
        "fpr_at_1pct_threshold": float(np.mean(test_fprs)) if test_fprs else None,
        "n_tasks": len(metrics),
        "n_test": int(sum(m.n_test for m in metrics)),
        "lift_over_random": float(np.mean([b["lift_over_random"] for b in lifts])) if lifts else None,
        "lift_over_diff_of_means": float(np.mean([b["lift_over_diff_of_means"] for b in lifts]))
        if lifts
        else None,
    }
    return aggregate, imputed, measurements


def declared_gaps(declared: Mapping[str, float], aggregate: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each declared metric the metric table compares, next to the measured one (the mean over
    tasks in ``aggregate``), flagged when they differ by more than :data:`DECLARED_GAP`."""
    compared = metric_table.compared_names()
    gaps = {}
    for name, value in declared.items():
        if name not in compared:
            continue
        measured = aggregate.get(name)
        if isinstance(measured, (int, float)) and not isinstance(measured, bool):
            gap = float(measured) - float(value)
            gaps[name] = {
                "declared": value,
                "measured": measured,
                "gap": gap,
                "flagged": abs(gap) > DECLARED_GAP,
            }
    return gaps
