"""A scored probe follows the active tasks of its category: a task added after it was scored is
backfilled (score runs planned, the Score recomputed from stored per-example scores once they
finish), and a task superseded by a cycle stops counting in its Score."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from leaderboard import models as m
from leaderboard.registry_sync import registry_sync
from leaderboard.services.coverage import (
    coverage_advance_for_run,
    coverage_missing,
    coverage_start,
    version_rescore,
)
from leaderboard.services.scores import submission_score
from tests.leaderboard.reevaluation_data import TRUTH_TASK, run_cycle, scored, synthetic_scores
from tests.leaderboard.test_reevaluation_supersession import NEW_TASK, add_refreshed_task

pytestmark = pytest.mark.django_db
Run = m.EvaluationRun
LATENCY = {"probe_ms": 0.2, "device": "cpu", "model_forward_ms": 12.0}


def finish(run: m.EvaluationRun, auroc: float) -> m.EvaluationRun:
    """Finish a score run as a worker would: per-example scores, and on test the latency."""
    run.status = Run.Status.SUCCEEDED
    run.finished_at = timezone.now()
    run.example_scores = synthetic_scores(auroc)
    run.metrics = {"latency": LATENCY, "baselines": None} if run.split == "test" else {}
    run.save()
    return run


def worker_scored(slug: str, auroc: float) -> m.ProbeVersion:
    """A version scored the way the pipeline scores it: score runs on the category's active tasks
    with per-example scores, then submission_score."""
    version = scored(slug, status=m.Submission.Status.SCORED)
    runs = []
    for task in m.Task.objects.filter(category_id="hallucination", status=m.Task.Status.ACTIVE):
        for split in ("test", "train", "distshift"):
            run = Run.objects.create(
                probe_version=version,
                submission=version.submission,
                kind=Run.Kind.SCORE,
                task=task,
                split=split,
                base_model=version.probe.base_model,
            )
            runs.append(finish(run, auroc))
    submission_score(submission=version.submission, runs=runs)
    return version


def latest(version: m.ProbeVersion) -> m.Score:
    return m.Score.objects.get(probe_version=version, spec_id="v0.0.1")


@pytest.fixture
def truthful(small_registry):
    """Scored on cities-truth-v1 (AUROC 0.9); then cities-truth-v2 is added beside it."""
    version = worker_scored("truthful", 0.9)
    assert sorted(latest(version).per_task) == [TRUTH_TASK]
    add_refreshed_task(small_registry)
    registry_sync()
    return version


def test_a_task_added_after_scoring_is_missing_and_said_by_sync_registry(truthful):
    assert {v.probe.slug: [t.slug for t in ts] for v, ts in coverage_missing().items()} == {
        "truthful": [NEW_TASK]
    }
    out = StringIO()
    call_command("sync_registry", stdout=out)
    assert f"not measured on active task(s) {NEW_TASK}" in out.getvalue()
    assert "backfill_tasks" in out.getvalue()


def test_probes_never_scored_by_the_workers_are_not_backfilled(truthful):
    scored("fixture-only")  # a Score but no run of ours
    assert [v.probe.slug for v in coverage_missing()] == ["truthful"]


def test_backfill_plans_the_missing_runs_once_and_the_score_follows_when_they_finish(truthful):
    runs = coverage_start(dispatch=False)
    assert sorted((r.task_id, r.split) for r in runs) == [
        (NEW_TASK, s) for s in ("distshift", "test", "train")
    ]
    assert all(r.submission_id is None and r.cycle_id is None for r in runs)
    assert coverage_start(dispatch=False) == [] and coverage_missing() == {}

    # nothing changes while a run is still going
    for run in runs[:-1]:
        finish(run, 0.7)
        coverage_advance_for_run(run)
    assert version_rescore(version=truthful) is None
    assert sorted(latest(truthful).per_task) == [TRUTH_TASK]

    finish(runs[-1], 0.7)
    coverage_advance_for_run(runs[-1])  # what a worker calls when it finishes the run
    score = latest(truthful)
    assert sorted(score.per_task) == [TRUTH_TASK, NEW_TASK]
    assert score.per_task[NEW_TASK]["auroc"] == pytest.approx(0.7)
    assert score.measurements["auroc"] == pytest.approx((0.9 + 0.7) / 2)
    truthful.refresh_from_db()
    assert truthful.reference_auroc == pytest.approx(0.8)  # the next cycle compares against this
    assert version_rescore(version=truthful) is None  # idempotent


def test_a_failed_backfill_run_leaves_the_score_on_the_tasks_it_was_measured_on(truthful):
    runs = {r.split: r for r in coverage_start(dispatch=False)}
    finish(runs["train"], 0.7)
    finish(runs["distshift"], 0.7)
    Run.objects.filter(pk=runs["test"].pk).update(status=Run.Status.FAILED, error="out of memory")
    assert version_rescore(version=truthful) is None
    assert sorted(latest(truthful).per_task) == [TRUTH_TASK]


def test_the_cycle_that_supersedes_a_task_recomputes_the_scores_without_it(truthful, maintainer, client):
    for run in coverage_start(dispatch=False):
        finish(run, 0.6)
        coverage_advance_for_run(run)
    assert latest(truthful).measurements["auroc"] == pytest.approx(0.75)

    cycle = run_cycle("2026Q4", maintainer, {"truthful": 0.75})
    assert m.Task.objects.get(slug=TRUTH_TASK).status == m.Task.Status.SUPERSEDED
    score = latest(truthful)
    assert sorted(score.per_task) == [NEW_TASK]
    assert score.measurements["auroc"] == pytest.approx(0.6)
    [change] = cycle.diff["rescored"]
    assert change["tasks_before"] == [TRUTH_TASK, NEW_TASK]
    assert change["tasks_after"] == [NEW_TASK]
    assert change["auroc_before"] == pytest.approx(0.75) and change["auroc_after"] == pytest.approx(0.6)
    page = client.get("/reevaluations/2026Q4/").content.decode()
    assert "Scores recomputed on the active tasks only" in page and "0.750 → 0.600" in page


def test_a_cycle_backfills_what_is_missing(truthful, maintainer):
    run_cycle("2026Q4", maintainer, {"truthful": 0.9})
    planned = Run.objects.filter(probe_version=truthful, task_id=NEW_TASK, cycle=None, kind=Run.Kind.SCORE)
    assert sorted(planned.values_list("split", flat=True)) == ["distshift", "test", "train"]


def test_the_command_lists_and_plans(truthful):
    out = StringIO()
    call_command("backfill_tasks", "--dry-run", stdout=out)
    assert f"truthful v1: {NEW_TASK}" in out.getvalue() and "nothing planned" in out.getvalue()
    assert not Run.objects.filter(task_id=NEW_TASK).exists()

    out = StringIO()
    call_command("backfill_tasks", stdout=out)
    assert "3 run(s) queued" in out.getvalue()
    assert Run.objects.filter(task_id=NEW_TASK, status=Run.Status.QUEUED).count() == 3


def test_a_workers_registry_follows_tasks_yaml_without_a_restart(small_registry, settings):
    from leaderboard.runner import registry

    assert small_registry == settings.REGISTRY_ROOT
    assert NEW_TASK not in registry().tasks
    add_refreshed_task(small_registry)
    assert registry().task(NEW_TASK).supersedes == TRUTH_TASK


def test_the_reconciler_rescores_when_the_finishing_message_was_lost(truthful):
    from leaderboard.services.lifecycle import evaluation_runs_reconcile

    for run in coverage_start(dispatch=False):
        finish(run, 0.7)  # the worker died before it could call coverage_advance_for_run
    assert sorted(latest(truthful).per_task) == [TRUTH_TASK]
    assert evaluation_runs_reconcile(dispatch=lambda run_id: None)["rescored"] == 1
    assert sorted(latest(truthful).per_task) == [TRUTH_TASK, NEW_TASK]
    assert evaluation_runs_reconcile(dispatch=lambda run_id: None)["rescored"] == 0
