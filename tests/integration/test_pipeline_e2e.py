"""End to end on real services: a probe trained on SmolLM2 is submitted through the API, run by a
real Celery worker process, scored, and its numbers equal the evaluator's on the same inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework.test import APIClient

from leaderboard.models import EvaluationRun, RankInterval, Score, Submission
from leaderboard.services.tokens import api_token_create
from tests.integration.conftest import settled, submit_dir, wait_for

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]
TARGET = "all-minilm-l6-v2"


def submit_api(client: APIClient, probe_dir: Path):
    with open(probe_dir / "probe.safetensors", "rb") as fh:
        return client.post(
            "/api/v1/submissions",
            {"artifact": fh, "metadata": (probe_dir / "probe.json").read_text()},
            format="multipart",
        )


def test_an_api_submission_is_run_by_a_worker_and_scored_like_the_evaluator(
    mini, trained, start_worker, researcher, system_account, settings
):
    from evaluator.axes.evaluate import evaluate_probe

    cache = str(settings.CACHE_DIR)
    ref_dir, probe_dir = trained["reference"], trained["truth"]
    worker = start_worker("e2e")

    # the eval-awareness reference probe first, through the same service the demo uses
    ref_sub = submit_dir(
        system_account, ref_dir, via="seed", is_reference=True, reference_role="eval_awareness"
    )
    wait_for(
        lambda: settled(ref_sub.pk),
        timeout=900,
        what="the reference probe to be scored",
        workers=[worker],
    )
    assert Submission.objects.get(pk=ref_sub.pk).status == "scored", Submission.objects.get(
        pk=ref_sub.pk
    ).failure_reason

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher)}")
    response = submit_api(client, probe_dir)
    assert response.status_code == 201, response.content
    sub_id = response.json()["id"]
    # scored once its primary runs have finished; the secondary axes then rescore it, one by one
    wait_for(
        lambda: settled(sub_id),
        timeout=900,
        what="the submission to be scored with every axis",
        workers=[worker],
    )
    detail = client.get(f"/api/v1/submissions/{sub_id}").json()
    assert detail["status"] == "scored", detail["failure_reason"]
    assert {r["status"] for r in detail["runs"]} == {"succeeded"}
    assert {r["kind"] for r in detail["runs"]} == {"score", "reference", "reproduce", "transfer"}
    assert all(r["attempts"] == 1 for r in detail["runs"]), "a run executed more than once"
    assert EvaluationRun.objects.filter(submission_id=sub_id).exclude(worker_host="").count() > 0

    # the same inputs through the evaluator directly
    direct = evaluate_probe(
        probe_dir, registry=mini, cache_dir=cache, reference_probe=ref_dir, transfer_targets=[TARGET]
    )
    score = Score.objects.get(probe_version__submission__pk=sub_id, spec_id="v0.0.1")
    expected = direct.probe_score["components"]
    for name in ("auroc", "auroc_ea", "auroc_ds", "calibration", "rho_ce", "license"):
        assert score.components[name]["value"] == pytest.approx(expected[name]["value"], abs=1e-6), name
        assert score.components[name]["imputed"] == expected[name]["imputed"], name
    assert not score.components["auroc_ea"]["imputed"]  # the reference probe was there
    for task_id, task in direct.tasks.items():
        stored = score.per_task[task_id]
        assert stored["auroc"] == pytest.approx(task.metrics.auroc, abs=1e-9)
        assert stored["auroc_ci"] == pytest.approx(list(task.metrics.auroc_ci), abs=1e-9)
        assert stored["ece"] == pytest.approx(task.metrics.ece, abs=1e-9)
    assert detail["scores"]["v0.0.1"]["total"] == pytest.approx(score.total)
    assert detail["reproduced"] is True

    # once scored, the worker recomputed the board's rank intervals from the stored per-example scores
    wait_for(
        lambda: RankInterval.objects.filter(score=score).exists(),
        timeout=300,
        what="the board's rank intervals",
        workers=[worker],
    )
    interval = RankInterval.objects.get(score=score)
    assert interval.score_lo <= score.total <= interval.score_hi
    assert (interval.rank, interval.rank_lo, interval.rank_hi, interval.tie_group) == (1, 1, 1, 1)
