"""A probe is scored once the runs the board ranks on have finished; its secondary axes (transfer,
reproduce, steer) are shown as pending, with progress, on the board row, the probe page and in
the probe API, and the Score is recomputed from stored results as each of them finishes."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from leaderboard import models as m
from leaderboard.selectors.progress import pending_axes
from leaderboard.services.lifecycle import evaluation_run_fan_out, evaluation_runs_reconcile
from leaderboard.services.submissions import submission_advance
from tests.leaderboard.board_data import public_probe
from tests.leaderboard.reevaluation_data import synthetic_scores

pytestmark = pytest.mark.django_db
Run = m.EvaluationRun
SMOL, GEMMA, ENCODER = "smollm2-135m-instruct", "gemma-3-270m", "all-minilm-l6-v2"
TASK = "halueval-qa-v1"


@pytest.fixture
def queued(registry):
    """A submission whose score runs succeeded while its secondary runs are still queued."""
    recipe = {"method": "logistic_regression", "task": TASK, "layer": 15, "position": "last_token"}
    version = public_probe(
        slug="half-done", base_model=SMOL, status=m.Submission.Status.RUNNING, recipe=recipe
    )
    sub = version.submission

    def run(kind, split="test", model=SMOL, **kwargs):
        return Run.objects.create(
            probe_version=version,
            submission=sub,
            kind=kind,
            task_id=TASK,
            split=split,
            base_model_id=model,
            **kwargs,
        )

    for split in ("test", "train"):
        run(
            Run.Kind.SCORE,
            split,
            status=Run.Status.SUCCEEDED,
            finished_at=timezone.now(),
            example_scores=synthetic_scores(0.8),
            metrics={"latency": {"probe_ms": 0.2, "device": "cpu"}} if split == "test" else {},
        )
    transfers = [run(Run.Kind.TRANSFER, model=GEMMA), run(Run.Kind.TRANSFER, model=ENCODER)]
    run(Run.Kind.REPRODUCE, "train")
    run(Run.Kind.STEER)
    return version, transfers


def _finish_transfer(run: Run, pearson: float) -> None:
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.SUCCEEDED, finished_at=timezone.now(), metrics={"transfer": {"pearson": pearson}}
    )


def test_a_submission_is_scored_before_its_secondary_runs_and_says_what_is_pending(queued, client):
    version, _ = queued
    assert submission_advance(submission=version.submission) is not None
    version.refresh_from_db()
    assert version.submission.status == m.Submission.Status.SCORED
    assert version.submission.step == "scored; 4 secondary run(s) pending"
    assert version.submission.progress == pytest.approx(2 / 6)  # 1.0 only once every axis is in
    assert version.reproduced is None  # not "not reproduced": its run has not run yet
    score = version.scores.order_by("-spec_id").first()
    assert score.measurements["imputed"]["rho_ce"].startswith("pending: transfer to")
    labels = [a.label for a in pending_axes(version_ids=[version.pk])[version.pk]]
    assert labels == ["transfer pending", "reproduce pending", "steer pending"]

    board = client.get(reverse("leaderboard:category", args=["hallucination"])).content.decode()
    assert "pending: transfer pending, reproduce pending, steer pending" in board
    page = client.get(reverse("leaderboard:probe", args=["half-done"])).content.decode()
    assert 'id="pending-axes"' in page and "transfer pending" in page
    body = client.get("/api/v1/probes/half-done").json()
    assert body["pending_axes"][0] == {"axis": "transfer", "done": 0, "total": 2, "label": "transfer pending"}


def test_the_score_is_recomputed_as_each_secondary_run_finishes(queued, client):
    version, (to_gemma, to_encoder) = queued
    submission_advance(submission=version.submission)
    _finish_transfer(to_gemma, 0.6)
    evaluation_run_fan_out(Run.objects.get(pk=to_gemma.pk))
    score = version.scores.order_by("-spec_id").first()
    assert "pending" in score.measurements["imputed"]["rho_ce"]  # one target still to go
    assert [a.label for a in pending_axes(version_ids=[version.pk])[version.pk]][0] == "transfer 1/2"
    assert client.get("/api/v1/probes/half-done").json()["pending_axes"][0]["label"] == "transfer 1/2"

    _finish_transfer(to_encoder, 0.4)  # its fan-out is lost: the reconciler rescored it
    report = evaluation_runs_reconcile(dispatch=lambda run_id: None)
    assert report["secondary_rescored"] == 1
    score = version.scores.order_by("-spec_id").first()
    assert "rho_ce" not in score.measurements["imputed"]
    assert score.measurements["transfer"] == {GEMMA: 0.6, ENCODER: 0.4}
    assert [a.axis for a in pending_axes(version_ids=[version.pk])[version.pk]] == ["reproduce", "steer"]
    assert evaluation_runs_reconcile(dispatch=lambda run_id: None)["secondary_rescored"] == 0

    for run in Run.objects.filter(probe_version=version, kind__in=[Run.Kind.REPRODUCE, Run.Kind.STEER]):
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error="x", finished_at=timezone.now())
        evaluation_run_fan_out(run)
    sub = m.Submission.objects.get(pk=version.submission.pk)
    assert (sub.status, sub.step, sub.progress) == ("scored", "scored", 1.0)
    assert pending_axes(version_ids=[version.pk]) == {}
