"""A reference probe on an on-policy task, through the normal pipeline: ``manage.py demo`` (what
``make demo`` runs) submits the committed onpolicy-city-logreg-smollm2 artifact and its own real
Celery worker scores it on SmolLM2's split files of onpolicy-city-country-v1 (a small registry
holding the first rows of each label of the real per-model files); the Score carries the probe's
AUROC and its lift over the task's bag-of-words baseline, on the board's API too. Then a quarterly
cycle mints SmolLM2's holdout from SmolLM2's own pool and a real worker measures the probe on it:
a holdout AUROC from the right file."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluator.axes.text_baselines import load_panel, member_scores, strongest
from evaluator.data.holdouts import read_rows
from evaluator.data.registry.load import load_registry
from evaluator.metrics import metrics
from leaderboard.models import CycleResult, EvaluationRun, ReevaluationCycle, Score, Submission
from leaderboard.services.reevaluation import reevaluation_start
from tests.integration.conftest import SOURCE, wait_for

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
CITY = "onpolicy-city-country-v1"
SLUG = "onpolicy-city-logreg-smollm2"
HOLDOUT_SIZE = 16


@pytest.fixture(scope="module")
def onpolicy_root(tmp_path_factory):
    from tests.integration.mini_registry import build_mini_registry

    return build_mini_registry(tmp_path_factory.mktemp("onpolicy-registry"), task_ids=(CITY,))


@pytest.fixture
def board(onpolicy_root, settings, worker_env, monkeypatch):
    settings.REGISTRY_ROOT = onpolicy_root
    settings.ENABLED_MODELS = [SOURCE]  # ρ_CE is not what this test is about
    settings.HOLDOUT_SIZE = HOLDOUT_SIZE
    worker_env["PROBEBENCH_REGISTRY_ROOT"] = str(onpolicy_root)
    worker_env["PROBEBENCH_MODELS"] = SOURCE
    for key in (
        "PROBEBENCH_DB_NAME",
        "PROBEBENCH_REGISTRY_ROOT",
        "PROBEBENCH_MODELS",
        "CELERY_TASK_ALWAYS_EAGER",
    ):
        monkeypatch.setenv(key, worker_env[key])  # the demo's own worker reads them
    call_command("sync_registry", verbosity=0)
    return load_registry(onpolicy_root)


def test_a_reference_probe_scores_on_the_on_policy_task_and_holds_a_holdout_auroc(
    board, tmp_path, start_worker, maintainer, client
):
    import yaml

    manifest = tmp_path / "manifest.yaml"
    entry = {"slug": SLUG, "path": str(ROOT / "registry" / "reference_probes" / SLUG), "role": ""}
    manifest.write_text(yaml.safe_dump({"version": 1, "probes": [entry]}))
    call_command("demo", manifest=str(manifest), no_serve=True, stdout=StringIO())
    sub = Submission.objects.select_related("probe_version__probe").get()
    assert sub.status == "scored", sub.failure_reason
    version = sub.probe_version
    assert version.probe.is_reference

    # the test run read SmolLM2's own test file of the task
    splits = board.task(CITY).splits_for(SOURCE)
    run = EvaluationRun.objects.get(probe_version=version, kind="score", task_id=CITY, split="test")
    assert run.base_model_id == SOURCE and run.split_sha256 == splits["test"].sha256
    test_ids = {r["id"] for r in read_rows(board.root / splits["test"].path)}
    assert {e["id"] for e in run.example_scores} == test_ids
    stored = metrics.auroc([e["score"] for e in run.example_scores], [e["label"] for e in run.example_scores])

    score = Score.objects.get(probe_version=version, spec_id="v0.0.1")
    task = score.per_task[CITY]

    panel = load_panel(board.root, board.task(CITY), SOURCE)
    best = strongest(panel, "test")
    assert task["auroc"] == pytest.approx(stored, abs=1e-9)
    # the mini registry's panel keeps the rows its test split kept: the baseline's AUROC on them
    text = member_scores(panel, best)
    on_rows = metrics.auroc(
        [text[e["id"]] for e in run.example_scores], [e["label"] for e in run.example_scores]
    )
    assert task["text_baseline"] == {"name": best, "auroc": pytest.approx(on_rows, abs=1e-6)}
    assert task["lift_over_text"] == pytest.approx(task["auroc"] - task["text_baseline"]["auroc"], abs=1e-5)
    lo, hi = task["lift_over_text_ci"]
    assert lo < task["lift_over_text"] < hi
    assert score.measurements["lift_over_text"] == pytest.approx(task["lift_over_text"], abs=1e-9)
    assert task["auroc"] > 0.5  # the question's representation knows something the words do not
    rows = client.get("/api/v1/leaderboard", {"category": "hallucination"}).json()["results"]
    [row] = [r for r in rows if r["probe"] == version.probe.slug]
    assert row["lift_over_text"] == pytest.approx(score.measurements["lift_over_text"], abs=1e-4)
    assert row["lift_over_text_ci"] == pytest.approx([lo, hi], abs=1e-4)  # one task: its own interval

    # the quarterly cycle: SmolLM2's holdout from SmolLM2's pool, measured by a real worker
    worker = start_worker()
    cycle = reevaluation_start(quarter="2026Q4", by=maintainer)
    wait_for(
        lambda: ReevaluationCycle.objects.get(pk=cycle.pk).status == "completed",
        timeout=600,
        what="the cycle to complete",
        workers=[worker],
    )
    cycle.refresh_from_db()
    holdout = cycle.holdout_for(CITY, SOURCE)
    pool_ids = {r["id"] for r in read_rows(board.root / splits["holdout_pool"].path)}
    assert holdout["rows"] == HOLDOUT_SIZE and set(holdout["ids"]) <= pool_ids
    [hrun] = EvaluationRun.objects.filter(cycle=cycle, probe_version=version, task_id=CITY)
    assert hrun.status == "succeeded" and hrun.split_sha256 == holdout["sha256"]
    assert {e["id"] for e in hrun.example_scores} == set(holdout["ids"])
    result = CycleResult.objects.get(cycle=cycle, probe_version=version)
    expected = metrics.auroc(
        [e["score"] for e in hrun.example_scores], [e["label"] for e in hrun.example_scores]
    )
    assert result.holdout_auroc == pytest.approx(expected, abs=1e-9)
    assert result.outcome in ("held", "dropped", "deprecated")
