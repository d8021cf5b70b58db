"""Quarterly re-evaluation: writes for cycles, diffs, badges, deprecation
and task supersession (eval-awareness reference updates: ``services.reference_updates``).

    reevaluation_start       one cycle per quarter: verify every split file against tasks.yaml,
                             draw each task's holdout with a secret seed (``services.holdouts``),
                             store and publish the commitment, then plan a holdout run of every
                             active probe on every active task of its category, dispatch them
    cycle_advance            once every run of the cycle is finished: compare each probe with its
                             reference AUROC, publish the diff, deprecate, award stability badges,
                             open leakage records, retire superseded tasks, reveal the seed and
                             the holdouts

The reference AUROC of a version is its test AUROC when it was scored (``reference_auroc``); every
cycle compares the fresh holdout AUROC with that same number, so a slow decline accumulates.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from functools import partial
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from evaluator import CODE_VERSION
from evaluator.data.holdouts import quarter_validate
from evaluator.data.registry.load import Registry
from evaluator.errors import EvaluatorError
from evaluator.metrics import metrics
from evaluator.metrics.measure import example_records
from leaderboard.errors import Conflict, ServiceError
from leaderboard.models import (
    CycleResult,
    EvaluationRun,
    Probe,
    ReevaluationCycle,
    Task,
    TaskSplit,
    holdout_entry,
    holdout_public,
    holdouts_map,
)
from leaderboard.policy import DEPRECATE_POINTS, DIFF_POINTS, LEAKAGE_POINTS, STABILITY_MIN_QUARTERS
from leaderboard.registry_sync import registry_load
from leaderboard.selectors.shared import scored_versions, tasks_applicable
from leaderboard.services.coverage import coverage_start, rescore_category
from leaderboard.services.holdouts import commitment_build, holdouts_draw
from leaderboard.services.leakage import leakage_record_open
from leaderboard.services.runs import (
    BUNDLE_PUBLISH_TASK,
    EXAMPLES_EXPORT_TASK,
    RANK_INTERVALS_REFRESH_TASK,
    RELIABILITY_MEASURE_TASK,
    evaluation_runs_dispatch_on_commit,
    task_delay,
    transfer_attacks_refresh,
)

log = logging.getLogger(__name__)
Run = EvaluationRun
Cycle = ReevaluationCycle
Outcome = CycleResult.Outcome

HOLDOUT_SPLIT = "holdout"
TEST_OVER_HOLDOUT_RULE = "test_exceeds_holdout"


def outcome_for(drop_points: float) -> str:
    """≤ 5 points: held; 5–10: listed in the diff; > 10: deprecated."""
    if drop_points > DEPRECATE_POINTS:
        return Outcome.DEPRECATED
    if drop_points > DIFF_POINTS:
        return Outcome.DROPPED
    return Outcome.HELD


# --------------------------------------------------------------------------- starting a cycle


def reevaluation_start(*, quarter: str, by, dispatch: bool = True) -> ReevaluationCycle:
    """Start the cycle of ``quarter`` (staff only: the caller checks).

    One cycle per quarter (Conflict otherwise), quarters in order, one running at a time. A cycle
    that stopped before any run (a split file that does not match tasks.yaml, a pool that cannot
    be built or sampled) is recorded as failed with the reason, and may be started again once
    fixed. The commitment (the seed's SHA-256, each holdout's and pool's) is stored, and so
    public, before the first run is created.
    """
    try:
        quarter_validate(quarter)
    except EvaluatorError as exc:
        raise ServiceError(str(exc), field="quarter") from None
    cycle = _cycle_open(quarter=quarter, by=by)
    try:
        registry = registry_load()
        _splits_verify(registry)
        holdouts, secret = holdouts_draw(registry=registry, cycle=cycle)
    except (EvaluatorError, OSError) as exc:
        Cycle.objects.filter(pk=cycle.pk).update(
            status=Cycle.Status.FAILED, error=str(exc), finished_at=timezone.now()
        )
        log.error("cycle %s stopped before any run: %s", quarter, exc)
        raise ServiceError(
            f"cycle {quarter} stopped before any run: {exc}",
            field="quarter",
            extra={"url": cycle.get_absolute_url()},
        ) from None
    _commit(cycle, holdouts=holdouts, secret=secret)
    runs = _runs_plan(cycle=cycle, holdouts=holdouts, dispatch=dispatch)
    # every active probe is rerun: one missing a task of its category (a refresh running side by
    # side, a new task) is scored on it too, and its Score follows once those runs finish
    backfill = coverage_start(dispatch=dispatch)
    if backfill:
        log.info("cycle %s: %d backfill run(s) for tasks added since scoring", quarter, len(backfill))
    # the transfer attack follows the category's current reference probe
    refreshed = transfer_attacks_refresh(dispatch=dispatch)
    if refreshed:
        log.info("cycle %s: %d transfer attack(s) to measure against a new source", quarter, len(refreshed))
    log.info("cycle %s started: %d holdouts, %d runs", quarter, len(holdouts), len(runs))
    if not runs:
        cycle_advance(cycle_id=cycle.pk)
    cycle.refresh_from_db()
    return cycle


def _cycle_open(*, quarter: str, by) -> ReevaluationCycle:
    """Create the cycle row (or re-open a failed one) under the one-per-quarter rule."""
    with transaction.atomic():
        existing = Cycle.objects.select_for_update().filter(quarter=quarter).first()
        if existing and existing.status != Cycle.Status.FAILED:
            raise Conflict(
                f"a re-evaluation cycle for {quarter} already exists ({existing.status});"
                " there is one per quarter",
                field="quarter",
                extra={"url": existing.get_absolute_url()},
            )
        running = Cycle.objects.filter(status=Cycle.Status.RUNNING).exclude(quarter=quarter).first()
        if running:
            raise Conflict(
                f"the cycle of {running.quarter} is still running; start {quarter} once it has finished",
                field="quarter",
            )
        later = (
            Cycle.objects.filter(status=Cycle.Status.COMPLETED, quarter__gt=quarter)
            .order_by("-quarter")
            .first()
        )
        if later:
            raise Conflict(
                f"the cycle of {later.quarter} has already run; quarters are re-evaluated in order",
                field="quarter",
            )
        if existing:
            existing.status, existing.error, existing.triggered_by = Cycle.Status.RUNNING, "", by
            existing.started_at, existing.finished_at, existing.holdouts, existing.diff = (
                timezone.now(),
                None,
                {},
                {},
            )
            existing.seed, existing.commitment, existing.revealed_at = "", {}, None
            existing.save()
            return existing
        try:
            with transaction.atomic():
                return Cycle.objects.create(quarter=quarter, triggered_by=by)
        except IntegrityError:  # another maintainer started it a moment ago
            raise Conflict(
                f"a re-evaluation cycle for {quarter} already exists; there is one per quarter",
                field="quarter",
            ) from None


def _splits_verify(registry: Registry) -> None:
    """Re-hash every split file against tasks.yaml (SplitHashMismatch names the file and both
    hashes), and check that the database mirrors tasks.yaml (else: run sync_registry)."""
    registry.verify_all_splits()
    stale = []
    for split in TaskSplit.objects.filter(task__status=Task.Status.ACTIVE).select_related("task"):
        spec = registry.tasks.get(split.task_id)
        # an on-policy task's files are pinned per base model (splits_by_model)
        pinned = spec.splits_for(split.base_model_id).get(split.name) if spec else None
        if pinned is None or pinned.sha256 != split.sha256:
            stale.append(f"{split.task_id}/{split.name}")
    if stale:
        raise EvaluatorError(
            f"the database does not mirror tasks.yaml for {', '.join(sorted(stale))};"
            " run `python manage.py sync_registry` first"
        )


def _commit(cycle: ReevaluationCycle, *, holdouts: dict, secret: bytes) -> None:
    """Store the drawn holdouts, the secret and the commitment, in a transaction of their own: the
    commitment is public (the cycle's page and API) before any run exists."""
    with transaction.atomic():
        cycle.holdouts = holdouts
        cycle.seed = secret.hex()
        cycle.commitment = commitment_build(secret=secret, holdouts=holdouts)
        cycle.save(update_fields=["holdouts", "seed", "commitment"])


@transaction.atomic
def _runs_plan(*, cycle: ReevaluationCycle, holdouts: dict, dispatch: bool) -> list[EvaluationRun]:
    tasks_by_category: dict[str, list[Task]] = defaultdict(list)
    for task in Task.objects.filter(status=Task.Status.ACTIVE, slug__in=holdouts):
        tasks_by_category[task.category_id].append(task)
    runs = []
    for version in scored_versions():
        CycleResult.objects.create(
            cycle=cycle, probe_version=version, reference_auroc=version.reference_auroc
        )
        readable, _ = tasks_applicable(version=version, tasks=tasks_by_category[version.probe.category_id])
        for task in readable:  # the tasks it can read (its input's template, its model's files)
            if holdout_entry(holdouts, task.slug, version.probe.base_model_id) is None:
                continue  # an on-policy task without this model's behaviour (the encoder): not measured
            runs.append(
                Run.objects.create(
                    probe_version=version,
                    cycle=cycle,
                    kind=Run.Kind.HOLDOUT,
                    task=task,
                    split=HOLDOUT_SPLIT,
                    base_model_id=version.probe.base_model_id,
                    code_version=CODE_VERSION,
                )
            )
    if dispatch:
        evaluation_runs_dispatch_on_commit(runs)
    return runs


# --------------------------------------------------------------------------- finishing a cycle


def cycle_advance(*, cycle_id: int) -> ReevaluationCycle | None:
    """Finish the cycle if every run is done. Idempotent: returns the cycle when it completed it."""
    runs = Run.objects.filter(cycle_id=cycle_id)
    if runs.exclude(status__in=[Run.Status.SUCCEEDED, Run.Status.FAILED]).exists():
        return None
    with transaction.atomic():
        cycle = Cycle.objects.select_for_update().get(pk=cycle_id)
        if cycle.status != Cycle.Status.RUNNING:
            return None
        _cycle_results_apply(cycle)
        cycle.status = Cycle.Status.COMPLETED
        cycle.finished_at = timezone.now()
        # every run has finished: the seed and the holdouts' rows are public from now on
        cycle.revealed_at = cycle.finished_at if cycle.seed else None
        cycle.save(update_fields=["status", "finished_at", "diff", "revealed_at"])
        # the boards' rank deltas are measured on this cycle's holdout: recompute them; and the
        # quarter's per-example bulk export (services.exports) and signed bundle (services.bundles)
        categories = sorted(
            set(
                CycleResult.objects.filter(cycle=cycle).values_list(
                    "probe_version__probe__category_id", flat=True
                )
            )
        )
        transaction.on_commit(partial(_cycle_followups, cycle.quarter, categories), robust=True)
    log.info("cycle %s completed", cycle.quarter)
    return cycle


def _cycle_followups(quarter: str, categories: list[str]) -> None:
    for category_id in categories:
        task_delay(RANK_INTERVALS_REFRESH_TASK, category_id, True)
    task_delay(EXAMPLES_EXPORT_TASK, quarter)
    if settings.RELIABILITY_EACH_CYCLE:
        task_delay(RELIABILITY_MEASURE_TASK, quarter)
    task_delay(BUNDLE_PUBLISH_TASK, quarter)


def _holdout_aurocs(runs: list[EvaluationRun]) -> dict[str, float] | None:
    """Task → holdout AUROC; None if any task's run failed (or there was none)."""
    values = {}
    for run in runs:
        if run.status != Run.Status.SUCCEEDED:
            return None
        rows = example_records(run.example_scores)
        values[run.task_id] = metrics.auroc([r.score for r in rows], [r.label for r in rows])
    return values or None


def _cycle_results_apply(cycle: ReevaluationCycle) -> None:
    """Fill every CycleResult, update the probes, open leakage records, build the public diff."""
    by_version: dict[int, list[EvaluationRun]] = defaultdict(list)
    for run in Run.objects.filter(cycle=cycle).order_by("task_id"):
        by_version[run.probe_version_id].append(run)
    entries = []
    for result in CycleResult.objects.filter(cycle=cycle).select_related("probe_version__probe"):
        per_task = _holdout_aurocs(by_version[result.probe_version_id])
        entries.append(_result_apply(cycle, result, per_task))
    for entry in entries:
        held = stability_quarters(version_id=entry["version_id"], cycle=cycle)
        Probe.objects.filter(slug=entry["probe"]).update(stability_quarters=held)
        entry["stability_quarters"] = held
    superseded = _supersessions_apply(cycle)
    # a superseded task no longer counts in the Score of the probes measured on it
    rescored = [c for cat in sorted({t["category"] for t in superseded}) for c in rescore_category(cat)]
    listed = [e for e in entries if e["outcome"] in (Outcome.DROPPED, Outcome.DEPRECATED)]
    cycle.diff = {
        "quarter": cycle.quarter,
        "generated_at": timezone.now().isoformat(),
        "thresholds": {
            "diff_points": DIFF_POINTS,
            "deprecate_points": DEPRECATE_POINTS,
            "leakage_points": LEAKAGE_POINTS,
            "stability_min_quarters": STABILITY_MIN_QUARTERS,
        },
        "holdouts": _public_holdouts(cycle.holdouts),
        "counts": {
            o: sum(e["outcome"] == o for e in entries) for o in Outcome.values if o != Outcome.PENDING
        },
        "entries": [_public(e) for e in entries],
        "dropped": [_public(e) for e in listed],
        "deprecated": [_public(e) for e in entries if e["outcome"] == Outcome.DEPRECATED],
        "stability": [
            {"probe": e["probe"], "quarters_held": e["stability_quarters"]}
            for e in entries
            if e["stability_quarters"] >= STABILITY_MIN_QUARTERS
        ],
        "leakage_opened": [e["probe"] for e in entries if e.get("leakage_record")],
        "superseded_tasks": [{"task": t["task"], "superseded_by": t["superseded_by"]} for t in superseded],
        "rescored": rescored,
    }


def _result_apply(cycle: ReevaluationCycle, result: CycleResult, per_task: dict[str, float] | None) -> dict:
    version, probe = result.probe_version, result.probe_version.probe
    reference = version.reference_auroc
    result.test_auroc = reference
    entry: dict[str, Any] = {
        "probe": probe.slug,
        "version": version.number,
        "version_id": version.pk,
        "reference_auroc": reference,
        "holdout_per_task": per_task or {},
    }
    if per_task is None or reference is None:
        result.outcome = Outcome.FAILED
        result.save()
        return entry | {
            "holdout_auroc": None,
            "drop_points": None,
            "outcome": result.outcome,
            "note": "a holdout run failed" if per_task is None else "no reference AUROC",
        }
    holdout = sum(per_task.values()) / len(per_task)
    result.holdout_auroc = holdout
    result.drop_points = round((reference - holdout) * 100, 4)
    result.outcome = outcome_for(result.drop_points)
    result.save()
    entry |= {"holdout_auroc": holdout, "drop_points": result.drop_points, "outcome": result.outcome}
    if result.outcome == Outcome.DEPRECATED:
        probe.status = Probe.Status.DEPRECATED
        probe.deprecated_at = timezone.now()
        probe.deprecated_reason = (
            f"{cycle.quarter}: holdout AUROC {holdout:.3f} is {result.drop_points:.1f} points below the"
            f" reference AUROC {reference:.3f} (more than {DEPRECATE_POINTS:g})"
        )
        probe.save(update_fields=["status", "deprecated_at", "deprecated_reason"])
    if (
        result.drop_points > LEAKAGE_POINTS
    ):  # suspicion rule 1: the test set scores far better than fresh items
        record = leakage_record_open(
            probe=probe,
            probe_version=version,
            rule=TEST_OVER_HOLDOUT_RULE,
            summary=f"test AUROC {reference:.3f} exceeds the {cycle.quarter} holdout AUROC {holdout:.3f}"
            f" by {result.drop_points:.1f} points (more than {LEAKAGE_POINTS:g})",
            evidence={
                "quarter": cycle.quarter,
                "test_auroc": reference,
                "holdout_auroc": holdout,
                "holdout_per_task": per_task,
                "holdouts": {
                    t: h["sha256"]
                    for t in per_task
                    if (h := cycle.holdout_for(t, version.probe.base_model_id)) is not None
                },
            },
        )
        entry["leakage_record"] = record.pk
    return entry


def _public_holdouts(holdouts: dict) -> dict:
    """Each holdout's size, SHA-256, pool and reused rows (an on-policy task's per base model)."""
    return holdouts_map(holdouts, lambda v: {"reused_rows": 0} | holdout_public(v))


def _public(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k not in ("version_id", "leakage_record")}


def stability_quarters(*, version_id: int, cycle: ReevaluationCycle) -> int:
    """Consecutive cycles up to ``cycle`` (newest first) in which this version held."""
    outcomes = dict(
        CycleResult.objects.filter(probe_version_id=version_id).values_list("cycle_id", "outcome")
    )
    held = 0
    for cycle_id in (
        Cycle.objects.filter(quarter__lte=cycle.quarter)
        .exclude(status=Cycle.Status.FAILED)
        .order_by("-quarter")
        .values_list("pk", flat=True)
    ):
        if outcomes.get(cycle_id) != Outcome.HELD:
            break
        held += 1
    return held


def _supersessions_apply(cycle: ReevaluationCycle) -> list[dict[str, str]]:
    """A task being refreshed (active, ``superseded_by`` set from tasks.yaml's ``supersedes``) that
    ran side by side with its successor in this cycle is superseded now."""
    done = []
    for old in Task.objects.filter(status=Task.Status.ACTIVE, superseded_by__isnull=False).order_by("slug"):
        successor = old.superseded_by_id  # never None: filtered above
        if old.slug in cycle.holdouts and successor is not None and successor in cycle.holdouts:
            old.status = Task.Status.SUPERSEDED
            old.save(update_fields=["status"])
            done.append({"task": old.slug, "superseded_by": successor, "category": old.category_id})
    return done


def cycles_reconcile() -> int:
    """Complete running cycles whose runs are all finished (a lost message, a crash). Returns how
    many completed."""
    return sum(
        cycle_advance(cycle_id=pk) is not None
        for pk in Cycle.objects.filter(status=Cycle.Status.RUNNING).values_list("pk", flat=True)
    )
