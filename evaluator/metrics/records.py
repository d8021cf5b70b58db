"""The stored score as typed records: what the score writer stores, and how it is read back.

A Score row holds the ProbeScore (``total``, ``measured_total``, ``components``), the aggregate
measurements (``measurements``: means over tasks and the axes beside them), the per-task results
(``per_task``: task id → :class:`TaskRecord`), the protocol and the environment. The shape is
committed as a JSON Schema (``evaluator/schemas/score.schema.json``); ``python -m evaluator
evaluate --json`` has its own (``evaluator/schemas/evaluation.schema.json``). Both are checked
by ``tests/evaluator/test_records.py``.

:meth:`TaskRecord.from_json` also reads the evaluator's own spellings of a task's results
(``roc_points``, ``auroc_ea_status``, a ``metrics`` block, ``BaselineResult`` names such as
``random_direction_auroc`` and ``lift_over_random``), so a result written either way reads the
same. :meth:`ScoreRecord.scoring_input` rebuilds the :class:`evaluator.metrics.scoring.Measurements` a
stored score was computed from (the rank intervals re-score from it).

Pure: no Django.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.metrics.compare import mean_delta_ci
from evaluator.metrics.measure import TaskMetrics
from evaluator.metrics.metrics import auroc_mean_ci
from evaluator.metrics.scoring import Measurements

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
#: Score.measurements key of the mean over tasks of (probe test AUROC − strongest text baseline's)
LIFT_OVER_TEXT_KEY = "lift_over_text"
#: Score.measurements key of that mean's 95% interval (evaluator.metrics.compare.mean_delta_ci)
LIFT_OVER_TEXT_CI_KEY = "lift_over_text_ci"
#: Score.measurements keys of the mean over tasks of the confound-controlled AUROC (what the probe
#: adds over the text controls, evaluator.axes.text_baselines.controlled_auroc) and its interval
CONTROLLED_AUROC_KEY = "controlled_auroc"
CONTROLLED_AUROC_CI_KEY = "controlled_auroc_ci"


@cache
def schema(name: str) -> dict[str, Any]:
    """A committed JSON Schema: ``score`` (a stored score) or ``evaluation`` (the evaluate CLI)."""
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def _number(value: Any) -> float | None:
    """A stored number as it is (an int stays an int: the JSON is written back byte for byte)."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_number(v) is not None for v in value):
        return value[0], value[1]
    return None


@dataclass(frozen=True)
class TaskRecord:
    """One task's stored results (``Score.per_task[task]``): the per-task metrics, the strongest
    text-only baseline on the test rows and the lift over it (with DeLong's paired interval), and
    the automatic baselines at the probe's layer."""

    metrics: TaskMetrics
    text_baseline: str | None = None  # the panel member (evaluator.axes.text_baselines.strongest)
    text_baseline_auroc: float | None = None
    lift_over_text: float | None = None
    lift_over_text_ci: tuple[float, float] | None = None
    #: AUROC added by the probe over the text controls (cross-fitted on test), and its interval
    controlled_auroc: float | None = None
    controlled_auroc_ci: tuple[float, float] | None = None
    random_direction: float | None = None
    diff_of_means: float | None = None
    lift_random_direction: float | None = None
    lift_diff_of_means: float | None = None

    @classmethod
    def measured(
        cls,
        metrics: TaskMetrics,
        *,
        text: Mapping[str, Any] | None,
        baselines: Mapping[str, Any] | None,
        controlled: Mapping[str, Any] | None = None,
    ) -> TaskRecord:
        """From freshly computed metrics, the lift over the task's strongest text baseline
        (:func:`evaluator.axes.text_baselines.text_lift`; None: no panel committed), the controlled
        AUROC (:func:`evaluator.axes.text_baselines.controlled_auroc`) and the test run's
        ``BaselineResult`` dict (None: none)."""
        b = baselines or {}
        t = text or {}
        c = controlled or {}
        return cls(
            metrics=metrics,
            text_baseline=t.get("name"),
            text_baseline_auroc=t.get("auroc"),
            lift_over_text=t.get("lift"),
            lift_over_text_ci=_pair(t.get("ci")),
            controlled_auroc=c.get("delta"),
            controlled_auroc_ci=_pair(c.get("ci")),
            random_direction=b.get("random_direction_auroc"),
            diff_of_means=b.get("diff_of_means_auroc"),
            lift_random_direction=b.get("lift_over_random"),
            lift_diff_of_means=b.get("lift_over_diff_of_means"),
        )

    def to_json(self) -> dict[str, Any]:
        d = self.metrics.to_dict()
        d["text_baseline"] = {"name": self.text_baseline, "auroc": self.text_baseline_auroc}
        d["lift_over_text"] = self.lift_over_text
        d["lift_over_text_ci"] = None if self.lift_over_text_ci is None else list(self.lift_over_text_ci)
        d["controlled_auroc"] = self.controlled_auroc
        d["controlled_auroc_ci"] = (
            None if self.controlled_auroc_ci is None else list(self.controlled_auroc_ci)
        )
        d["roc"] = d.pop("roc_points")
        d["auroc_ea_imputed"] = d["auroc_ea_status"] == "imputed"
        d["baselines"] = {"random_direction": self.random_direction, "diff_of_means": self.diff_of_means}
        d["lift"] = {"random_direction": self.lift_random_direction, "diff_of_means": self.lift_diff_of_means}
        return d

    @classmethod
    def from_json(cls, raw: Mapping[str, Any] | None, *, task_id: str = "") -> TaskRecord:
        """A stored task result, in the stored spelling or the evaluator's (see the module);
        a missing number reads as None."""
        raw = raw or {}
        nested = raw.get("metrics")
        metrics: Mapping[str, Any] = nested if isinstance(nested, Mapping) else raw
        ea_status = metrics.get("auroc_ea_status")
        if ea_status is None:
            if metrics.get("auroc_ea_imputed"):
                ea_status = "imputed"
            else:
                ea_status = "measured" if _number(metrics.get("auroc_ea")) is not None else "n/a"
        roc = metrics.get("roc", metrics.get("roc_points")) or []
        # a stored row may lack a number the dataclass types as present: it reads as None
        fields: dict[str, Any] = {
            "task_id": str(metrics.get("task_id") or raw.get("task_id") or task_id),
            "n_test": metrics.get("n_test"),
            "auroc": _number(metrics.get("auroc")),
            "auroc_ci": _pair(metrics.get("auroc_ci")),
            "auroc_ea": _number(metrics.get("auroc_ea")),
            "auroc_ea_status": ea_status,
            "auroc_ds": _number(metrics.get("auroc_ds")),
            "auroc_ds_imputed": bool(metrics.get("auroc_ds_imputed", False)),
            "n_distshift": metrics.get("n_distshift", 0),
            "ece": _number(metrics.get("ece")),
            "brier": _number(metrics.get("brier")),
            "recall_at_1pct_fpr": _number(metrics.get("recall_at_1pct_fpr")),
            "threshold_1pct_fpr": _number(metrics.get("threshold_1pct_fpr")),
            "roc_points": [tuple(point) for point in roc],
            "reliability": list(metrics.get("reliability") or []),
            "fpr_at_1pct_threshold": _number(metrics.get("fpr_at_1pct_threshold")),
            "notes": list(metrics.get("notes") or []),
        }
        tm = TaskMetrics(**fields)
        base = raw.get("baselines") or {}
        lift = raw.get("lift") or {}
        if not lift and base:  # the evaluator's BaselineResult carries the lifts
            lift = {
                "random_direction": base.get("lift_over_random"),
                "diff_of_means": base.get("lift_over_diff_of_means"),
            }
        text = metrics.get("text_baseline") or {}
        if "bow" in text:  # scored before the panel: the lift was over a bag of words
            text = {"name": "bag_of_words", "auroc": text["bow"]}
        return cls(
            metrics=tm,
            text_baseline=text.get("name") if isinstance(text.get("name"), str) else None,
            text_baseline_auroc=_number(text.get("auroc")),
            lift_over_text=_number(metrics.get("lift_over_text")),
            lift_over_text_ci=_pair(metrics.get("lift_over_text_ci")),
            controlled_auroc=_number(metrics.get("controlled_auroc")),
            controlled_auroc_ci=_pair(metrics.get("controlled_auroc_ci")),
            random_direction=_number(base.get("random_direction", base.get("random_direction_auroc"))),
            diff_of_means=_number(base.get("diff_of_means", base.get("diff_of_means_auroc"))),
            lift_random_direction=_number(lift.get("random_direction")),
            lift_diff_of_means=_number(lift.get("diff_of_means")),
        )


def aggregate_stored(
    aggregate: Mapping[str, Any],
    *,
    tests: Sequence[tuple[np.ndarray, np.ndarray]],
    lifts_over_text: Sequence[tuple[float, tuple[float, float] | None]],
    controlled: Sequence[tuple[float, tuple[float, float] | None]] = (),
    not_measured_on_policy: Sequence[str],
    latency: Mapping[str, Any],
    transfer: Mapping[str, float | None],
    steer: Mapping[str, Any],
    imputed: Mapping[str, str],
    stress: Mapping[str, Any] | None = None,
    robustness: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``Score.measurements``: the aggregate of :func:`evaluator.metrics.measure.aggregate_measurements`
    with what the board keeps beside it: the interval on the mean AUROC (``tests``: each task's
    test scores and labels), the mean lift over text (``lifts_over_text``: each task's lift and its
    interval) and the mean controlled AUROC (``controlled``, likewise), each with its interval (None
    unless every task has one), the on-policy tasks this base model has no
    behaviour on, the latency's device and model forward, ρ per transfer target, direction
    utility, the stress axis (:func:`evaluator.axes.stress.stress_summary`), the robustness axis
    (:func:`evaluator.axes.attack.robustness_summary`), and why each imputed
    component was imputed."""

    out = dict(aggregate)
    out["auroc_ci"] = list(auroc_mean_ci(list(tests)))

    for key, ci_key, values in (
        (LIFT_OVER_TEXT_KEY, LIFT_OVER_TEXT_CI_KEY, lifts_over_text),
        (CONTROLLED_AUROC_KEY, CONTROLLED_AUROC_CI_KEY, controlled),
    ):
        out[key] = float(np.mean([v for v, _ in values])) if values else None
        with_ci = [(v, ci) for v, ci in values if ci is not None]
        ci = mean_delta_ci(with_ci) if with_ci and len(with_ci) == len(values) else None
        out[ci_key] = None if ci is None else list(ci)
    out["not_measured_on_policy"] = sorted(not_measured_on_policy)
    return {
        **out,
        "latency_device": latency.get("device"),
        "model_forward_ms": latency.get("model_forward_ms"),
        "transfer": dict(transfer),
        **steer,
        **(stress or {}),
        **(robustness or {}),
        "imputed": dict(imputed),
    }


@dataclass(frozen=True)
class ScoreRecord:
    """A stored score: one Score row's JSON columns and numbers."""

    total: float
    measured_total: float | None
    components: dict[str, Any]
    measurements: dict[str, Any]
    per_task: dict[str, TaskRecord]
    protocol: str = ""
    environment: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "measured_total": self.measured_total,
            "components": self.components,
            "measurements": self.measurements,
            "per_task": {task: record.to_json() for task, record in self.per_task.items()},
            "protocol": self.protocol,
            "environment": self.environment,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScoreRecord:
        return cls(
            total=data["total"],
            measured_total=data.get("measured_total"),
            components=dict(data.get("components") or {}),
            measurements=dict(data.get("measurements") or {}),
            per_task={t: TaskRecord.from_json(r, task_id=t) for t, r in (data.get("per_task") or {}).items()},
            protocol=data.get("protocol") or "",
            environment=dict(data.get("environment") or {}),
        )

    def scoring_input(self, *, license_id: str = "") -> Measurements:
        return measurements_from_stored(self.measurements, license_id=license_id)


def measurements_from_stored(m: Mapping[str, Any], *, license_id: str = "") -> Measurements:
    """The :class:`Measurements` a stored ``Score.measurements`` was scored from (``license_id``:
    the version's, for a score stored without one). A partly imputed auroc_ds keeps its note."""
    imputed = m.get("imputed") or {}
    note = imputed.get("auroc_ds", "") if m.get("auroc_ds") is not None else ""
    return Measurements(
        auroc=m["auroc"],
        ece=m["ece"],
        latency_ms=m["latency_ms"],
        license=m.get("license") or license_id,
        auroc_ea=m.get("auroc_ea"),
        auroc_ds=m.get("auroc_ds"),
        rho_ce=m.get("rho_ce"),
        ea_not_applicable=bool(m.get("ea_not_applicable")),
        auroc_ds_partial_note=note,
        goodhart=m.get("goodhart_resistance"),
        goodhart_note="" if m.get("goodhart_resistance") is not None else imputed.get("goodhart", ""),
    )
