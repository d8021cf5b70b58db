"""The score writer: turn finished runs into Score rows, from the stored per-example scores only
(no model): per-task metrics (``evaluator.metrics.measure``), the aggregate measurements, the ProbeScore
under every weights spec (``evaluator.metrics.scoring``), the reproduction mark and the declared-vs-measured
gaps. The score runs (and the reference runs) are read here; every other axis's part of the Score is
its summary (``leaderboard.axes``: each axis's ``summarise``, over its stored runs).

Recomputing is cheap and deterministic, which is what lets a new eval-awareness reference probe
or a new weights spec re-score every entry without rerunning a model. Imports only services.runs
(to publish the rank-interval refresh by task name).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from evaluator.data.registry.licenses import LicenseSpec
from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.data.registry.weights import WeightsSpec as SpecData
from evaluator.errors import EvaluatorError
from evaluator.metrics.breakdown import breakdowns
from evaluator.metrics.in_domain import domain_split, in_domain_tasks
from evaluator.metrics.measure import (
    ScoredExamples,
    TaskMetrics,
    aggregate_measurements,
    declared_gaps,
    task_metrics,
)
from evaluator.metrics.records import ScoreRecord, TaskRecord, aggregate_stored, measurements_from_stored
from evaluator.metrics.scoring import probe_score
from leaderboard.axes import AXES
from leaderboard.axes.base import AxisRuns, Summary
from leaderboard.models import (
    EvaluationRun,
    License,
    Probe,
    ProbeVersion,
    Score,
    Submission,
    Task,
    WeightsSpec,
)
from leaderboard.selectors.shared import ea_reference_version
from leaderboard.services.replication import runs_with_published
from leaderboard.services.runs import RANK_INTERVALS_REFRESH_TASK, TERMINAL, task_delay

Run = EvaluationRun

log = logging.getLogger(__name__)


def active_task_ids(category_id: str) -> set[str]:
    return set(
        Task.objects.filter(category_id=category_id, status=Task.Status.ACTIVE).values_list("slug", flat=True)
    )


def version_runs_current(version: ProbeVersion, *, active: set[str] | None = None) -> list[EvaluationRun]:
    """The runs a version's Score is computed from: its runs outside any cycle, with the score runs
    limited to the category's active tasks (``active``, read when not given) on which the test run
    succeeded (a task whose test run failed is left out rather than failing the whole Score)."""
    if active is None:
        active = active_task_ids(version.probe.category_id)
    runs = list(Run.objects.filter(probe_version=version, cycle=None))
    measured = {
        r.task_id
        for r in runs
        if r.kind == Run.Kind.SCORE and r.split == "test" and r.status == Run.Status.SUCCEEDED
    }
    return [r for r in runs if r.kind != Run.Kind.SCORE or (r.task_id in active and r.task_id in measured)]


def _spec_data(row: WeightsSpec) -> SpecData:
    return SpecData(
        row.version,
        row.released,
        row.description,
        row.weights,
        row.imputation,
        row.sha256,
        imputation_rules=dict(row.imputation_rules or {}),
    )


def _licenses() -> dict[str, LicenseSpec]:
    return {lic.spdx_id: LicenseSpec(lic.spdx_id, lic.name, lic.score) for lic in License.objects.all()}


def measurements_compute(
    *,
    version: ProbeVersion,
    runs: list[EvaluationRun],
    reference_runs: dict[str, EvaluationRun],
    imputation: dict[str, float],
) -> dict[str, Any]:
    """Per-task metrics and aggregate measurements of one probe version from its runs.

    ``reference_runs``: task → the eval-awareness reference probe's run on that task's test split
    (empty when the base model has no reference probe).
    """
    by_kind: dict[str, list[EvaluationRun]] = defaultdict(list)
    for run in runs:
        by_kind[run.kind].append(run)
    by_task: dict[str, dict[str, EvaluationRun]] = defaultdict(dict)
    for run in by_kind[Run.Kind.SCORE]:
        if run.status == Run.Status.SUCCEEDED:
            by_task[run.task_id][run.split] = run
    ea_applicable = version.probe.category_id != EVAL_AWARENESS
    per_task, extras = {}, {}
    for task_id, splits in sorted(by_task.items()):
        if "test" not in splits:
            raise EvaluatorError(f"task {task_id}: the test run is missing")
        test = ScoredExamples.from_records(splits["test"].example_scores)
        distshift = (
            ScoredExamples.from_records(splits["distshift"].example_scores) if "distshift" in splits else None
        )
        train = ScoredExamples.from_records(splits["train"].example_scores) if "train" in splits else None
        ref_run = reference_runs.get(task_id)
        ref_scores = None
        if ea_applicable and ref_run is not None and ref_run.status == Run.Status.SUCCEEDED:
            ref_scores = {e["id"]: e["score"] for e in ref_run.example_scores}
        per_task[task_id] = task_metrics(
            task_id=task_id,
            test=test,
            distshift=distshift,
            ea_reference=ref_scores,
            train_negative_scores=None if train is None else train.scores[train.labels == 0],
            ea_applicable=ea_applicable,
            imputation=imputation,
        )
        extras[task_id] = {
            "baselines": splits["test"].metrics.get("baselines"),
            "latency": splits["test"].metrics.get("latency"),
        }
    if not per_task:
        raise EvaluatorError("no successful test run to score")
    latencies = [e["latency"] for e in extras.values() if e.get("latency")]
    if not latencies:
        raise EvaluatorError("latency was not measured")
    # each axis's part, from its stored runs (every declared axis: one turned off keeps its runs)
    summary = _summaries_merged(
        [a.summarise(AxisRuns(runs=by_kind[a.name], clean=by_task)) for a in AXES if a.summarise is not None]
    )
    aggregate, imputed, measurements = aggregate_measurements(
        list(per_task.values()),
        lifts=[e["baselines"] for e in extras.values() if e.get("baselines")],
        latency_ms=sorted(lat["probe_ms"] for lat in latencies)[len(latencies) // 2],
        license_id=version.license_id,
        has_recipe=version.recipe is not None,
        ea_applicable=ea_applicable,
        has_reference=bool(reference_runs),
        imputation=imputation,
        **summary.scored,
    )
    imputed.update(summary.imputed)
    tasks = {t.slug: t for t in Task.objects.filter(slug__in=list(per_task))}
    records = {}
    for task_id, tm in per_task.items():
        text, controlled = _text_lift(
            tasks[task_id], version.probe.base_model_id, by_task[task_id]["test"].example_scores, tm
        )
        test_run = ScoredExamples.from_records(by_task[task_id]["test"].example_scores)
        groups = _row_groups(tasks[task_id], version.probe.base_model_id, tm)
        by_group = breakdowns(
            test_run.ids,
            test_run.labels,
            test_run.scores,
            threshold=tm.threshold_1pct_fpr,  # the task's operating point (train negatives, 1% FPR)
            row_groups=groups,
        )
        records[task_id] = TaskRecord.measured(
            tm, text=text, controlled=controlled, baselines=extras[task_id]["baselines"], by_group=by_group
        )
    # in-domain: the tasks it was trained on; the others it reads frozen, out of domain
    in_domain = in_domain_tasks(version)
    for task_id, record in records.items():
        records[task_id] = replace(record, in_domain=None if in_domain is None else task_id in in_domain)
    protocol, environment = _measured_under([r for splits in by_task.values() for r in splits.values()])
    tests = [ScoredExamples.from_records(by_task[t]["test"].example_scores) for t in per_task]
    stored_aggregate = aggregate_stored(
        aggregate,
        tests=[(t.scores, t.labels) for t in tests],
        lifts_over_text=[
            (r.lift_over_text, r.lift_over_text_ci) for r in records.values() if r.lift_over_text is not None
        ],
        controlled=[
            (r.controlled_auroc, r.controlled_auroc_ci)
            for r in records.values()
            if r.controlled_auroc is not None
        ],
        # the category's on-policy tasks this base model has no behaviour on (the encoder): the
        # category mean is over the other tasks, and the board says so
        not_measured_on_policy=[
            t.slug
            for t in Task.objects.filter(
                category_id=version.probe.category_id, status=Task.Status.ACTIVE, on_policy=True
            )
            if not t.measured_on(version.probe.base_model_id)
        ],
        latency=latencies[0],
        imputed=imputed,
        domains=domain_split(
            records,
            tests={t: (test.scores, test.labels) for t, test in zip(per_task, tests, strict=True)},
            in_domain=in_domain,
        ),
        **summary.stored,
    )
    return {
        "measurements": measurements,
        "aggregate": stored_aggregate,
        "per_task": records,
        **summary.computed,
        "protocol": protocol,
        "environment": environment,
    }


def _summaries_merged(summaries: list[Summary]) -> Summary:
    """The axes' parts of the Score as one (each keyword is one axis's: two that fill the same one
    are a declaration error)."""
    merged: dict[str, dict[str, Any]] = {"stored": {}, "scored": {}, "imputed": {}, "computed": {}}
    for summary in summaries:
        for part, into in merged.items():
            values = getattr(summary, part)
            if clash := set(values) & set(into):
                raise ValueError(f"two axes fill the score's {part} {sorted(clash)}")
            into.update(values)
    return Summary(**merged)


def _text_lift(
    task: Task, base_model_id: str, example_scores: list[dict], metrics: TaskMetrics
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The probe's lift over the strongest member of the task's committed text-baseline panel on
    the same test rows (DeLong's paired interval), and its confound-controlled AUROC (what it adds
    over the text controls); (None, None) when no panel is committed. A panel that cannot be read
    or did not score these rows leaves both unmeasured, with the reason in the task's notes: they
    are shown beside the ProbeScore, so they never fail the score."""
    from django.conf import settings

    from evaluator.axes.text_baselines import controlled_auroc, read_panel, text_lift

    sha = task.text_panel(base_model_id).get("sha256")
    if not sha:
        return None, None
    rows = [(str(e["id"]), int(e["label"]), float(e["score"])) for e in example_scores]
    try:
        panel = read_panel(settings.REGISTRY_ROOT, task.slug, base_model_id if task.on_policy else None, sha)
        return text_lift(panel, rows), controlled_auroc(panel, rows)
    except EvaluatorError as exc:
        log.warning("lift over text on %s not measured: %s", task.slug, exc)
        metrics.notes.append(f"lift over text not measured: {exc}")
        return None, None


def _row_groups(task: Task, base_model_id: str, metrics: TaskMetrics) -> dict[str, dict[str, str | None]]:
    """Each test row's domain and source, from the task's pinned test split file (the base model's
    own for an on-policy task). A file that cannot be read leaves the breakdown empty, with the reason
    in the task's notes: it is shown beside the per-task results, so it never fails the score."""
    from django.conf import settings

    from evaluator.data.split_groups import row_groups

    split = task.splits.filter(name="test", base_model_id=base_model_id if task.on_policy else None).first()
    if split is None:
        return {}
    try:
        return row_groups(Path(settings.REGISTRY_ROOT) / split.path, split.sha256)
    except EvaluatorError as exc:
        log.warning("breakdown by domain on %s not measured: %s", task.slug, exc)
        metrics.notes.append(f"breakdown by domain and source not measured: {exc}")
        return {}


def _measured_under(score_runs: list[EvaluationRun]) -> tuple[str, dict[str, Any]]:
    """The protocol the score runs share ("" when they differ or predate protocols) and the
    environment of the first test run, as recorded by the worker (evaluator.core.environment)."""
    protocols = {r.protocol for r in score_runs}
    protocol = protocols.pop() if len(protocols) == 1 else ""
    tests = sorted((r for r in score_runs if r.split == "test"), key=lambda r: (r.task_id, r.pk))
    environment = dict(tests[0].environment) if tests and tests[0].environment else {}
    return protocol, environment


def goodhart_floor(category_id: str, *, exclude_probe_id: int | None = None) -> tuple[float | None, str]:
    """The lowest graded Goodhart resistance measured on the latest scored version of a probe of
    ``category_id`` (other than ``exclude_probe_id``), read from its Scores' measurements, and whose
    it is ("slug vN"); (None, "") when the category has none measured."""
    rows = Score.objects.filter(
        probe_version__in=ProbeVersion.objects.latest_per_probe(),
        probe_version__probe__category_id=category_id,
    ).select_related("probe_version__probe")
    if exclude_probe_id is not None:
        rows = rows.exclude(probe_version__probe_id=exclude_probe_id)
    measured: dict[int, tuple[float, str]] = {}
    for row in rows:
        m = row.measurements or {}
        value = m.get("goodhart_resistance")
        if m.get("goodhart_method") == "graded" and value is not None:
            v = row.probe_version
            measured[v.pk] = (float(value), f"{v.probe.slug} v{v.number}")
    if not measured:
        return None, ""
    return min(measured.values())


def _with_floor(version: ProbeVersion, measurements: Any) -> Any:
    """``measurements`` with the category's goodhart floor where its own resistance is not measured."""
    if measurements.goodhart is not None:
        return measurements
    floor, source = goodhart_floor(version.probe.category_id, exclude_probe_id=version.probe_id)
    return replace(measurements, goodhart_floor=floor, goodhart_floor_source=source)


def goodhart_floor_refresh(category_id: str) -> int:
    """Rescore, from their stored measurements (no run is read), the goodhart component of every
    latest version in the category whose resistance is imputed from the category's floor, under
    each spec with that rule, where the floor has moved. Returns how many Score rows changed."""
    licenses = _licenses()
    changed = 0
    for spec_row in WeightsSpec.objects.all():
        spec = _spec_data(spec_row)
        if spec.imputation_rules.get("goodhart") != "category_lowest":
            continue
        rows = Score.objects.filter(
            spec=spec_row,
            probe_version__in=ProbeVersion.objects.latest_per_probe(),
            probe_version__probe__category_id=category_id,
        ).select_related("probe_version__probe")
        for row in rows:
            if (row.measurements or {}).get("goodhart_resistance") is not None:
                continue
            version = row.probe_version
            stored = measurements_from_stored(row.measurements, license_id=version.license_id)
            measurements = _with_floor(version, stored)
            data = probe_score(measurements, spec=spec, licenses=licenses).to_dict()
            if data["components"] == row.components and data["total"] == row.total:
                continue
            row.total, row.measured_total, row.components = (
                data["total"],
                data["measured_total"],
                data["components"],
            )
            row.save(update_fields=["total", "measured_total", "components"])
            changed += 1
    return changed


def scores_write(*, version: ProbeVersion, computed: dict[str, Any]) -> list[Score]:
    """Write (or replace) the Score of ``version`` under every weights spec (an unmeasured Goodhart
    resistance imputed from the category's floor where a spec says so; a measured one that moves
    the floor re-imputes the category's unmeasured entries); once committed, the rank intervals of
    its category's boards are recomputed (services.rank_intervals, by task)."""
    licenses = _licenses()
    rows = []
    measurements = _with_floor(version, computed["measurements"])
    for spec_row in WeightsSpec.objects.all():
        score = probe_score(measurements, spec=_spec_data(spec_row), licenses=licenses)
        data = score.to_dict()
        record = ScoreRecord(
            total=data["total"],
            measured_total=data["measured_total"],
            components=data["components"],
            measurements=computed["aggregate"],
            per_task=computed["per_task"],
            protocol=computed.get("protocol", ""),
            environment=computed.get("environment", {}),
        )
        row, _ = Score.objects.update_or_create(
            probe_version=version,
            spec=spec_row,
            defaults={**record.to_json(), "computed_at": timezone.now()},
        )
        rows.append(row)
    category_id = version.probe.category_id
    if measurements.goodhart is not None:
        goodhart_floor_refresh(category_id)
    # robust: a failed publish is logged; the reconciler recomputes stale boards anyway
    transaction.on_commit(lambda: task_delay(RANK_INTERVALS_REFRESH_TASK, category_id), robust=True)
    return rows


def reference_runs_for(version: ProbeVersion) -> dict[str, EvaluationRun]:
    if version.probe.category_id == EVAL_AWARENESS:
        return {}
    ref = ea_reference_version(base_model=version.probe.base_model)
    if ref is None:
        return {}
    runs = Run.objects.filter(
        probe_version=ref, kind=Run.Kind.REFERENCE, cycle=None, status=Run.Status.SUCCEEDED
    )
    return {r.task_id: r for r in runs}


def submission_score(*, submission: Submission, runs: list[EvaluationRun], first: bool = True) -> list[Score]:
    """Score a submission whose primary runs are finished (called inside a transaction); its
    secondary runs may still be queued (shown as pending). ``first``: False when a secondary run
    has finished and the Score is recomputed (the stability count is not reset then)."""
    version = submission.probe_version
    # an imported version (or one read against an imported reference): the bundle's runs fill in
    # every run not yet measured here (services.replication)
    runs = runs_with_published(version, runs)
    spec = WeightsSpec.objects.order_by("-version").first()
    assert spec is not None  # the registry (and its weights specs) is loaded before any run
    reference = {
        r.task_id: r for r in runs if r.kind == Run.Kind.REFERENCE and r.status == Run.Status.SUCCEEDED
    }
    computed = measurements_compute(
        version=version,
        runs=[r for r in runs if r.probe_version_id == version.pk],
        reference_runs=reference,
        imputation=spec.imputation,
    )
    rows = scores_write(version=version, computed=computed)
    aggregate = computed["aggregate"]
    repro = computed["reproduction"]
    version.reproduction = repro or (
        {"error": computed["reproduce_error"]} if computed["reproduce_error"] else None
    )
    repro_pending = any(r.kind == Run.Kind.REPRODUCE and r.status not in TERMINAL for r in runs)
    version.reproduced = (
        None if version.recipe is None or repro_pending else bool(repro and repro.get("reproduced"))
    )
    gaps = declared_gaps(version.declared_metrics, aggregate)
    version.declared_gaps = {k: v for k, v in gaps.items() if v["flagged"]}
    version.reference_auroc = aggregate["auroc"]
    version.save(update_fields=["reproduction", "reproduced", "declared_gaps", "reference_auroc"])
    if first:  # the stability badge belongs to the artifact that held: a new version starts from zero
        Probe.objects.filter(pk=version.probe_id).update(stability_quarters=0)
    return rows
