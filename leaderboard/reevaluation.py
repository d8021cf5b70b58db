"""Quarterly re-evaluation (SPEC.md §5 norm 4, §6): writes for cycles, diffs, badges, deprecation.

    reevaluation_start   verify every split hash, mint each task's holdout, plan a holdout run of
                         every active probe on every task of its category, dispatch them
    cycle_advance        once every run of the cycle is finished: compare each probe with its
                         reference AUROC, publish the diff, deprecate, award stability badges,
                         open leakage records for review
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evaluator import CODE_VERSION, metrics
from evaluator.errors import EvaluatorError, RegistryError
from evaluator.holdouts import mint_holdout, quarter_validate, read_rows
from leaderboard.errors import Conflict, ServiceError
from leaderboard.models import (
    CycleResult,
    EvaluationRun,
    Probe,
    ProbeVersion,
    ReevaluationCycle,
    Submission,
    Task,
)
from leaderboard.registry_sync import registry_load

log = logging.getLogger(__name__)
Run = EvaluationRun
Outcome = CycleResult.Outcome

DIFF_POINTS = 5.0  # a drop above this is listed in the public diff
DEPRECATE_POINTS = 10.0  # a drop above this deprecates the entry
LEAKAGE_POINTS = 10.0  # test AUROC above holdout AUROC by more than this opens a leakage record
STABILITY_MIN_QUARTERS = 2
HOLDOUT_SPLIT = "holdout"


def outcome_for(drop_points: float) -> str:
    """≤ 5 points: held; 5–10: listed in the diff; > 10: deprecated."""
    if drop_points > DEPRECATE_POINTS:
        return Outcome.DEPRECATED
    if drop_points > DIFF_POINTS:
        return Outcome.DROPPED
    return Outcome.HELD


def holdout_path(quarter: str, task_id: str) -> Path:
    return Path(settings.DATA_DIR) / "holdouts" / quarter / f"{task_id}.jsonl"


def scored_versions():
    """The entries a cycle re-evaluates: the latest scored version of every active probe."""
    latest: dict[int, ProbeVersion] = {}
    qs = (
        ProbeVersion.objects.filter(submission__status=Submission.Status.SCORED, probe__status=Probe.Status.ACTIVE)
        .select_related("probe")
        .order_by("probe_id", "-number")
    )
    for v in qs:
        latest.setdefault(v.probe_id, v)
    return list(latest.values())


def reevaluation_start(*, quarter: str, by, dispatch: bool = True) -> ReevaluationCycle:
    """Start the cycle of ``quarter`` (staff only: the caller checks). One cycle per quarter; a
    cycle that failed its hash check may be started again once the files are fixed."""
    try:
        quarter_validate(quarter)
    except EvaluatorError as exc:
        raise ServiceError(str(exc), field="quarter") from None
    existing = ReevaluationCycle.objects.filter(quarter=quarter).first()
    if existing and existing.status != ReevaluationCycle.Status.FAILED:
        raise Conflict(f"a re-evaluation cycle for {quarter} already exists ({existing.status}); one per quarter")
    registry = registry_load()
    with transaction.atomic():
        if existing:
            cycle = existing
            cycle.status, cycle.error, cycle.triggered_by = ReevaluationCycle.Status.RUNNING, "", by
            cycle.started_at, cycle.finished_at, cycle.holdouts, cycle.diff = timezone.now(), None, {}, {}
            cycle.save()
        else:
            cycle = ReevaluationCycle.objects.create(quarter=quarter, triggered_by=by)
    # 1. every split file against tasks.yaml: a mismatch stops the cycle before any run
    try:
        registry.verify_all_splits()
    except RegistryError as exc:
        cycle.status, cycle.error, cycle.finished_at = ReevaluationCycle.Status.FAILED, str(exc), timezone.now()
        cycle.save(update_fields=["status", "error", "finished_at"])
        raise ServiceError(f"cycle {quarter} stopped before any run: {exc}") from None
    # 2. mint the holdouts
    used: dict[str, set[str]] = defaultdict(set)
    for earlier in ReevaluationCycle.objects.exclude(pk=cycle.pk).exclude(status=ReevaluationCycle.Status.FAILED):
        for task_id, h in earlier.holdouts.items():
            used[task_id].update(h.get("ids", []))
    holdouts = {}
    for task in Task.objects.filter(status=Task.Status.ACTIVE):
        spec = registry.task(task.slug)
        pool = read_rows(registry.root / spec.splits["holdout_pool"].path)
        h = mint_holdout(task_id=task.slug, quarter=quarter, pool=pool, used_ids=used[task.slug])
        path = holdout_path(quarter, task.slug)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(h.to_bytes())
        holdouts[task.slug] = {"path": str(path.relative_to(settings.DATA_DIR)), "rows": len(h.rows),
                               "sha256": h.sha256, "ids": h.ids, "reused_rows": h.reused_rows}
    # 3. plan the runs
    with transaction.atomic():
        cycle.holdouts = holdouts
        cycle.save(update_fields=["holdouts"])
        runs = []
        for version in scored_versions():
            CycleResult.objects.create(cycle=cycle, probe_version=version, reference_auroc=version.reference_auroc)
            for task in Task.objects.filter(category_id=version.probe.category_id, status=Task.Status.ACTIVE):
                runs.append(Run.objects.create(
                    probe_version=version, cycle=cycle, kind=Run.Kind.HOLDOUT, task=task,
                    split=HOLDOUT_SPLIT, base_model_id=version.probe.base_model_id, code_version=CODE_VERSION,
                ))
        if dispatch:
            from leaderboard.services import evaluation_runs_dispatch_on_commit

            evaluation_runs_dispatch_on_commit(runs)
    log.info("cycle %s started: %d holdouts, %d runs", quarter, len(holdouts), len(runs))
    if not runs:
        cycle_advance(cycle_id=cycle.pk)
    return cycle


def cycle_advance(*, cycle_id: int) -> ReevaluationCycle | None:
    """Finish the cycle if every run is done. Idempotent."""
    runs = list(Run.objects.filter(cycle_id=cycle_id).only("status"))
    if any(r.status not in (Run.Status.SUCCEEDED, Run.Status.FAILED) for r in runs):
        return None
    with transaction.atomic():
        cycle = ReevaluationCycle.objects.select_for_update().get(pk=cycle_id)
        if cycle.status != ReevaluationCycle.Status.RUNNING:
            return None
        _cycle_results_apply(cycle)
        cycle.status = ReevaluationCycle.Status.COMPLETED
        cycle.finished_at = timezone.now()
        cycle.save(update_fields=["status", "finished_at", "diff"])
    return cycle


def _holdout_auroc(runs: list[EvaluationRun]) -> float | None:
    """Mean holdout AUROC over the tasks; None if any task's run failed."""
    values = []
    for run in runs:
        if run.status != Run.Status.SUCCEEDED:
            return None
        scores = [e["score"] for e in run.example_scores]
        labels = [e["label"] for e in run.example_scores]
        values.append(metrics.auroc(scores, labels))
    return sum(values) / len(values) if values else None


def _cycle_results_apply(cycle: ReevaluationCycle) -> None:
    from leaderboard.services import leakage_record_open

    by_version: dict[int, list[EvaluationRun]] = defaultdict(list)
    for run in Run.objects.filter(cycle=cycle).order_by("task_id"):
        by_version[run.probe_version_id].append(run)
    entries, dropped, deprecated, stability = [], [], [], []
    for result in CycleResult.objects.filter(cycle=cycle).select_related("probe_version__probe"):
        version, probe = result.probe_version, result.probe_version.probe
        holdout = _holdout_auroc(by_version[version.pk])
        result.holdout_auroc = holdout
        result.test_auroc = version.reference_auroc
        if holdout is None or version.reference_auroc is None:
            result.outcome = Outcome.FAILED
            result.save()
            entries.append(_entry(result))
            continue
        result.drop_points = round((version.reference_auroc - holdout) * 100, 4)
        result.outcome = outcome_for(result.drop_points)
        result.save()
        entry = _entry(result)
        entries.append(entry)
        if result.outcome == Outcome.HELD:
            probe.stability_quarters += 1
        else:
            probe.stability_quarters = 0
        if result.outcome == Outcome.DROPPED:
            dropped.append(entry)
        if result.outcome == Outcome.DEPRECATED:
            probe.status = Probe.Status.DEPRECATED
            probe.deprecated_at = timezone.now()
            probe.deprecated_reason = (
                f"{cycle.quarter}: holdout AUROC {holdout:.3f} is {result.drop_points:.1f} points below the"
                f" reference AUROC {version.reference_auroc:.3f} (more than {DEPRECATE_POINTS:.0f})"
            )
            deprecated.append(entry)
        probe.save(update_fields=["stability_quarters", "status", "deprecated_at", "deprecated_reason"])
        if probe.stability_quarters >= STABILITY_MIN_QUARTERS:
            stability.append({"probe": probe.slug, "quarters_held": probe.stability_quarters})
        # suspicion rule: the test set scores much better than fresh holdout items
        if (version.reference_auroc - holdout) * 100 > LEAKAGE_POINTS:
            leakage_record_open(
                probe=probe, probe_version=version, rule="test_exceeds_holdout",
                summary=f"test AUROC {version.reference_auroc:.3f} exceeds the {cycle.quarter} holdout AUROC"
                        f" {holdout:.3f} by {(version.reference_auroc - holdout) * 100:.1f} points",
                evidence={"quarter": cycle.quarter, "test_auroc": version.reference_auroc,
                          "holdout_auroc": holdout, "holdouts": {k: v["sha256"] for k, v in cycle.holdouts.items()}},
            )
    cycle.diff = {
        "quarter": cycle.quarter,
        "generated_at": timezone.now().isoformat(),
        "thresholds": {"diff_points": DIFF_POINTS, "deprecate_points": DEPRECATE_POINTS},
        "holdouts": {k: {"rows": v["rows"], "sha256": v["sha256"], "reused_rows": v.get("reused_rows", 0)}
                     for k, v in cycle.holdouts.items()},
        "entries": entries,
        "dropped": dropped,
        "deprecated": deprecated,
        "stability": stability,
    }


def _entry(result: CycleResult) -> dict:
    v = result.probe_version
    return {"probe": v.probe.slug, "version": v.number, "reference_auroc": result.reference_auroc,
            "holdout_auroc": result.holdout_auroc, "drop_points": result.drop_points, "outcome": result.outcome}


# --------------------------------------------------------------------------- reference probe updates


def dependents_of(*, base_model_id: str) -> list[ProbeVersion]:
    """Scored versions whose auroc_ea depends on the base model's eval-awareness reference probe."""
    from leaderboard.services import EA_ROLE

    return [v for v in scored_versions_all() if v.probe.base_model_id == base_model_id
            and v.probe.category_id != EA_ROLE]


def scored_versions_all() -> list[ProbeVersion]:
    """The latest scored version of every probe, active or deprecated."""
    latest: dict[int, ProbeVersion] = {}
    qs = (ProbeVersion.objects.filter(submission__status=Submission.Status.SCORED)
          .select_related("probe").order_by("probe_id", "-number"))
    for v in qs:
        latest.setdefault(v.probe_id, v)
    return list(latest.values())


def reference_update_start(*, new_version: ProbeVersion, dispatch: bool = True):
    """A new eval-awareness reference version was scored: have it score the test items of every
    task its dependents ran on, then recompute their auroc_ea from stored scores."""
    from leaderboard.models import ReferenceUpdate
    from leaderboard.services import EA_ROLE, evaluation_runs_dispatch_on_commit

    base_model = new_version.probe.base_model
    old = (ProbeVersion.objects.filter(probe__base_model=base_model, probe__reference_role=EA_ROLE,
                                       submission__status=Submission.Status.SCORED)
           .exclude(pk=new_version.pk).order_by("-created_at", "-pk").first())
    with transaction.atomic():
        update, created = ReferenceUpdate.objects.get_or_create(
            new_version=new_version, defaults={"base_model": base_model, "old_version": old})
        if not created:
            return update
        tasks = {t for v in dependents_of(base_model_id=base_model.slug)
                 for t in Task.objects.filter(category_id=v.probe.category_id, status=Task.Status.ACTIVE)}
        runs = []
        for task in tasks:
            run, made = Run.objects.get_or_create(
                probe_version=new_version, kind=Run.Kind.REFERENCE, task=task, split="test",
                base_model=base_model, cycle=None, defaults={"code_version": CODE_VERSION})
            if made:
                runs.append(run)
        if dispatch:
            evaluation_runs_dispatch_on_commit(runs)
    reference_update_advance(update_id=update.pk)
    return update


def reference_update_advance(*, update_id: int):
    """Once the new reference's runs are done: recompute every dependent's auroc_ea and Score
    from stored per-example scores (no model) and publish the diff. Idempotent."""
    from leaderboard.models import ReferenceUpdate, Score
    from leaderboard.scoring import measurements_compute, scores_write

    update = ReferenceUpdate.objects.get(pk=update_id)
    if update.status != ReferenceUpdate.Status.RUNNING:
        return update
    ref_runs = {r.task_id: r for r in Run.objects.filter(
        probe_version=update.new_version, kind=Run.Kind.REFERENCE, cycle=None)}
    if any(r.status not in (Run.Status.SUCCEEDED, Run.Status.FAILED) for r in ref_runs.values()):
        return update
    with transaction.atomic():
        update = ReferenceUpdate.objects.select_for_update().get(pk=update_id)
        if update.status != ReferenceUpdate.Status.RUNNING:
            return update
        diff = []
        for version in dependents_of(base_model_id=update.base_model_id):
            before = {s.spec_id: s for s in Score.objects.filter(probe_version=version)}
            latest_spec = max(before, default=None, key=lambda v: tuple(int(x) for x in v[1:].split(".")))
            if latest_spec is None:
                continue
            imputation = before[latest_spec].spec.imputation
            runs = list(Run.objects.filter(probe_version=version, cycle=None))
            computed = measurements_compute(version=version, runs=runs, reference_runs=ref_runs, imputation=imputation)
            after = {s.spec_id: s for s in scores_write(version=version, computed=computed)}
            b, a = before[latest_spec], after[latest_spec]
            diff.append({
                "probe": version.probe.slug, "version": version.number, "spec": latest_spec,
                "auroc_ea_before": b.measurements.get("auroc_ea"), "auroc_ea_after": a.measurements.get("auroc_ea"),
                "auroc_ea_imputed_after": a.components["auroc_ea"]["imputed"],
                "total_before": b.total, "total_after": a.total,
            })
        update.diff = diff
        update.status = ReferenceUpdate.Status.COMPLETED
        update.finished_at = timezone.now()
        update.save(update_fields=["diff", "status", "finished_at"])
    return update
