"""Reads for comparing two probes (the compare page and ``GET /api/v1/compare``).

Per task: both AUROCs, ΔAUROC = AUROC_a − AUROC_b with its paired 95% bootstrap interval and
DeLong's p-value on the test rows both probes were scored on (``evaluator.metrics.compare.rows_compare``);
the other per-task metrics side by side; both ROC curves. Probes on different base models are
paired on the rows they share (a row id is the task's); rows that are not shared, as on a task
whose rows are generated per model, cannot be paired and say so.

The comparison reads only stored per-example scores. Its result is cached under both Scores' ids
and computation times, so it is computed once per pair of Scores, not per request.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.cache import cache

from evaluator.errors import MetricInputError
from evaluator.metrics import metric_table
from evaluator.metrics.compare import rows_compare
from evaluator.metrics.metrics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from leaderboard.models import EvaluationRun, Probe, ProbeVersion, RankInterval, Score, Task
from leaderboard.selectors.board.query import BoardQueryError, resolve_spec, weights_spec_list
from leaderboard.selectors.probes import task_result_normalize

Run = EvaluationRun

#: The operating point's details, stored beside Recall@1%FPR (not metrics of the table): the compare
#: page shows them after it; the threshold per task only (a mean of thresholds says nothing).
OPERATING_POINT_METRIC = "recall_at_1pct_fpr"
OPERATING_POINT = (
    ("fpr_at_1pct_threshold", "test FPR at that threshold", False),
    ("threshold_1pct_fpr", "threshold (train, 1% FPR)", True),
)


@dataclass(frozen=True)
class CompareRow:
    """One row of the comparison: a metric of the metric table (``compare``) with its label,
    definition and format, or one of the operating point's details."""

    key: str
    label: str
    definition: str = ""
    fmt: str = "digits"


def compare_rows(*, per_task: bool = False) -> list[CompareRow]:
    """The metrics compared side by side, in table order: the aggregates (mean over tasks) of both
    Scores, or with ``per_task`` each task's results (AUROC left out: it is compared per task as
    ΔAUROC on the shared rows)."""
    rows = []
    for m in metric_table.compare_rows(per_task=per_task):
        if per_task and m.name == "auroc":
            continue
        rows.append(CompareRow(m.name, m.label, m.definition, m.fmt))
        if m.name == OPERATING_POINT_METRIC:
            rows += [
                CompareRow(key, text) for key, text, task_only in OPERATING_POINT if per_task or not task_only
            ]
    return rows


class CompareQueryError(BoardQueryError):
    """A compare request naming no probe, the same probe twice, or one that is not public (404)."""


@dataclass
class CompareSide:
    probe: Probe
    version: ProbeVersion
    score: Score | None
    rank_interval: RankInterval | None
    results: dict[str, dict]  # task slug → task_result_normalize(...)


@dataclass
class TaskComparison:
    task: str
    task_name: str
    a: dict | None  # normalized per-task results (None: not measured on this task)
    b: dict | None
    #: evaluator.metrics.compare.rows_compare: paired, n_shared, n_a, n_b, auroc_a, auroc_b, delta,
    #: delta_ci, p_value — or paired False with the reason; None when a probe lacks the task
    paired: dict | None
    reason: str = ""


@dataclass
class Comparison:
    a: CompareSide
    b: CompareSide
    spec: object
    specs: list
    tasks: list[TaskComparison]
    n_resamples: int = BOOTSTRAP_RESAMPLES
    seed: int = BOOTSTRAP_SEED


def _side(slug: str, *, param: str, spec) -> CompareSide:
    version = (
        ProbeVersion.objects.public()
        .filter(probe__slug=slug)
        .select_related("probe__base_model", "probe__category", "license")
        .order_by("-number")
        .first()
    )
    if version is None:
        raise CompareQueryError(f"no public probe {slug!r}", param=param, status=404)
    score = Score.objects.filter(probe_version=version, spec=spec).select_related("rank_interval").first()
    interval = getattr(score, "rank_interval", None) if score else None
    per_task = (score.per_task if score else None) or {}
    return CompareSide(
        probe=version.probe,
        version=version,
        score=score,
        rank_interval=interval,
        results={t: task_result_normalize(r) for t, r in per_task.items()},
    )


def _test_rows(version: ProbeVersion, tasks: list[str]) -> dict[str, dict[str, tuple[int, float]]]:
    """task → {row id: (label, score)} from the version's stored test runs."""
    runs = Run.objects.filter(
        probe_version=version,
        kind=Run.Kind.SCORE,
        split="test",
        cycle=None,
        status=Run.Status.SUCCEEDED,
        task_id__in=tasks,
    ).values_list("task_id", "example_scores")
    return {
        task_id: {str(e["id"]): (int(e["label"]), float(e["score"])) for e in records}
        for task_id, records in runs
    }


def _paired(a: CompareSide, b: CompareSide, tasks: list[str]) -> dict[str, dict]:
    """task → rows_compare(...) for the tasks both probes were measured on (cached per Score pair)."""
    if not tasks:
        return {}
    assert a.score is not None and b.score is not None  # only scored sides are paired
    key = "compare:{}:{}:{}:{}:{}".format(
        a.score.pk,
        a.score.computed_at.timestamp(),
        b.score.pk,
        b.score.computed_at.timestamp(),
        ",".join(tasks),
    )
    found = cache.get(key)
    if found is not None:
        return found
    rows_a, rows_b = _test_rows(a.version, tasks), _test_rows(b.version, tasks)
    out = {}
    for task in tasks:
        if task not in rows_a or task not in rows_b:
            out[task] = {"paired": False, "reason": "the per-example scores of a test run are not stored"}
            continue
        try:
            out[task] = rows_compare(a=rows_a[task], b=rows_b[task])
        except MetricInputError as exc:
            out[task] = {"paired": False, "reason": str(exc)}
    cache.set(key, out, timeout=24 * 3600)
    return out


def probes_compare(*, a: str | None, b: str | None, spec: str | None = None) -> Comparison:
    """Compare the newest public versions of probes ``a`` and ``b`` under weights spec ``spec``.
    Raises CompareQueryError (400: a parameter missing or naming the same probe twice; 404: no
    such public probe) or BoardQueryError (an unknown spec)."""
    if not a or not b:
        param = "a" if not a else "b"
        raise CompareQueryError(f"name two probes: ?a=SLUG&b=SLUG ({param} is missing)", param=param)
    if a == b:
        raise CompareQueryError("a and b name the same probe", param="b")
    specs = weights_spec_list()
    resolved = resolve_spec(specs, spec, param="spec")
    side_a, side_b = _side(a, param="a", spec=resolved), _side(b, param="b", spec=resolved)
    slugs = sorted(set(side_a.results) | set(side_b.results))
    names, on_policy = {}, set()
    for slug, name, per_model in Task.objects.filter(slug__in=slugs).values_list("slug", "name", "on_policy"):
        names[slug] = name
        if per_model:
            on_policy.add(slug)
    same_model = side_a.probe.base_model_id == side_b.probe.base_model_id
    unpairable = set() if same_model else on_policy
    both = [t for t in slugs if t in side_a.results and t in side_b.results and t not in unpairable]
    paired = _paired(side_a, side_b, both) if side_a.score and side_b.score else {}
    tasks = []
    for t in slugs:
        result = paired.get(t)
        if t in unpairable:
            reason = (
                "an on-policy task: its rows are generated by each base model, so probes on"
                " different base models share no row"
            )
        elif t not in both:
            missing = side_a if t not in side_a.results else side_b
            reason = f"{missing.probe.name} was not measured on this task"
        else:
            reason = "" if result and result.get("paired") else (result or {}).get("reason", "")
        tasks.append(
            TaskComparison(
                task=t,
                task_name=names.get(t, t),
                a=side_a.results.get(t),
                b=side_b.results.get(t),
                paired=result if result and result.get("paired") else None,
                reason=reason,
            )
        )
    return Comparison(a=side_a, b=side_b, spec=resolved, specs=specs, tasks=tasks)


def uncertainty_method() -> dict:
    """What the methodology page says about the bootstrap: resamples, seed, which components are
    resampled and which are held fixed (from evaluator.metrics.rank_intervals, never written by hand)."""
    from evaluator.metrics.rank_intervals import FIXED_COMPONENTS, RESAMPLED_COMPONENTS
    from leaderboard.presentation import COMPONENT_LABELS

    return {
        "n_resamples": f"{BOOTSTRAP_RESAMPLES:,}",
        "seed": BOOTSTRAP_SEED,
        "resampled": [COMPONENT_LABELS[c] for c in RESAMPLED_COMPONENTS],
        "fixed": [COMPONENT_LABELS[c] for c in FIXED_COMPONENTS],
    }
