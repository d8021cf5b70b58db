"""A submission is on the board as soon as the runs the board ranks on have finished: its secondary
axes (transfer, reproduction) are marked pending, and each one that finishes afterwards rescores the
entry from the stored per-example scores."""

from __future__ import annotations

import pytest
from django.utils import timezone

from leaderboard import models as m
from leaderboard.services.submissions import submission_advance
from tests.leaderboard.reevaluation_data import scored
from tests.leaderboard.test_coverage import finish

pytestmark = pytest.mark.django_db
Run = m.EvaluationRun


@pytest.fixture
def waiting(small_registry):
    """A queued submission whose score runs have all succeeded, with a transfer and a reproduce run
    still queued."""
    version = scored("phased", status=m.Submission.Status.QUEUED)
    version.recipe = {"method": "logistic_regression", "task": "cities-truth-v1"}
    version.save(update_fields=["recipe"])
    m.Score.objects.filter(probe_version=version).delete()
    sub = version.submission
    for task in m.Task.objects.filter(category_id="hallucination", status=m.Task.Status.ACTIVE):
        for split in ("test", "train", "distshift"):
            run = Run.objects.create(
                probe_version=version,
                submission=sub,
                kind=Run.Kind.SCORE,
                task=task,
                split=split,
                base_model=version.probe.base_model,
            )
            finish(run, 0.9)
    target = m.BaseModel.objects.exclude(pk=version.probe.base_model_id).first()
    transfer = Run.objects.create(
        probe_version=version,
        submission=sub,
        kind=Run.Kind.TRANSFER,
        task_id="cities-truth-v1",
        split="test",
        base_model=target,
    )
    reproduce = Run.objects.create(
        probe_version=version,
        submission=sub,
        kind=Run.Kind.REPRODUCE,
        task_id="cities-truth-v1",
        split="test",
        base_model=version.probe.base_model,
    )
    return sub, transfer, reproduce


def score_of(sub: m.Submission) -> m.Score:
    return m.Score.objects.get(probe_version=sub.probe_version, spec_id="v0.0.1")


def test_it_is_scored_once_the_score_runs_finish_with_the_secondary_axes_pending(waiting):
    sub, transfer, reproduce = waiting
    assert submission_advance(submission=sub) is not None
    sub.refresh_from_db()
    assert sub.status == m.Submission.Status.SCORED
    assert sub.step == "scored; 2 secondary run(s) pending"
    rho = score_of(sub).components["rho_ce"]
    assert rho["imputed"] is True
    assert "pending" in score_of(sub).measurements["imputed"]["rho_ce"]
    sub.probe_version.refresh_from_db()
    assert sub.probe_version.reproduced is None  # unknown while the re-fit runs, not "not reproduced"


def test_a_secondary_run_that_finishes_later_rescores_the_entry(waiting):
    sub, transfer, reproduce = waiting
    submission_advance(submission=sub)
    before = score_of(sub).total
    Run.objects.filter(pk=transfer.pk).update(
        status=Run.Status.SUCCEEDED, finished_at=timezone.now(), metrics={"transfer": {"pearson": 0.8}}
    )
    submission_advance(submission=m.Submission.objects.get(pk=sub.pk))
    sub.refresh_from_db()
    assert sub.status == m.Submission.Status.SCORED
    assert sub.step == "scored; 1 secondary run(s) pending"
    assert sub.progress < 1.0  # its Score is not final while the reproduction runs
    rho = score_of(sub).components["rho_ce"]
    assert rho["imputed"] is False and rho["raw"] == pytest.approx(0.8)
    assert score_of(sub).total == pytest.approx(before + 0.10 * (0.8 - 0.5))
    # nothing moved since: advancing again does not recompute it
    computed_at = score_of(sub).computed_at
    submission_advance(submission=m.Submission.objects.get(pk=sub.pk))
    assert score_of(sub).computed_at == computed_at


def test_a_failed_score_run_still_fails_the_submission_without_waiting_for_secondary_runs(waiting):
    sub, transfer, reproduce = waiting
    Run.objects.filter(submission=sub, kind=Run.Kind.SCORE, split="test").update(
        status=Run.Status.FAILED, error="unknown template"
    )
    submission_advance(submission=sub)
    sub.refresh_from_db()
    assert sub.status == m.Submission.Status.FAILED
    assert "unknown template" in sub.failure_reason
    assert not m.Score.objects.filter(probe_version=sub.probe_version).exists()
