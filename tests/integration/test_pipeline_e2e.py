"""End to end on real services: a probe trained on SmolLM2 is submitted through the API, run by a
real Celery worker process, scored, and its numbers equal the evaluator's on the same inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from leaderboard.models import EvaluationRun, Score, Submission
from tests.integration.conftest import wait_for
from tests.integration.mini_registry import build_mini_registry

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
SOURCE = "smollm2-135m-instruct"
TARGET = "all-minilm-l6-v2"


def train(registry: Path, out: Path, *, task: str, layer: int, method: str, cache_dir: str) -> Path:
    proc = subprocess.run(
        [sys.executable, "-m", "evaluator", "train", "--registry", str(registry), "--cache-dir", cache_dir,
         "--task", task, "--model", SOURCE, "--layer", str(layer), "--method", method, "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture
def mini(tmp_path_factory, settings, worker_env):
    root = build_mini_registry(tmp_path_factory.mktemp("registry"))
    settings.REGISTRY_ROOT = root
    settings.ENABLED_MODELS = [SOURCE, TARGET]
    worker_env["PROBEBENCH_REGISTRY_ROOT"] = str(root)
    worker_env["PROBEBENCH_MODELS"] = f"{SOURCE},{TARGET}"
    call_command("sync_registry", verbosity=0)
    return root


def submit_dir(client: APIClient, probe_dir: Path):
    with open(probe_dir / "probe.safetensors", "rb") as fh:
        return client.post("/api/v1/submissions", {"artifact": fh, "metadata": (probe_dir / "probe.json").read_text()},
                           format="multipart")


def test_an_api_submission_is_run_by_a_worker_and_scored_like_the_evaluator(mini, start_worker, researcher, maintainer, settings, tmp_path):
    from evaluator.evaluate import evaluate_probe
    from leaderboard.services import submission_create

    cache = str(settings.CACHE_DIR)
    ref_dir = train(mini, tmp_path / "ref", task="benchmark-vs-user-v1", layer=12, method="logistic_regression", cache_dir=cache)
    probe_dir = train(mini, tmp_path / "truth", task="cities-truth-v1", layer=12, method="logistic_regression", cache_dir=cache)
    worker = start_worker("e2e")

    # the eval-awareness reference probe first, through the same service the demo uses
    with open(ref_dir / "probe.safetensors", "rb") as fh:
        ref_sub = submission_create(user=maintainer, artifact=fh, metadata=json.loads((ref_dir / "probe.json").read_text()),
                                    via="seed", is_reference=True, reference_role="eval_awareness")
    wait_for(lambda: Submission.objects.get(pk=ref_sub.pk).status in ("scored", "failed"), timeout=900,
             what="the reference probe to be scored", workers=[worker])
    assert Submission.objects.get(pk=ref_sub.pk).status == "scored", Submission.objects.get(pk=ref_sub.pk).failure_reason

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    response = submit_dir(client, probe_dir)
    assert response.status_code == 201, response.content
    sub_id = response.json()["id"]
    wait_for(lambda: Submission.objects.get(pk=sub_id).status in ("scored", "failed"), timeout=900,
             what="the submission to be scored", workers=[worker])
    detail = client.get(f"/api/v1/submissions/{sub_id}").json()
    assert detail["status"] == "scored", detail["failure_reason"]
    assert {r["status"] for r in detail["runs"]} == {"succeeded"}
    assert {r["kind"] for r in detail["runs"]} == {"score", "reference", "reproduce", "transfer"}
    assert all(r["attempts"] == 1 for r in detail["runs"]), "a run executed more than once"
    assert EvaluationRun.objects.filter(submission_id=sub_id).exclude(worker_host="").count() > 0

    # the same inputs through the evaluator directly
    direct = evaluate_probe(probe_dir, registry=mini, cache_dir=cache, reference_probe=ref_dir,
                            transfer_targets=[TARGET])
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
