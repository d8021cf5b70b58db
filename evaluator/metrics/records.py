"""The stored score as typed records: what the score writer stores, and how it is read back.

A Score row holds the ProbeScore (``total``, ``measured_total``, ``components``), the aggregate
measurements (``measurements``: :class:`AggregateRecord`, the means over tasks and one sub-record per
axis beside them), the per-task results (``per_task``: task id → :class:`TaskRecord`), the protocol
and the environment. The shape is committed as a JSON Schema
(``evaluator/schemas/score.schema.json``), whose ``measurements`` part is generated from
:class:`AggregateRecord` by ``python -m evaluator.metrics.records_schema``; ``python -m evaluator
evaluate --json`` has its own (``evaluator/schemas/evaluation.schema.json``). Both are checked by
``tests/evaluator/test_records.py`` and ``tests/evaluator/test_records_schema.py``.

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
from dataclasses import MISSING, Field, dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, TypeVar, get_args, get_type_hints

import numpy as np

from evaluator.metrics.breakdown import KINDS as BREAKDOWN_KINDS
from evaluator.metrics.breakdown import GroupResult
from evaluator.metrics.compare import mean_delta_ci
from evaluator.metrics.in_domain import IN_DOMAIN_TASKS_KEY, split_keys
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
    #: the test results by the rows' domain and by their source (evaluator.metrics.breakdown);
    #: empty when the split file names none, or for a record stored before the breakdown existed
    by_domain: dict[str, GroupResult] = field(default_factory=dict)
    by_source: dict[str, GroupResult] = field(default_factory=dict)
    #: one of the tasks the probe was trained on (evaluator.metrics.in_domain.in_domain_tasks); None:
    #: the probe declares none, or the record was stored before the split existed
    in_domain: bool | None = None

    @classmethod
    def measured(
        cls,
        metrics: TaskMetrics,
        *,
        text: Mapping[str, Any] | None,
        baselines: Mapping[str, Any] | None,
        controlled: Mapping[str, Any] | None = None,
        by_group: Mapping[str, Mapping[str, GroupResult]] | None = None,
    ) -> TaskRecord:
        """From freshly computed metrics, the lift over the task's strongest text baseline
        (:func:`evaluator.axes.text_baselines.text_lift`; None: no panel committed), the controlled
        AUROC (:func:`evaluator.axes.text_baselines.controlled_auroc`) and the test run's
        ``BaselineResult`` dict (None: none); ``by_group``: kind → group → its results
        (:func:`evaluator.metrics.breakdown.breakdowns`; None: none)."""
        b = baselines or {}
        g = by_group or {}
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
            by_domain=dict(g.get("domain") or {}),
            by_source=dict(g.get("source") or {}),
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
        d["by_domain"] = {group: r.to_json() for group, r in self.by_domain.items()}
        d["by_source"] = {group: r.to_json() for group, r in self.by_source.items()}
        d["in_domain"] = self.in_domain
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
            in_domain=_flag(raw.get("in_domain", metrics.get("in_domain"))),
            **{
                f"by_{kind}": _groups(raw.get(f"by_{kind}", metrics.get(f"by_{kind}")))
                for kind in BREAKDOWN_KINDS
            },
        )


def _flag(value: Any) -> bool | None:
    """A stored true/false, anything else (absent: stored before it) as None."""
    return value if isinstance(value, bool) else None


def _groups(raw: Any) -> dict[str, GroupResult]:
    """A stored breakdown (group → its results); anything else (absent: scored before it) reads as empty."""
    if not isinstance(raw, Mapping):
        return {}
    # in sorted order, as the breakdown writes them (a JSONB column does not keep the key order)
    return {str(k): GroupResult.from_json(v) for k, v in sorted(raw.items()) if isinstance(v, Mapping)}


def describe(description: str, *, key: str = "", schema: Mapping[str, Any] | None = None, **kw: Any) -> Any:
    """A record field with its description, its stored key when that is not the field's name, and
    JSON Schema constraints beyond its type (read by ``evaluator.metrics.records_schema``)."""
    return field(metadata={"description": description, "key": key, "schema": dict(schema or {})}, **kw)


def stored_key(f: Field[Any]) -> str:
    """The key a record field is stored under."""
    return f.metadata.get("key") or f.name


R = TypeVar("R", bound="SubRecord")


@dataclass(frozen=True)
class SubRecord:
    """One group of ``Score.measurements`` keys, stored flat beside the others: each field is one
    key (:func:`stored_key`), in field order."""

    def to_json(self) -> dict[str, Any]:
        return {stored_key(f): getattr(self, f.name) for f in fields(self)}

    @classmethod
    def stored_keys(cls) -> list[str]:
        return [stored_key(f) for f in fields(cls)]

    @classmethod
    def from_keys(cls: type[R], data: Mapping[str, Any], *, strict: bool = False) -> R:
        """The sub-record of ``data``'s keys. ``strict``: as an axis summary hands it over, every key
        present and no other; else as stored, a missing key reading as None (or empty)."""
        if strict:
            unknown = sorted(set(data) - set(cls.stored_keys()))
            missing = [k for k in cls.stored_keys() if k not in data]
            if unknown or missing:
                raise ValueError(f"{cls.__name__}: unknown keys {unknown}, missing keys {missing}")
        values = {}
        for f in fields(cls):
            value = data.get(stored_key(f))
            if value is None and not strict and f.default_factory is not MISSING:
                value = f.default_factory()
            values[f.name] = value
        return cls(**values)


@dataclass(frozen=True)
class IntervalsRecord(SubRecord):
    """The means over tasks shown with a 95% interval beside the ProbeScore."""

    auroc_ci: list[float] = describe(
        "95% interval of the mean test AUROC (evaluator.metrics.metrics.auroc_mean_ci)",
        schema={"minItems": 2, "maxItems": 2},
    )
    lift_over_text: float | None = describe(
        "mean over tasks of the test AUROC minus the strongest text baseline's (None: no task has a panel)"
    )
    lift_over_text_ci: list[float] | None = describe(
        "its 95% interval (evaluator.metrics.compare.mean_delta_ci; None unless every task has one)",
        schema={"minItems": 2, "maxItems": 2},
    )
    controlled_auroc: float | None = describe(
        "mean over tasks of the AUROC the probe adds over the text controls"
        " (evaluator.axes.text_baselines.controlled_auroc)"
    )
    controlled_auroc_ci: list[float] | None = describe(
        "its 95% interval (None unless every task has one)", schema={"minItems": 2, "maxItems": 2}
    )
    auroc_in_domain: float | None = describe(
        "mean of the test AUROC over the tasks the probe was trained on"
        " (evaluator.metrics.in_domain; None: not declared, or no such task)"
    )
    auroc_in_domain_ci: list[float] | None = describe(
        "its 95% interval (evaluator.metrics.metrics.auroc_mean_ci)", schema={"minItems": 2, "maxItems": 2}
    )
    auroc_cross_domain: float | None = describe(
        "mean of the test AUROC over its other scored tasks"
        " (evaluator.metrics.in_domain; None: not declared, or no such task)"
    )
    auroc_cross_domain_ci: list[float] | None = describe(
        "its 95% interval (evaluator.metrics.metrics.auroc_mean_ci)", schema={"minItems": 2, "maxItems": 2}
    )
    lift_over_text_in_domain: float | None = describe(
        "mean of the lift over text over the tasks the probe was trained on"
        " (evaluator.metrics.in_domain; None: not declared, or no such task with a value)"
    )
    lift_over_text_in_domain_ci: list[float] | None = describe(
        "its 95% interval (evaluator.metrics.compare.mean_delta_ci; None unless every task has one)",
        schema={"minItems": 2, "maxItems": 2},
    )
    lift_over_text_cross_domain: float | None = describe(
        "mean of the lift over text over its other scored tasks"
        " (evaluator.metrics.in_domain; None: not declared, or no such task with a value)"
    )
    lift_over_text_cross_domain_ci: list[float] | None = describe(
        "its 95% interval (evaluator.metrics.compare.mean_delta_ci; None unless every task has one)",
        schema={"minItems": 2, "maxItems": 2},
    )
    controlled_auroc_in_domain: float | None = describe(
        "mean of the controlled AUROC over the tasks the probe was trained on"
        " (evaluator.metrics.in_domain; None: not declared, or no such task with a value)"
    )
    controlled_auroc_in_domain_ci: list[float] | None = describe(
        "its 95% interval (mean_delta_ci; None unless every task has one)",
        schema={"minItems": 2, "maxItems": 2},
    )
    controlled_auroc_cross_domain: float | None = describe(
        "mean of the controlled AUROC over its other scored tasks"
        " (evaluator.metrics.in_domain; None: not declared, or no such task with a value)"
    )
    controlled_auroc_cross_domain_ci: list[float] | None = describe(
        "its 95% interval (mean_delta_ci; None unless every task has one)",
        schema={"minItems": 2, "maxItems": 2},
    )
    in_domain_tasks: list[str] | None = describe(
        "the scored tasks counted in-domain (None: the probe declares no training task)"
    )


@dataclass(frozen=True)
class LatencyRecord(SubRecord):
    """Where the latency was measured (the probe's own time is ``latency_ms``)."""

    device: str | None = describe("the device the latency was measured on", key="latency_device")
    model_forward_ms: float | None = describe("the base model's forward pass on that device, in ms")


@dataclass(frozen=True)
class TransferRecord(SubRecord):
    """The transfer axis: the recipe re-fit on other base models."""

    rho: dict[str, float | None] = describe(
        "target base model → ρ, the Pearson correlation of word-removal effects between the probe and"
        " its recipe re-fit there (None: not measured)",
        key="transfer",
        default_factory=dict,
    )


@dataclass(frozen=True)
class SteerRecord(SubRecord):
    """The steer axis (direction utility, evaluator.axes.steer), beside the ProbeScore."""

    direction_utility: float | None = describe("mean utility_z over the judged tasks (None: none is)")
    tasks: dict[str, dict[str, Any]] = describe(
        "task → the readout's validation, strength, fluency, each intervention against random directions",
        key="steer",
        default_factory=dict,
    )


@dataclass(frozen=True)
class StressRecord(SubRecord):
    """The stress axis (evaluator.axes.stress.stress_summary), beside the ProbeScore."""

    stress_auroc: float | None = describe(
        "mean over tasks of the worst transform's AUROC (None: none measured, or a task pending)"
    )
    stress_recall: float | None = describe(
        "mean over tasks of the worst transform's recall at the clean threshold"
    )
    stress_auroc_content_end: float | None = describe(
        "the same AUROC read where each wrapped row's original content ends (None: a task's"
        " content-end reading not measured)",
        default=None,
    )
    tasks: dict[str, dict[str, Any]] = describe(
        "task → the threshold, the clean point, every transform's point and the worst",
        key="stress",
        default_factory=dict,
    )


@dataclass(frozen=True)
class RobustnessRecord(SubRecord):
    """The robustness axis (evaluator.axes.attack.robustness_summary)."""

    goodhart_resistance: float | None = describe(
        "mean over tasks of the Goodhart resistance (None: none measured, or a task pending): the graded"
        " attack's area under the relative-recall curve where goodhart_method is graded, the suffix"
        " attack's recall ratio where it is suffix (protocol p1)"
    )
    goodhart_resistance_range: list[float] | None = describe(
        "the graded attack's lowest and highest area over seeds, each a mean over tasks (None: not graded)",
        default=None,
    )
    goodhart_method: str | None = describe(
        "graded: the Goodhart resistance is the graded attack's area (p2 on); suffix: the soft-suffix"
        " attack's recall ratio (p1); None: no task measured",
        default=None,
    )
    attack_recall: float | None = describe(
        "mean over tasks of the recall at 1% FPR under the soft-suffix attack", default=None
    )
    transfer_attack_recall: float | None = describe(
        "mean over tasks of the recall under the category reference's suffix", default=None
    )
    tasks: dict[str, dict[str, Any]] = describe(
        "task → the attack's facts: recalls, steps, curve, transfer; the graded attack's area, range,"
        " eps50 and curves",
        key="robustness",
        default_factory=dict,
    )


#: AggregateRecord's fields that read as empty when a stored row lacks them
_EMPTY: dict[str, type] = {"not_measured_on_policy": list, "imputed": dict}


@dataclass(frozen=True)
class AggregateRecord:
    """``Score.measurements``: the means over tasks (:func:`evaluator.metrics.measure.aggregate_measurements`)
    and, beside them, one sub-record per axis. Stored flat, as the fields are ordered: a sub-record's
    keys where it stands (an absent axis stores none), ``extra`` after the means."""

    auroc: float = describe("mean test AUROC over the tasks")
    auroc_ea: float | None = describe("mean eval-awareness-corrected AUROC (None: imputed or n/a)")
    auroc_ds: float | None = describe("mean distribution-shift AUROC (None: no task has a distshift split)")
    ece: float = describe("mean expected calibration error")
    rho_ce: float | None = describe(
        "cross-model transfer: mean ρ over the target models, negatives as 0 (None: imputed)"
    )
    latency_ms: float = describe("the probe's own latency, in ms", schema={"exclusiveMinimum": 0})
    license: str = describe("the SPDX id of the probe version's license")
    ea_not_applicable: bool = describe("an eval-awareness probe: auroc_ea does not apply")
    brier: float = describe("mean Brier score")
    recall_at_1pct_fpr: float | None = describe("mean recall at the train split's 1%-FPR threshold")
    fpr_at_1pct_threshold: float | None = describe("mean test false-positive rate at that threshold")
    n_tasks: int = describe("tasks averaged over", schema={"minimum": 1})
    n_test: int = describe("test rows over all tasks", schema={"minimum": 0})
    lift_over_random: float | None = describe("mean AUROC lift over random directions at the probe's layer")
    lift_over_diff_of_means: float | None = describe("mean AUROC lift over the difference of class means")
    extra: dict[str, float | None] = describe("any further mean the aggregate carries, by name")
    intervals: IntervalsRecord = describe("the means shown with an interval")
    not_measured_on_policy: list[str] = describe(
        "the category's on-policy tasks this base model has no behaviour on (left out of the means)"
    )
    latency: LatencyRecord = describe("where the latency was measured")
    transfer: TransferRecord = describe("the transfer axis")
    steer: SteerRecord | None = describe("the steer axis (absent: not summed up)")
    stress: StressRecord | None = describe("the stress axis (absent: no stress run)")
    robustness: RobustnessRecord | None = describe("the robustness axis (absent: no robustness run)")
    imputed: dict[str, str] = describe("component → why it was imputed")

    def to_json(self) -> dict[str, Any]:
        """The stored JSON: every key as the score writer has always written it, in the same order."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "extra":
                out.update(value)
            elif f.name in SUB_RECORDS:
                if value is not None:
                    out.update(value.to_json())
            else:
                out[f.name] = value
        return out

    @classmethod
    def from_stored(cls, m: Mapping[str, Any] | None) -> AggregateRecord:
        """A stored ``Score.measurements``, as written now or before an axis existed: a missing
        number reads as None, a missing list or dict as empty, an axis none of whose keys is stored
        as absent; a key of no field is kept in ``extra``."""
        m = m or {}
        values: dict[str, Any] = {}
        known: set[str] = set()
        for f in fields(cls):
            sub = SUB_RECORDS.get(f.name)
            if sub is not None:
                keys = sub.stored_keys()
                known.update(keys)
                absent = f.name in OPTIONAL_SUB_RECORDS and not any(k in m for k in keys)
                values[f.name] = None if absent else sub.from_keys(m)
            elif f.name != "extra":
                known.add(f.name)
                value = m.get(f.name)
                values[f.name] = _EMPTY[f.name]() if value is None and f.name in _EMPTY else value
        values["extra"] = {k: v for k, v in m.items() if k not in known}
        return cls(**values)

    def scoring_input(self, *, license_id: str = "") -> Measurements:
        return measurements_from_stored(self.to_json(), license_id=license_id)


def _sub_records() -> tuple[dict[str, type[SubRecord]], set[str]]:
    """AggregateRecord's sub-record fields by name, and those that may be absent."""
    hints = get_type_hints(AggregateRecord)
    subs: dict[str, type[SubRecord]] = {}
    optional = set()
    for f in fields(AggregateRecord):
        hint = hints[f.name]
        args = [a for a in get_args(hint) if a is not type(None)] or [hint]
        if isinstance(args[0], type) and issubclass(args[0], SubRecord):
            subs[f.name] = args[0]
            if type(None) in get_args(hint):
                optional.add(f.name)
    return subs, optional


SUB_RECORDS, OPTIONAL_SUB_RECORDS = _sub_records()
_FIELD_NAMES = [f.name for f in fields(AggregateRecord)]
#: the means over tasks that aggregate_measurements hands over, in their stored order
AGGREGATE_MEANS = tuple(_FIELD_NAMES[: _FIELD_NAMES.index("extra")])


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
    domains: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``Score.measurements`` (:class:`AggregateRecord`, as JSON): the aggregate of
    :func:`evaluator.metrics.measure.aggregate_measurements` with what the board keeps beside it: the
    interval on the mean AUROC (``tests``: each task's test scores and labels), the mean lift over
    text (``lifts_over_text``: each task's lift and its interval) and the mean controlled AUROC
    (``controlled``, likewise), each with its interval (None unless every task has one), the
    on-policy tasks this base model has no behaviour on, the latency's device and model forward,
    ρ per transfer target, direction utility (``steer``: ``direction_utility`` and ``steer``), the
    stress axis (:func:`evaluator.axes.stress.stress_summary`), the robustness axis
    (:func:`evaluator.axes.attack.robustness_summary`), why each imputed component was imputed, and
    the in-domain and cross-domain means (``domains``: :func:`evaluator.metrics.in_domain.domain_split`;
    None: not computed, every one None).
    An axis summary with a key its sub-record does not know raises ValueError."""

    means: dict[str, Any] = {}
    for key, ci_key, values in (
        (LIFT_OVER_TEXT_KEY, LIFT_OVER_TEXT_CI_KEY, lifts_over_text),
        (CONTROLLED_AUROC_KEY, CONTROLLED_AUROC_CI_KEY, controlled),
    ):
        means[key] = float(np.mean([v for v, _ in values])) if values else None
        with_ci = [(v, ci) for v, ci in values if ci is not None]
        ci = mean_delta_ci(with_ci) if with_ci and len(with_ci) == len(values) else None
        means[ci_key] = None if ci is None else list(ci)
    record = AggregateRecord(
        **{k: aggregate[k] for k in AGGREGATE_MEANS},
        extra={k: v for k, v in aggregate.items() if k not in AGGREGATE_MEANS},
        intervals=IntervalsRecord(
            auroc_ci=list(auroc_mean_ci(list(tests))),
            **means,
            **{k: (domains or {}).get(k) for k in (*split_keys(), IN_DOMAIN_TASKS_KEY)},
        ),
        not_measured_on_policy=sorted(not_measured_on_policy),
        latency=LatencyRecord(device=latency.get("device"), model_forward_ms=latency.get("model_forward_ms")),
        transfer=TransferRecord(rho=dict(transfer)),
        steer=SteerRecord.from_keys(steer, strict=True) if steer else None,
        stress=StressRecord.from_keys(stress, strict=True) if stress else None,
        robustness=RobustnessRecord.from_keys(robustness, strict=True) if robustness else None,
        imputed=dict(imputed),
    )
    return record.to_json()


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
