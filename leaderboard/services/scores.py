"""The score writer: turn finished runs into Score rows, from the stored per-example scores only
(no model): per-task metrics (``evaluator.metrics.measure``), the aggregate measurements, the ProbeScore
under every weights spec (``evaluator.metrics.scoring``), the reproduction mark and the declared-vs-measured
gaps.

Recomputing is cheap and deterministic, which is what lets a new eval-awareness reference probe
or a new weights spec re-score every entry without rerunning a model. Imports only services.runs
(to publish the rank-interval refresh by task name).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from django.db import transaction
from django.utils import timezone

from evaluator.axes.attack import GOODHART_KEY
from evaluator.data.registry.licenses import LicenseSpec
from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.data.registry.weights import WeightsSpec as SpecData
from evaluator.errors import EvaluatorError
from evaluator.metrics.measure import (
    ScoredExamples,
    TaskMetrics,
    aggregate_measurements,
    declared_gaps,
    task_metrics,
)
from evaluator.metrics.records import ScoreRecord, TaskRecord, aggregate_stored
from evaluator.metrics.scoring import probe_score
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
    return SpecData(row.version, row.released, row.description, row.weights, row.imputation, row.sha256)


def _licenses() -> dict[str, LicenseSpec]:
    return {lic.spdx_id: LicenseSpec(lic.spdx_id, lic.name, lic.score) for lic in License.objects.all()}


def steer_summary(runs: list[EvaluationRun]) -> dict[str, Any]:
    """Direction utility folded into the stored measurements (beside the ProbeScore, never in
    it): ``direction_utility`` (mean utility_z over the judged tasks; None when none is) and
    ``steer``: per task the readout's validation, the chosen strength and its fluency, each
    intervention's effect against the random directions, the prompting baseline and the
    generated-text readout (the full steer JSON stays on the run)."""
    from evaluator.axes.steer import direction_utility

    tasks = {}
    for run in runs:
        result = (run.metrics or {}).get("steer") if run.status == Run.Status.SUCCEEDED else None
        if not result or result.get("readout") is None:
            continue
        baseline = result.get("prompt_baseline") or {}
        tasks[run.task_id] = {
            "judged": bool(result.get("judged")),
            "reason": result.get("reason", ""),
            "utility_z": result.get("utility_z"),
            "p_value": result.get("p_value"),
            "readout_auroc": result["readout"]["auroc"],
            "n": result["readout"]["n"],
            "strength": result.get("strength"),
            "perplexity_ratio": (result.get("fluency") or {}).get("ratio"),
            "prompt_effect": baseline.get("effect"),
            "generated": result.get("generated"),
            **{
                kind: {
                    k: result[kind].get(k)
                    for k in (
                        "effect",
                        "random_mean",
                        "random_sd",
                        "utility_z",
                        "p_value",
                        "z_spread",
                        "random_effects",
                    )
                }
                for kind in ("addition", "ablation")
                if result.get(kind)
            },
        }
    return {"direction_utility": direction_utility(list(tasks.values())), "steer": tasks}


def stress_measurements(
    stresses: dict[str, EvaluationRun], by_task: dict[str, dict[str, EvaluationRun]]
) -> dict[str, Any]:
    """The stress axis (beside the ProbeScore, never in it): each task's stress run read against
    its clean train and test runs (evaluator.axes.stress), summed up by :func:`evaluator.axes.stress.stress_summary`;
    the means wait while a stress run is still queued or running. {} when no stress run exists."""
    from evaluator.axes.stress import stress_metrics, stress_summary

    if not stresses:
        return {}
    per_task, pending = {}, []
    for task_id, run in sorted(stresses.items()):
        splits = by_task.get(task_id, {})
        if run.status not in TERMINAL:
            pending.append(task_id)
            continue
        if run.status != Run.Status.SUCCEEDED or "train" not in splits or "test" not in splits:
            continue  # a failed stress run leaves the task out (its error is on the run)
        train = ScoredExamples.from_records(splits["train"].example_scores)
        test = ScoredExamples.from_records(splits["test"].example_scores)
        stress = ScoredExamples.from_records(run.example_scores)
        per_task[task_id] = stress_metrics(
            train_negatives=train.scores[train.labels == 0],
            test=(test.ids, test.labels, test.scores),
            stress=(stress.ids, stress.labels, stress.scores),
        )
    return stress_summary(per_task, pending=pending)


def robustness_measurements(
    robust: dict[str, EvaluationRun], by_task: dict[str, dict[str, EvaluationRun]]
) -> tuple[dict[str, Any], str]:
    """The robustness axis: each task's robustness run (the attacked test positives' scores) read
    against its clean train and test runs (:func:`evaluator.axes.attack.attack_metrics`), summed up by
    :func:`evaluator.axes.attack.robustness_summary`; and why the Goodhart resistance is not measured
    ("" when it is). ({}, reason) when no robustness run exists."""
    from evaluator.axes.attack import attack_metrics, robustness_summary

    if not robust:
        return {}, "not measured: no attack applies (a contrast-pair probe, an encoder) or none was planned"
    per_task, pending, failed = {}, [], []
    for task_id, run in sorted(robust.items()):
        splits = by_task.get(task_id, {})
        if run.status not in TERMINAL:
            pending.append(task_id)
            continue
        if run.status != Run.Status.SUCCEEDED or "train" not in splits or "test" not in splits:
            failed.append(task_id)  # a failed robustness run leaves the task out (its error is on the run)
            continue
        train = ScoredExamples.from_records(splits["train"].example_scores)
        test = ScoredExamples.from_records(splits["test"].example_scores)
        attacked = ScoredExamples.from_records(run.example_scores)
        attack = (run.metrics or {}).get("attack") or {}
        train_negatives = train.scores[train.labels == 0]
        per_task[task_id] = {
            **attack_metrics(
                train_negatives=train_negatives, test=(test.labels, test.scores), attacked=attacked.scores
            ),
            "steps": attack.get("steps"),
            "steps_run": attack.get("steps_run"),
            "steps_to_half": attack.get("steps_to_half"),
            "curve": attack.get("curve") or [],
            "transfer": _transfer_read((run.metrics or {}).get("transfer"), train_negatives, test),
        }
    summary = robustness_summary(per_task, pending=pending)
    if summary[GOODHART_KEY] is not None:
        return summary, ""
    if pending:
        return summary, f"pending: the attack on {', '.join(pending)} is not measured yet"
    if failed and not per_task:
        return summary, f"the attack failed on {', '.join(failed)}"
    return summary, "the clean recall at 1% FPR is 0 on every task: nothing for an attack to take"


def _transfer_read(
    stored: dict[str, Any] | None, train_negatives: Any, test: ScoredExamples
) -> dict[str, Any] | None:
    """A robustness run's transfer attack, its recall recomputed from the stored scores (None: the
    category has no reference probe on this model to make the suffix against)."""
    from evaluator.axes.attack import attack_metrics

    if not stored:
        return None
    about = {"source": stored.get("source"), "source_version": stored.get("source_version")}
    if stored.get("self"):
        return {**about, "self": True}
    import numpy as np

    m = attack_metrics(
        train_negatives=train_negatives,
        test=(test.labels, test.scores),
        attacked=np.asarray(stored.get("scores") or [], dtype=np.float64),
    )
    return {
        **about,
        "self": False,
        "recall_attacked": m["recall_attacked"],
        "goodhart_resistance": m["goodhart_resistance"],
    }


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
    by_task: dict[str, dict[str, EvaluationRun]] = defaultdict(dict)
    reproduce, transfers, steers, stresses, robust = None, [], [], {}, {}
    for run in runs:
        if run.kind == Run.Kind.SCORE and run.status == Run.Status.SUCCEEDED:
            by_task[run.task_id][run.split] = run
        elif run.kind == Run.Kind.REPRODUCE:
            reproduce = run
        elif run.kind == Run.Kind.TRANSFER:
            transfers.append(run)
        elif run.kind == Run.Kind.STEER:
            steers.append(run)
        elif run.kind == Run.Kind.STRESS:
            stresses[run.task_id] = run
        elif run.kind == Run.Kind.ROBUSTNESS:
            robust[run.task_id] = run
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
    pearsons = [
        r.metrics["transfer"]["pearson"]
        for r in transfers
        if r.status == Run.Status.SUCCEEDED and "transfer" in r.metrics
    ]
    failed_targets = [r.base_model_id for r in transfers if r.status == Run.Status.FAILED]
    # a secondary run still queued (the board scores a probe once its primary runs are done)
    pending_targets = [r.base_model_id for r in transfers if r.status not in TERMINAL]
    robustness, goodhart_note = robustness_measurements(
        {t: r for t, r in robust.items() if t in per_task}, by_task
    )
    aggregate, imputed, measurements = aggregate_measurements(
        list(per_task.values()),
        lifts=[e["baselines"] for e in extras.values() if e.get("baselines")],
        latency_ms=sorted(lat["probe_ms"] for lat in latencies)[len(latencies) // 2],
        license_id=version.license_id,
        transfer_pearsons=pearsons if transfers and not failed_targets and not pending_targets else None,
        has_recipe=version.recipe is not None,
        ea_applicable=ea_applicable,
        has_reference=bool(reference_runs),
        imputation=imputation,
        goodhart=robustness.get(GOODHART_KEY),
        goodhart_note=goodhart_note,
    )
    if failed_targets:
        imputed["rho_ce"] = f"transfer failed on {', '.join(failed_targets)}: default used"
    elif pending_targets:
        imputed["rho_ce"] = (
            f"pending: transfer to {', '.join(pending_targets)} not measured yet (default used until it is)"
        )
    tasks = {t.slug: t for t in Task.objects.filter(slug__in=list(per_task))}
    records = {}
    for task_id, tm in per_task.items():
        text, controlled = _text_lift(
            tasks[task_id], version.probe.base_model_id, by_task[task_id]["test"].example_scores, tm
        )
        records[task_id] = TaskRecord.measured(
            tm, text=text, controlled=controlled, baselines=extras[task_id]["baselines"]
        )
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
        transfer={r.base_model_id: r.metrics.get("transfer", {}).get("pearson") for r in transfers},
        steer=steer_summary(steers),
        stress=stress_measurements(stresses, by_task),
        robustness=robustness,
        imputed=imputed,
    )
    return {
        "measurements": measurements,
        "aggregate": stored_aggregate,
        "per_task": records,
        "reproduction": reproduce.metrics.get("reproduction")
        if reproduce is not None and reproduce.status == Run.Status.SUCCEEDED
        else None,
        "reproduce_error": reproduce.error
        if reproduce is not None and reproduce.status == Run.Status.FAILED
        else "",
        "protocol": protocol,
        "environment": environment,
    }


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


def _measured_under(score_runs: list[EvaluationRun]) -> tuple[str, dict[str, Any]]:
    """The protocol the score runs share ("" when they differ or predate protocols) and the
    environment of the first test run, as recorded by the worker (evaluator.core.environment)."""
    protocols = {r.protocol for r in score_runs}
    protocol = protocols.pop() if len(protocols) == 1 else ""
    tests = sorted((r for r in score_runs if r.split == "test"), key=lambda r: (r.task_id, r.pk))
    environment = dict(tests[0].environment) if tests and tests[0].environment else {}
    return protocol, environment


def scores_write(*, version: ProbeVersion, computed: dict[str, Any]) -> list[Score]:
    """Write (or replace) the Score of ``version`` under every weights spec; once committed, the
    rank intervals of its category's boards are recomputed (services.rank_intervals, by task)."""
    licenses = _licenses()
    rows = []
    for spec_row in WeightsSpec.objects.all():
        score = probe_score(computed["measurements"], spec=_spec_data(spec_row), licenses=licenses)
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
