"""The CLI a researcher runs gives the board's numbers.

A probe trained on SmolLM2 is submitted through the API and scored by a real Celery worker; then
``python -m evaluator evaluate --probe DIR`` runs in its own process with **no option but the
registry and cache**: its defaults (protocol p1, the registry's eval-awareness reference probe for
the base model, the latest weights spec, the category's active tasks, ρ_CE on every other base
model) must reproduce every number the board stores: per task AUROC, its interval, auroc_ea,
auroc_ds, ECE, Brier, recall@1%FPR; ρ_CE; every ProbeScore component and the total. Latency is
the machine's own (measured separately by the worker and the CLI), so the ProbeScore total is
compared with the CLI's latency contribution replaced by the board's.

The registry is the small one of the end-to-end tests, with two base models (SmolLM2 and MiniLM:
the workers' models) and a reference-probe manifest naming the trained eval-awareness probe as
``registry/reference_probes/ea-smollm2``, as the real registry does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rest_framework.test import APIClient

from leaderboard.models import EvaluationRun, Score, Submission
from leaderboard.services.tokens import api_token_create
from tests.integration.conftest import SOURCE, TARGET, settled, submit_dir, wait_for

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def board_registry(mini_root: Path, dest: Path, reference: Path) -> Path:
    """The small registry with the workers' two models and an eval-awareness reference manifest."""
    shutil.copytree(mini_root, dest)
    models = yaml.safe_load((dest / "registry" / "models.yaml").read_text())
    models["models"] = [m for m in models["models"] if m["id"] in (SOURCE, TARGET)]
    (dest / "registry" / "models.yaml").write_text(yaml.safe_dump(models, sort_keys=False))
    shutil.copytree(reference, dest / "registry" / "reference_probes" / "ea-smollm2")
    recipe = json.loads((reference / "probe.json").read_text())["recipe"]
    manifest = {
        "probes": [
            {
                "slug": "ea-smollm2",
                "path": "registry/reference_probes/ea-smollm2",
                "role": "eval_awareness",
                "why": "the eval-awareness reference probe of SmolLM2 in this small registry",
                "name": "Eval-awareness reference probe (test)",
                "base_model": SOURCE,
                "recipe": {k: v for k, v in recipe.items() if k not in ("layer", "template")},
                "layers": [recipe["layer"]],
            }
        ]
    }
    (dest / "registry" / "reference_probes" / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    return dest


@pytest.fixture
def board_root(mini_root, trained, tmp_path, settings, worker_env):
    from django.core.management import call_command

    root = board_registry(mini_root, tmp_path / "registry", trained["reference"])
    settings.REGISTRY_ROOT = root
    settings.ENABLED_MODELS = [SOURCE, TARGET]
    worker_env["PROBEBENCH_REGISTRY_ROOT"] = str(root)
    worker_env["PROBEBENCH_MODELS"] = f"{SOURCE},{TARGET}"
    call_command("sync_registry", verbosity=0)
    return root


def cli_evaluate(root: Path, probe_dir: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "evaluator", "evaluate", "--probe", str(probe_dir), "--registry", str(root)]
        + ["--cache-dir", os.environ["PROBEBENCH_CACHE_DIR"]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_the_cli_with_its_defaults_gives_every_number_the_board_stores(
    board_root, trained, start_worker, researcher, system_account
):
    from evaluator.data.registry.load import load_registry
    from evaluator.metrics.scoring import Measurements, probe_score

    worker = start_worker("board")
    ref = submit_dir(
        system_account, trained["reference"], via="seed", is_reference=True, reference_role="eval_awareness"
    )
    wait_for(  # first, as on the board: a probe's reference runs are planned when it is submitted
        lambda: settled(ref.pk),
        timeout=900,
        what="the reference probe to be scored",
        workers=[worker],
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher)}")
    with open(trained["truth"] / "probe.safetensors", "rb") as fh:
        response = client.post(
            "/api/v1/submissions",
            {"artifact": fh, "metadata": (trained["truth"] / "probe.json").read_text()},
            format="multipart",
        )
    assert response.status_code == 201, response.content
    sub_id = response.json()["id"]
    wait_for(
        lambda: settled(sub_id),
        timeout=900,
        what="the submission to be scored",
        workers=[worker],
    )
    submission = Submission.objects.get(pk=sub_id)
    assert submission.status == "scored", submission.failure_reason
    score = Score.objects.get(probe_version__submission__pk=sub_id, spec_id="v0.0.3")

    cli = cli_evaluate(board_root, trained["truth"])

    # the same protocol, reference probe, spec and tasks, by default
    assert cli["protocol"] == "p2" and cli["model"]["dtype"] == "float32"
    assert cli["reference_probe"] == str(board_root / "registry" / "reference_probes" / "ea-smollm2")
    assert cli["config"]["spec"] == "v0.0.3"
    assert sorted(cli["tasks"]) == sorted(score.per_task)
    assert score.protocol == "p2" and score.environment["protocol"] == "p2"
    runs = EvaluationRun.objects.filter(submission_id=sub_id)
    assert {r.protocol for r in runs} == {"p2"}
    assert {r.environment["dtype"] for r in runs} == {"float32"}
    assert {r.environment["device"] for r in runs} == {"cpu"}

    exact = {"abs": 1e-9}  # the same activations (one cache) and the same pure metric code
    for task_id, stored in score.per_task.items():
        local = cli["tasks"][task_id]["metrics"]
        for key in ("auroc", "auroc_ea", "auroc_ds", "ece", "brier", "recall_at_1pct_fpr"):
            assert local[key] == pytest.approx(stored[key], **exact), (task_id, key)
        assert local["auroc_ci"] == pytest.approx(stored["auroc_ci"], **exact), task_id
        assert local["auroc_ea_status"] == stored["auroc_ea_status"] == "measured", task_id

    board = score.measurements
    assert cli["aggregate"]["rho_ce"] == pytest.approx(board["rho_ce"], abs=1e-9)
    assert set(cli["config"]["transfer_targets"]) == set(board["transfer"]) == {TARGET}
    # nothing imputed but the Goodhart resistance: the CLI does not run the attack, and the suite
    # plans no robustness run (tests/env_defaults.py)
    assert set(cli["imputed"]) == set(board["imputed"]) == {"goodhart"}
    components = cli["probe_score"]["components"]
    for name, stored in score.components.items():
        if name == "latency":  # each machine times its own forward
            continue
        assert components[name]["value"] == pytest.approx(stored["value"], abs=1e-9), name
        assert components[name]["imputed"] == stored["imputed"], name

    # the total, with the CLI's latency replaced by the board's: identical
    reg = load_registry(board_root)
    local = {k: cli["aggregate"].get(k) for k in ("auroc", "auroc_ea", "auroc_ds", "ece", "rho_ce")}
    measured = Measurements(
        **local, latency_ms=board["latency_ms"], license=cli["probe"]["license"], goodhart_note="not measured"
    )
    total = probe_score(measured, spec=reg.spec("v0.0.3"), licenses=reg.licenses).total
    assert total == pytest.approx(score.total, abs=1e-9)
    assert cli["probe_score"]["total"] == pytest.approx(score.total, abs=0.02)  # latency alone
    assert cli["reproduction"]["reproduced"] is True
    version = Submission.objects.get(pk=sub_id).probe_version
    assert version.reproduced is True

    # the probe page says how it was measured and by which reproduction rule
    from django.test import Client

    page = Client().get(f"/probes/{version.probe.slug}/").content.decode()
    assert "measured under" in page and ">p2</a> on cpu (" in page and " · float32 · torch " in page
    assert reg.protocol().tolerances.reproduction_criterion in page
    assert "(information, not judged)" in page


def test_the_worker_measures_in_float32_where_auto_would_pick_bf16(settings, monkeypatch):
    """On a CPU with bf16 units (this one has AVX512-BF16, see BENCHMARKS.md) the old "auto"
    dtype gave bf16; the worker's loader follows the protocol whatever the hardware offers."""
    import torch

    import evaluator.core.models as models
    from evaluator.data.registry.load import load_registry
    from leaderboard import runner

    settings.REGISTRY_ROOT = ROOT
    monkeypatch.setattr(models, "cpu_has_fast_bf16", lambda: True)
    assert (
        models.resolve_dtype(load_registry(ROOT).model(SOURCE), torch.device("cpu"), "auto") == torch.bfloat16
    )
    runner._models.clear()
    try:
        lm = runner.loaded_model(SOURCE)
        assert lm.dtype_name == "float32" and lm.protocol_id == "p2"
        assert runner.harvest_config().max_length == runner.protocol().max_length == 512
    finally:
        runner._models.clear()
