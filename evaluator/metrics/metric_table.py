"""The metric table: each measured metric's facts, written once.

A row says what the metric is (name, label, one-line definition, unit, range, which end is
better, the version of its definition), where it is stored, and what the rest of the system does
with it:

- ``declarable``: a submitter may declare it in ``declared_metrics`` (the submission check
  accepts exactly these names, ``leaderboard.validation``);
- ``compared``: a declared value is compared with the measured mean over tasks and flagged when
  the two differ by more than :data:`DECLARED_GAP` (``evaluator.metrics.measure.declared_gaps``; every
  compared metric lies in [0, 1], so 5 points = 0.05);
- ``tolerance``: the measurement protocol's tolerance (``registry/protocols/*.yaml``,
  ``tolerances``) by which ``python -m evaluator reproduce`` judges a local number against the
  board's (None: shown, never judged, e.g. latency, which depends on the machine);
- ``per_task``: stored per task as well as averaged over tasks;
- ``exported``: a board column of its own beside the ProbeScore components (the CSV export).

Readers: the submission check, the declared-vs-measured comparison, the reproduce client, the
board export's columns and the methodology page. A new metric is one row here.

Rule kept by a test (``tests/evaluator/test_metric_table.py``): a declarable metric in [0, 1] is
compared, and a compared one is declarable; the declarable metrics that are not compared say why
(``not_compared``).

Pure: no Django, no numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: A declared metric more than this far (5 points) from the measured one is flagged.
DECLARED_GAP = 0.05

#: The operating point: the false-positive rate the threshold is fixed at on the (clean) train
#: negatives, for Recall@1%FPR, the stress splits and the attack alike. Defined here only.
OPERATING_FPR = 0.01


@dataclass(frozen=True)
class Metric:
    name: str  # the key in declared_metrics, Score.measurements and Score.per_task[task]
    label: str
    definition: str
    lo: float
    hi: float
    higher_is_better: bool
    unit: str = ""
    per_task: bool = True
    declarable: bool = False
    compared: bool = False
    tolerance: str | None = None  # a key of the protocol's tolerances
    exported: bool = False
    not_compared: str = ""  # why a declarable metric is not compared
    version: int = 1  # bumped when the definition changes what the number means
    interval: bool = False  # a 95% interval is stored beside it, as ``<name>_ci`` ([lo, hi])

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"

    @property
    def range_text(self) -> str:
        hi = "∞" if math.isinf(self.hi) else f"{self.hi:g}"
        return f"[{self.lo:g}, {hi}]"

    @property
    def stored(self) -> str:
        """Where the board keeps it."""
        where = f"Score.measurements[{self.name}] (mean over tasks)"
        where += f", Score.per_task[task][{self.name}]" if self.per_task else ""
        return where + (f"; its 95% interval beside it as {self.name}_ci" if self.interval else "")


METRICS: tuple[Metric, ...] = (
    Metric(
        "auroc",
        "AUROC",
        "area under the ROC curve of s(x) on the test split",
        0.0,
        1.0,
        True,
        declarable=True,
        compared=True,
        tolerance="auroc",
    ),
    Metric(
        "auroc_ea",
        "AUROC-EA",
        "AUROC over the pairs inside the same eval-awareness reference-probe quintile",
        0.0,
        1.0,
        True,
        declarable=True,
        compared=True,
        tolerance="auroc",
    ),
    Metric(
        "auroc_ds",
        "AUROC-DS",
        "AUROC on the distribution-shift split (imputed as a factor × AUROC without one)",
        0.0,
        1.0,
        True,
        declarable=True,
        compared=True,
        tolerance="auroc",
    ),
    Metric(
        "ece",
        "ECE",
        "expected calibration error of p(x) on the test split (equal-width bins)",
        0.0,
        1.0,
        False,
        declarable=True,
        compared=True,
        tolerance="ece",
    ),
    Metric(
        "brier",
        "Brier",
        "mean squared error of p(x) against the label on the test split",
        0.0,
        1.0,
        False,
        declarable=True,
        compared=True,
        tolerance="ece",
    ),
    Metric(
        "recall_at_1pct_fpr",
        "Recall@1%FPR",
        "recall on test at the threshold that gives 1% false positives on the train split's negatives",
        0.0,
        1.0,
        True,
        declarable=True,
        compared=True,
        tolerance="auroc",
        exported=True,
    ),
    Metric(
        "rho_ce",
        "ρ_CE",
        "mean over other base models of max(0, Pearson ρ) of word-ablation effects, recipe re-fit",
        0.0,
        1.0,
        True,
        per_task=False,
        declarable=True,
        compared=True,
        tolerance="rho_ce",
    ),
    Metric(
        "latency_ms",
        "Latency",
        "median time of the probe alone on one prompt, on the worker's device",
        0.0,
        math.inf,
        False,
        unit="ms",
        per_task=False,
        declarable=True,
        not_compared="it depends on the machine it is measured on",
    ),
    Metric(
        "lift_over_text",
        "Lift over text",
        "test AUROC minus the strongest text-only baseline's AUROC on the same rows (the best member of"
        " the task's panel, each fit on train with hyperparameters by CV on train), DeLong 95% interval",
        -1.0,
        1.0,
        True,
        exported=True,
        version=2,
        interval=True,
    ),
    Metric(
        "controlled_auroc",
        "Controlled AUROC",
        "AUROC the probe adds to the text controls (strongest text baseline, length): a logistic regression"
        " of the label on them with and without the probe's score, cross-fitted on test; DeLong 95% interval",
        -1.0,
        1.0,
        True,
        exported=True,
        interval=True,
    ),
    Metric(
        "stress_auroc",
        "Stress AUROC",
        "AUROC on the task's stress split (64 test rows, 32 per class, each rewritten) under its worst"
        " transform (chat markup, JSON, code comment, capitals, typos, a casual or formal frame, dilution"
        " in filler; and hard negatives, negative rows that name the concept's words, read against the"
        " clean positives of those rows), mean over tasks (not in the ProbeScore)",
        0.0,
        1.0,
        True,
        exported=True,
        version=3,
    ),
    Metric(
        "stress_recall",
        "Stress recall",
        "recall of the stress split's positives at the threshold fixed at 1% FPR on the clean train"
        " negatives, under the worst transform, mean over tasks (not in the ProbeScore)",
        0.0,
        1.0,
        True,
        exported=True,
        version=2,
    ),
    Metric(
        "goodhart_resistance",
        "Goodhart resistance",
        "recall of the test positives under the protocol's soft-suffix attack (16 free input embeddings"
        " optimised against the frozen probe) relative to the clean recall, both at the threshold fixed"
        " at 1% FPR on the clean train negatives, clipped to [0, 1], mean over tasks (the goodhart"
        " component from weights spec v0.0.2; per task under measurements.robustness)",
        0.0,
        1.0,
        True,
        per_task=False,
        exported=True,
    ),
    Metric(
        "attack_recall",
        "Recall under attack",
        "recall of the test positives under the protocol's soft-suffix attack at the clean 1%-FPR"
        " threshold, mean over tasks (not in the ProbeScore; per task under measurements.robustness)",
        0.0,
        1.0,
        True,
        per_task=False,
        exported=True,
    ),
    Metric(
        "transfer_attack_recall",
        "Recall under the transfer attack",
        "recall of the test positives, at the clean 1%-FPR threshold, under the suffix the protocol's"
        " attack made against the category's reference probe on the same base model (one forward, no"
        " optimisation against this probe), mean over tasks (not in the ProbeScore; n/a for that"
        " reference probe itself)",
        0.0,
        1.0,
        True,
        per_task=False,
        exported=True,
    ),
    Metric(
        "direction_utility",
        "Direction utility",
        "mean over the judged tasks of the steering effect's z against at least 64 random directions per"
        " seed, at the strength chosen on train within the fluency guard; a task whose readout does not"
        " reach the protocol's AUROC against the labels is not judged (not in the ProbeScore)",
        -math.inf,
        math.inf,
        True,
        unit="z",
        per_task=False,
        exported=True,
        version=2,
    ),
)

#: The protocol tolerances used when the protocol file has none.
DEFAULT_TOLERANCES: dict[str, float] = {"auroc": 0.002, "ece": 0.005, "rho_ce": 0.01}


def metrics() -> tuple[Metric, ...]:
    return METRICS


def metric(name: str) -> Metric:
    for row in METRICS:
        if row.name == name:
            return row
    raise KeyError(name)


def declarable_names() -> tuple[str, ...]:
    return tuple(m.name for m in METRICS if m.declarable)


def compared_names() -> tuple[str, ...]:
    return tuple(m.name for m in METRICS if m.compared)


def exported_names() -> tuple[str, ...]:
    return tuple(m.name for m in METRICS if m.exported)


def exported_columns() -> tuple[str, ...]:
    """The export's columns of the exported metrics: each one's value, and the bounds of its
    interval where it has one (``<name>_ci_lo``, ``<name>_ci_hi``)."""
    out: list[str] = []
    for m in METRICS:
        if m.exported:
            out += [m.name, f"{m.name}_ci_lo", f"{m.name}_ci_hi"] if m.interval else [m.name]
    return tuple(out)


def exported_values(row) -> dict[str, object]:
    """:func:`exported_columns` read from a mapping holding each metric by name (and
    ``<name>_ci`` as [lo, hi] or None)."""
    out: dict[str, object] = {}
    for m in METRICS:
        if m.exported:
            out[m.name] = row.get(m.name)
            if m.interval:
                ci = row.get(f"{m.name}_ci") or [None, None]
                out[f"{m.name}_ci_lo"], out[f"{m.name}_ci_hi"] = ci[0], ci[1]
    return out


def judged_task_names() -> tuple[str, ...]:
    """What the reproduce client judges per task."""
    return tuple(m.name for m in METRICS if m.tolerance and m.per_task)


def judged_aggregate_names() -> tuple[str, ...]:
    """What the reproduce client judges on the means over tasks."""
    return tuple(m.name for m in METRICS if m.tolerance)


def tolerances_for(base: dict[str, float]) -> dict[str, float]:
    """Each judged metric's tolerance from the protocol's (``auroc``, ``ece``, ``rho_ce``)."""
    out = dict(base)
    for m in METRICS:
        if m.tolerance and m.name not in out:
            out[m.name] = base[m.tolerance]
    return out
