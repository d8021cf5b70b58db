"""Keep every scored probe measured on the active tasks of its category.

A probe is scored on the tasks that were active when it was submitted. When the registry changes
under it, its Score has to follow:

- a task is added to the category (a refreshed task running side by side with the one it
  supersedes, or simply a new task): :func:`coverage_start` plans the missing score
  runs (test, train, distshift) for the latest scored version of every active probe, and the
  eval-awareness reference probe's runs on the new task's test split. The maintainer starts it
  with ``python manage.py backfill_tasks``; every quarterly cycle starts it too.
- a task is superseded: its runs stay stored, but the Score no longer averages over it.

:func:`version_rescore` recomputes a version's Score from its stored per-example scores (no model)
once every run it waits on has finished, and only when the set of tasks it is measured on has
changed. It is called when a backfill run finishes, when a cycle supersedes a task, and by the
reconciler (a lost message).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import F, OuterRef, Q, Subquery

from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.errors import EvaluatorError
from evaluator.metrics.measure import declared_gaps
from leaderboard.models import EvaluationRun, ProbeVersion, Score, Task
from leaderboard.policy import spec_version_key
from leaderboard.selectors.shared import (
    ea_reference_version,
    scored_versions,
    scored_versions_all,
    tasks_applicable,
)
from leaderboard.services.leakage import leakage_rules_on_scoring
from leaderboard.services.runs import TERMINAL, evaluation_runs_dispatch_on_commit, score_runs_plan
from leaderboard.services.scores import (
    active_task_ids,
    measurements_compute,
    reference_runs_for,
    scores_write,
    version_runs_current,
)

log = logging.getLogger(__name__)
Run = EvaluationRun


def coverage_missing() -> dict[ProbeVersion, list[Task]]:
    """Latest scored version of each active probe that our workers scored → the active tasks of
    its category that it can read (``selectors.shared.tasks_applicable``) and has no test score
    run on."""
    by_category: dict[str, list[Task]] = {}
    for task in Task.objects.filter(status=Task.Status.ACTIVE).order_by("slug"):
        by_category.setdefault(task.category_id, []).append(task)
    versions = scored_versions()
    covered: dict[int, set[str]] = {}
    for version_id, task_id in Run.objects.filter(
        probe_version__in=versions, kind=Run.Kind.SCORE, split="test", cycle=None
    ).values_list("probe_version_id", "task_id"):
        covered.setdefault(version_id, set()).add(task_id)
    missing = {}
    for version in versions:
        if version.pk not in covered:
            continue  # never scored by our workers (nothing to extend)
        # only the tasks it can read: a probe is complete when every applicable task is scored
        tasks, _ = tasks_applicable(
            version=version,
            tasks=[
                t
                for t in by_category.get(version.probe.category_id, [])
                if t.slug not in covered.get(version.pk, set())
            ],
        )
        if tasks:
            missing[version] = tasks
    return missing


def coverage_start(*, dispatch: bool = True) -> list[EvaluationRun]:
    """Plan (and dispatch once committed) the score runs that bring every active probe onto every
    active task of its category. Idempotent: returns the runs to dispatch."""
    planned: list[EvaluationRun] = []
    with transaction.atomic():
        for version, tasks in coverage_missing().items():
            planned += score_runs_plan(version=version, tasks=tasks, submission=None)
            log.info(
                "backfill: %s v%d on %s", version.probe.slug, version.number, ", ".join(t.slug for t in tasks)
            )
        if dispatch:
            evaluation_runs_dispatch_on_commit(planned)
    return planned


def _latest_score(version: ProbeVersion) -> Score | None:
    scores = list(Score.objects.filter(probe_version=version).select_related("spec"))
    if not scores:
        return None
    return max(scores, key=lambda s: spec_version_key(s.spec_id))


def version_rescore(*, version: ProbeVersion, force: bool = False) -> dict[str, Any] | None:
    """Recompute ``version``'s Score on the active tasks it has been measured on, if that set
    differs from the one its Score averages over (or ``force``: after a change of how a number is
    computed from the stored runs, such as the text baseline the lift is measured over) and no run
    it needs is still going. Returns what changed (for the public record), or None."""
    before = _latest_score(version)
    if before is None:
        return None
    active = active_task_ids(version.probe.category_id)
    # its score runs, and the eval-awareness reference runs its auroc_ea needs, all finished
    waiting_on = Q(probe_version=version, kind=Run.Kind.SCORE)
    ref = (
        ea_reference_version(base_model=version.probe.base_model)
        if version.probe.category_id != EVAL_AWARENESS
        else None
    )
    if ref is not None:
        waiting_on |= Q(probe_version=ref, kind=Run.Kind.REFERENCE)
    if Run.objects.filter(waiting_on, cycle=None, task_id__in=active).exclude(status__in=TERMINAL).exists():
        return None
    references = reference_runs_for(version)  # successful ones only
    runs = version_runs_current(version, active=active)
    tasks_after = sorted({r.task_id for r in runs if r.kind == Run.Kind.SCORE})
    tasks_before = sorted(before.per_task)
    if not tasks_after or (tasks_after == tasks_before and not force):
        return None
    try:
        with transaction.atomic():
            computed = measurements_compute(
                version=version, runs=runs, reference_runs=references, imputation=before.spec.imputation
            )
            after = {s.spec_id: s for s in scores_write(version=version, computed=computed)}[before.spec_id]
            aggregate = computed["aggregate"]
            gaps = declared_gaps(version.declared_metrics, aggregate)
            version.declared_gaps = {k: v for k, v in gaps.items() if v["flagged"]}
            version.reference_auroc = aggregate["auroc"]
            version.save(update_fields=["declared_gaps", "reference_auroc"])
    except EvaluatorError as exc:
        log.warning("rescoring %s v%d failed: %s", version.probe.slug, version.number, exc)
        return None
    leakage_rules_on_scoring(version=version)
    change = {
        "probe": version.probe.slug,
        "version": version.number,
        "tasks_before": tasks_before,
        "tasks_after": tasks_after,
        "auroc_before": before.measurements.get("auroc"),
        "auroc_after": after.measurements.get("auroc"),
        "total_before": before.total,
        "total_after": after.total,
        "lift_over_text_before": before.measurements.get("lift_over_text"),
        "lift_over_text_after": after.measurements.get("lift_over_text"),
    }
    log.info("rescored %s", change)
    return change


def rescore_category(category_id: str, *, force: bool = False) -> list[dict[str, Any]]:
    """Rescore the latest scored version of every probe in a category (after a supersession; with
    ``force``, every one, from its stored runs)."""
    changes = []
    for version in scored_versions_all():
        if version.probe.category_id == category_id:
            change = version_rescore(version=version, force=force)
            if change:
                changes.append(change)
    return changes


def backfilled_versions(
    *, base_model_id: str | None = None, task_id: str | None = None
) -> list[ProbeVersion]:
    """Versions with backfill score runs (no submission, no cycle), optionally on one model/task."""
    runs = Run.objects.filter(kind=Run.Kind.SCORE, cycle=None, submission=None)
    if base_model_id:
        runs = runs.filter(base_model_id=base_model_id)
    if task_id:
        runs = runs.filter(task_id=task_id)
    ids = set(runs.values_list("probe_version_id", flat=True))
    return list(ProbeVersion.objects.filter(pk__in=ids).select_related("probe"))


def coverage_advance_for_run(run: EvaluationRun) -> None:
    """A run finished: rescore the version(s) whose backfill it completes."""
    if run.cycle_id is not None:
        return
    if run.kind == Run.Kind.SCORE and run.submission_id is None:
        version_rescore(version=run.probe_version)
    elif run.kind == Run.Kind.REFERENCE:
        for version in backfilled_versions(base_model_id=run.base_model_id, task_id=run.task_id):
            version_rescore(version=version)


def coverage_reconcile() -> int:
    """Rescore backfilled versions whose last backfill run finished after their Score was computed
    (the message that should have done it was lost). One query finds them. Returns how many
    changed."""
    backfill = Run.objects.filter(kind=Run.Kind.SCORE, cycle=None, submission=None)
    last_run = (
        backfill.filter(probe_version=OuterRef("pk"), finished_at__isnull=False)
        .order_by("-finished_at")
        .values("finished_at")[:1]
    )
    newest_score = (
        Score.objects.filter(probe_version=OuterRef("pk")).order_by("-computed_at").values("computed_at")[:1]
    )
    stale = (
        ProbeVersion.objects.filter(pk__in=backfill.values("probe_version_id"))
        .annotate(last_run=Subquery(last_run), newest_score=Subquery(newest_score))
        .filter(last_run__gt=F("newest_score"))
        .select_related("probe")
    )
    return sum(version_rescore(version=version) is not None for version in stale)
