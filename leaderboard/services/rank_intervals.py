"""Rank intervals of the boards: the paired bootstrap of ``evaluator.metrics.rank_intervals`` over the
stored per-example scores, written to RankInterval with the board's other orders (the Borda rank
across the category's tasks and the rank delta on the latest quarterly holdout, ``evaluator.metrics.ranks``).
Computed when scores change or a cycle completes, never per request.

    rank_intervals_refresh      recompute every board (weights spec) of a category, if stale
    rank_intervals_reconcile    recompute the stale boards of every category (beat, by hand)

A board is one category under one weights spec; its entries are the latest scored version of
each active probe with a Score under that spec (the board's own selection), ranked by norm 2.
The score writer (services.scores) schedules :func:`rank_intervals_refresh` for the category on
commit; the reconciler catches what a lost message or a deprecation left stale.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.errors import EvaluatorError
from evaluator.metrics.measure import ScoredExamples, example_records
from evaluator.metrics.metrics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from evaluator.metrics.rank_intervals import BoardEntry, TaskRows, board_rank_intervals
from evaluator.metrics.ranks import borda_ranks, rank_deltas
from evaluator.metrics.records import measurements_from_stored
from evaluator.metrics.scoring import Measurements
from leaderboard.models import (
    Category,
    CycleResult,
    EvaluationRun,
    Probe,
    RankInterval,
    ReevaluationCycle,
    Score,
)
from leaderboard.services.scores import _licenses, _spec_data, reference_runs_for

log = logging.getLogger(__name__)
Run = EvaluationRun


def board_scores(*, category_id: str, spec_id: str) -> list[Score]:
    """The Scores on one board: each active probe's newest scored version with a Score under the
    spec, in slug order (the board breaks exact ties by slug)."""
    active = Q(
        probe_version__probe__category_id=category_id, probe_version__probe__status=Probe.Status.ACTIVE
    )
    return list(
        Score.objects.on_board(spec=spec_id, filters=active)
        .select_related("probe_version__probe__base_model", "rank_interval")
        .order_by("probe_version__probe__slug")
    )


def _measurements(score: Score) -> Measurements:
    return measurements_from_stored(score.measurements or {}, license_id=score.probe_version.license_id)


def _entry(score: Score, reference_cache: dict) -> BoardEntry:
    """One board entry with the per-example rows of its Score's tasks (test and distshift runs
    outside any cycle) and its base model's eval-awareness reference scores."""
    version = score.probe_version
    tasks = sorted(score.per_task or {})
    runs = Run.objects.filter(
        probe_version=version,
        kind=Run.Kind.SCORE,
        cycle=None,
        status=Run.Status.SUCCEEDED,
        task_id__in=tasks,
        split__in=["test", "distshift"],
    ).only("task_id", "split", "example_scores")
    by_task: dict[str, dict[str, ScoredExamples]] = defaultdict(dict)
    for run in runs:
        by_task[run.task_id][run.split] = ScoredExamples.from_records(run.example_scores)
    references: dict[str, dict[str, float]] = {}
    if version.probe.category_id != EVAL_AWARENESS:
        key = version.probe.base_model_id
        if key not in reference_cache:
            reference_cache[key] = {
                task_id: {e.id: e.score for e in example_records(run.example_scores)}
                for task_id, run in reference_runs_for(version).items()
            }
        references = reference_cache[key]
    rows = {}
    for task_id in tasks:
        splits = by_task.get(task_id, {})
        if "test" not in splits:
            log.warning("rank intervals: %s has no stored test rows on %s: held fixed", version, task_id)
            return BoardEntry(key=str(score.pk), tasks={}, measurements=_measurements(score))
        test, ds = splits["test"], splits.get("distshift")
        rows[task_id] = TaskRows(
            test_ids=test.ids,
            test_labels=test.labels,
            test_scores=test.scores,
            test_probs=test.probs,
            ea_reference=references.get(task_id),
            distshift_ids=None if ds is None else ds.ids,
            distshift_labels=None if ds is None else ds.labels,
            distshift_scores=None if ds is None else ds.scores,
        )
    return BoardEntry(key=str(score.pk), tasks=rows, measurements=_measurements(score))


def _stale(scores: list[Score]) -> bool:
    if not scores:
        return False
    n = len(scores)
    for score in scores:
        interval = getattr(score, "rank_interval", None)
        if interval is None or interval.computed_at < score.computed_at or interval.n_entries != n:
            return True
    return False


def _task_aurocs(score: Score) -> dict[str, float | None]:
    """Task → the Score's test AUROC there (what the Borda view ranks on)."""
    out: dict[str, float | None] = {}
    for task_id, result in (score.per_task or {}).items():
        value = (result or {}).get("auroc")
        out[task_id] = float(value) if isinstance(value, (int, float)) else None
    return out


def _rank_deltas(scores: list[Score]) -> tuple[dict[str, int], str]:
    """Score key → rank on the latest completed cycle's holdout minus rank on test, over the
    entries that cycle measured, and that cycle's quarter ("" when none has completed)."""
    cycle = (
        ReevaluationCycle.objects.filter(status=ReevaluationCycle.Status.COMPLETED)
        .order_by("-quarter")
        .first()
    )
    if cycle is None:
        return {}, ""
    by_version = {s.probe_version_id: str(s.pk) for s in scores}
    pairs = {
        by_version[r.probe_version_id]: (r.holdout_auroc, r.test_auroc)
        for r in CycleResult.objects.filter(cycle=cycle, probe_version_id__in=list(by_version))
    }
    return rank_deltas(pairs), cycle.quarter


def board_rank_intervals_write(
    *, category_id: str, spec_id: str, n_resamples: int = BOOTSTRAP_RESAMPLES, force: bool = False
) -> int | None:
    """Recompute one board's rank intervals when stale (or ``force``). Returns how many entries
    were written, None when the stored ones were current."""
    from leaderboard.models import WeightsSpec

    scores = board_scores(category_id=category_id, spec_id=spec_id)
    ids = {s.pk for s in scores}
    leftover = RankInterval.objects.filter(
        score__spec_id=spec_id, score__probe_version__probe__category_id=category_id
    ).exclude(score_id__in=ids)
    if not force and not _stale(scores) and not leftover.exists():
        return None
    spec = _spec_data(WeightsSpec.objects.get(pk=spec_id))
    cache: dict = {}
    entries = [_entry(s, cache) for s in scores]
    results = board_rank_intervals(
        entries, spec=spec, licenses=_licenses(), n_resamples=n_resamples, seed=BOOTSTRAP_SEED
    )
    borda = borda_ranks({str(s.pk): _task_aurocs(s) for s in scores})
    deltas, quarter = _rank_deltas(scores)
    now = timezone.now()
    with transaction.atomic():
        leftover.delete()
        RankInterval.objects.filter(score_id__in=ids).delete()
        RankInterval.objects.bulk_create(
            RankInterval(
                score_id=int(r.key),
                score_lo=r.score_ci[0],
                score_hi=r.score_ci[1],
                rank=r.rank,
                rank_lo=r.rank_ci[0],
                rank_hi=r.rank_ci[1],
                tied_for_first=r.tied_for_first,
                tie_group=r.tie_group,
                borda_rank=borda.get(r.key, (None, None))[0],
                borda_score=borda.get(r.key, (None, None))[1],
                rank_delta=deltas.get(r.key),
                rank_delta_quarter=quarter if r.key in deltas else "",
                n_entries=len(results),
                n_resamples=n_resamples,
                seed=BOOTSTRAP_SEED,
                computed_at=now,
            )
            for r in results
        )
    return len(results)


def rank_intervals_refresh(*, category_id: str, force: bool = False) -> dict[str, int | None]:
    """Every board of ``category_id`` (one per weights spec): spec → entries written (None: current,
    or stored data that cannot be resampled, which is logged and left as it was)."""
    from leaderboard.models import WeightsSpec

    out = {}
    for spec_id in WeightsSpec.objects.values_list("pk", flat=True):
        try:
            out[spec_id] = board_rank_intervals_write(category_id=category_id, spec_id=spec_id, force=force)
        except EvaluatorError:
            log.exception("rank intervals of %s under %s could not be computed", category_id, spec_id)
            out[spec_id] = None
    return out


def rank_intervals_reconcile() -> int:
    """Recompute every stale board. Returns how many boards were recomputed."""
    done = 0
    for category_id in Category.objects.values_list("slug", flat=True):
        done += sum(v is not None for v in rank_intervals_refresh(category_id=category_id).values())
    return done
