"""Eval-awareness reference updates: a new reference version was scored, so every dependent's
auroc_ea and ProbeScore are recomputed once it has scored their test items.

    reference_update_start   have the new reference score the dependents' test items
    reference_update_advance then recompute every dependent auroc_ea and ProbeScore from stored
                             per-example scores (no model) and publish the diff
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from evaluator import CODE_VERSION
from evaluator.data.registry.tasks import EVAL_AWARENESS
from leaderboard.models import EvaluationRun, ProbeVersion, ReferenceUpdate, Score, Submission, Task
from leaderboard.policy import spec_version_key
from leaderboard.selectors.shared import EA_REFERENCE_CANDIDATE, scored_versions_all
from leaderboard.services.runs import evaluation_runs_dispatch_on_commit
from leaderboard.services.scores import measurements_compute, scores_write, version_runs_current

log = logging.getLogger(__name__)
Run = EvaluationRun


def dependents_of(*, base_model_id: str) -> list[ProbeVersion]:
    """Scored versions whose auroc_ea depends on the base model's eval-awareness reference probe."""
    return [
        v
        for v in scored_versions_all()
        if v.probe.base_model_id == base_model_id and v.probe.category_id != EVAL_AWARENESS
    ]


def reference_update_start(*, new_version: ProbeVersion, dispatch: bool = True) -> ReferenceUpdate:
    """A new eval-awareness reference version was scored: have it score the test items of every
    task its dependents ran on; once done, their auroc_ea is recomputed (reference_update_advance)."""
    base_model = new_version.probe.base_model
    old = (
        ProbeVersion.objects.public()
        .filter(EA_REFERENCE_CANDIDATE, probe__base_model=base_model)
        .exclude(pk=new_version.pk)
        .order_by("-created_at", "-pk")
        .first()
    )
    with transaction.atomic():
        update, created = ReferenceUpdate.objects.get_or_create(
            new_version=new_version, defaults={"base_model": base_model, "old_version": old}
        )
        if not created:
            return update
        # the scored dependents (recomputed below once these runs are done) and the ones still
        # being measured: those were planned before this reference was scored, so without its runs
        # on their tasks they would be scored with auroc_ea imputed and never recomputed
        in_flight = ProbeVersion.objects.filter(
            probe__base_model=base_model,
            submission__status__in=[Submission.Status.QUEUED, Submission.Status.RUNNING],
        ).exclude(probe__category_id=EVAL_AWARENESS)
        task_ids = set(
            Run.objects.filter(
                Q(probe_version__in=dependents_of(base_model_id=base_model.slug))
                | Q(probe_version__in=in_flight),
                kind=Run.Kind.SCORE,
                split="test",
                cycle=None,
            ).values_list("task_id", flat=True)
        )
        runs = []
        for task in Task.objects.filter(slug__in=task_ids):
            run, made = Run.objects.get_or_create(
                probe_version=new_version,
                kind=Run.Kind.REFERENCE,
                task=task,
                split="test",
                base_model=base_model,
                cycle=None,
                defaults={"code_version": CODE_VERSION},
            )
            if made:
                runs.append(run)
        if dispatch:
            evaluation_runs_dispatch_on_commit(runs)
    log.info(
        "eval-awareness reference update %s on %s: %d reference run(s)", update.pk, base_model.slug, len(runs)
    )
    reference_update_advance(update_id=update.pk)
    return update


def reference_update_advance(*, update_id: int) -> ReferenceUpdate:
    """Once the new reference's runs are done: recompute every dependent's auroc_ea and Score
    from stored per-example scores (no model) and publish the diff. Idempotent."""
    update = ReferenceUpdate.objects.get(pk=update_id)
    if update.status != ReferenceUpdate.Status.RUNNING:
        return update
    ref_runs = {
        r.task_id: r
        for r in Run.objects.filter(probe_version=update.new_version, kind=Run.Kind.REFERENCE, cycle=None)
    }
    if any(r.status not in (Run.Status.SUCCEEDED, Run.Status.FAILED) for r in ref_runs.values()):
        return update
    with transaction.atomic():
        update = ReferenceUpdate.objects.select_for_update().get(pk=update_id)
        if update.status != ReferenceUpdate.Status.RUNNING:
            return update
        failed = sorted(t for t, r in ref_runs.items() if r.status == Run.Status.FAILED)
        usable = {t: r for t, r in ref_runs.items() if r.status == Run.Status.SUCCEEDED}
        diff = []
        for version in dependents_of(base_model_id=update.base_model_id):
            before = {
                s.spec_id: s for s in Score.objects.filter(probe_version=version).select_related("spec")
            }
            if not before:
                continue
            latest_spec = max(before, key=spec_version_key)
            runs = version_runs_current(version)
            computed = measurements_compute(
                version=version,
                runs=runs,
                reference_runs=usable,
                imputation=before[latest_spec].spec.imputation,
            )
            after = {s.spec_id: s for s in scores_write(version=version, computed=computed)}
            b, a = before[latest_spec], after[latest_spec]
            diff.append(
                {
                    "probe": version.probe.slug,
                    "version": version.number,
                    "spec": latest_spec,
                    "auroc_ea_before": b.measurements.get("auroc_ea"),
                    "auroc_ea_after": a.measurements.get("auroc_ea"),
                    "auroc_ea_imputed_after": a.components["auroc_ea"]["imputed"],
                    "total_before": b.total,
                    "total_after": a.total,
                }
            )
        update.diff = diff
        update.error = (
            f"the new reference failed on {', '.join(failed)}: auroc_ea imputed there" if failed else ""
        )
        update.status = ReferenceUpdate.Status.COMPLETED
        update.finished_at = timezone.now()
        update.save(update_fields=["diff", "error", "status", "finished_at"])
    log.info("eval-awareness reference update %s completed: %d entries recomputed", update.pk, len(diff))
    return update


def reference_updates_reconcile() -> int:
    """Advance running reference updates whose runs are all finished. Returns how many completed."""
    done = 0
    for pk in ReferenceUpdate.objects.filter(status=ReferenceUpdate.Status.RUNNING).values_list(
        "pk", flat=True
    ):
        done += reference_update_advance(update_id=pk).status == ReferenceUpdate.Status.COMPLETED
    return done
