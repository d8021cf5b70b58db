"""Evaluation on the real SmolLM2: one run, pure metrics from stored scores, and the whole probe
end to end (baselines, reproduction, transfer to MiniLM, latency, ProbeScore)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import numpy as np
import pytest

from evaluator import CODE_VERSION
from evaluator.axes.evaluate import evaluate_probe
from evaluator.axes.reproduction import reproduction_check
from evaluator.axes.run import execute_run
from evaluator.data.registry.load import load_registry
from evaluator.errors import EvaluatorError, SplitHashMismatch
from evaluator.metrics import metrics, records
from evaluator.metrics.measure import ScoredExamples, task_metrics
from tests.evaluator.conftest import MINILM, PROJECT_ROOT, SMOLLM, TASK, build_registry, fresh_cache

IMPUTATION = {"auroc_ea": 0.85, "auroc_ds": 0.7, "rho_ce": 0.5}


@pytest.fixture(scope="module")
def probe_dir(tiny_registry, tiny_root, cache_dir, tmp_path_factory):
    """A logistic probe trained with the CLI's code path on capitals-v1 (SmolLM2 layer 15)."""
    from evaluator.core.activations import ActivationCache
    from evaluator.core.models import load_model
    from evaluator.core.probes import save_probe
    from evaluator.core.recipes import Recipe, train_recipe

    lm = load_model(SMOLLM, registry=tiny_registry, cache_dir=cache_dir, device="cpu", dtype="float32")
    recipe = Recipe(method="logistic_regression", task=TASK, layer=15, seed=0)
    trained = train_recipe(recipe, lm, registry=tiny_registry, cache=ActivationCache(cache_dir))
    out = tmp_path_factory.mktemp("probe")
    save_probe(out, trained.tensors, trained.metadata(name="capitals LR", category="hallucination"))
    return out


# --------------------------------------------------------------------------- one run


@pytest.mark.model
def test_a_run_returns_per_example_scores_and_its_provenance(probe_dir, tiny_registry, cache_dir, smollm):
    seen = []
    run = execute_run(
        probe_dir,
        task_id=TASK,
        split="test",
        registry=tiny_registry,
        cache_dir=cache_dir,
        device="cpu",
        dtype="float32",
        progress=lambda f, s: seen.append((f, s)),
    )
    assert run.n == 28 and len(run.examples.ids) == 28
    assert run.split_sha256 == tiny_registry.task(TASK).splits["test"].sha256
    assert len(run.cache_key) == 64 and run.code_version == CODE_VERSION
    assert run.model["weights_sha256"] == tiny_registry.model(SMOLLM).weights_sha256
    np.testing.assert_allclose(run.examples.probs, metrics.sigmoid(run.examples.scores))
    records = run.to_dict()["examples"]
    assert set(records[0]) == {"id", "label", "score", "prob"}
    assert seen[-1][0] == 1.0 and [f for f, _ in seen] == sorted(f for f, _ in seen)
    assert {"load_model", "activations", "score", "total"} <= set(run.timings)
    assert metrics.auroc(run.examples.scores, run.examples.labels) >= 0.9


@pytest.mark.model
def test_a_run_refuses_a_split_edited_behind_tasks_yaml(probe_dir, tmp_path):
    root = build_registry(tmp_path / "reg")
    registry = load_registry(root)
    path = root / registry.task(TASK).splits["test"].path
    original = path.read_bytes()
    path.write_bytes(original.replace(b"Jakarta", b"Bandung"))
    assert path.read_bytes() != original
    with pytest.raises(SplitHashMismatch):
        execute_run(
            probe_dir,
            task_id=TASK,
            split="test",
            registry=registry,
            cache_dir=fresh_cache(tmp_path / "c"),
            device="cpu",
            dtype="float32",
        )


@pytest.mark.model
def test_a_run_on_a_minted_holdout_file_checks_the_recorded_hash(
    probe_dir, tiny_registry, tiny_root, cache_dir, tmp_path
):
    import hashlib

    pool = (tiny_root / tiny_registry.task(TASK).splits["holdout_pool"].path).read_bytes()
    holdout = tmp_path / "holdouts" / "2026Q4" / f"{TASK}.jsonl"
    holdout.parent.mkdir(parents=True)
    holdout.write_bytes(b"".join(pool.splitlines(keepends=True)[:12]))
    sha = hashlib.sha256(holdout.read_bytes()).hexdigest()
    run = execute_run(
        probe_dir,
        task_id=TASK,
        split="holdout",
        registry=tiny_registry,
        cache_dir=cache_dir,
        device="cpu",
        dtype="float32",
        split_file=holdout,
        split_sha256=sha,
    )
    assert run.n == 12 and run.split_sha256 == sha and run.split == "holdout"
    with pytest.raises(SplitHashMismatch):
        execute_run(
            probe_dir,
            task_id=TASK,
            split="holdout",
            registry=tiny_registry,
            cache_dir=cache_dir,
            device="cpu",
            dtype="float32",
            split_file=holdout,
            split_sha256="0" * 64,
        )


@pytest.mark.model
def test_a_run_on_another_base_model_is_refused(probe_dir, tiny_registry, tmp_path):
    with pytest.raises(EvaluatorError, match="cannot run on all-minilm-l6-v2"):
        execute_run(
            probe_dir, task_id=TASK, split="test", registry=tiny_registry, cache_dir=tmp_path, model_id=MINILM
        )


# --------------------------------------------------------------------------- pure metrics


def _examples(scores, labels, prefix="t") -> ScoredExamples:
    s = np.asarray(scores, dtype=float)
    return ScoredExamples([f"{prefix}{i}" for i in range(len(s))], np.asarray(labels), s, metrics.sigmoid(s))


def test_task_metrics_are_the_metric_functions_on_stored_scores():
    rng = np.random.default_rng(0)
    labels = np.array([0, 1] * 50)
    scores = labels + rng.normal(0, 1, 100)
    test = _examples(scores, labels)
    ref = dict(zip(test.ids, rng.normal(0, 1, 100), strict=True))
    out = task_metrics(
        task_id="x-v1",
        test=test,
        distshift=_examples(scores[:40], labels[:40], "d"),
        ea_reference=ref,
        train_negative_scores=rng.normal(0, 1, 300),
        imputation=IMPUTATION,
    )
    assert out.auroc == metrics.auroc(scores, labels)
    assert out.auroc_ci == metrics.auroc_ci(scores, labels)
    assert out.auroc_ea == metrics.auroc_ea(scores, labels, [ref[i] for i in test.ids])
    assert out.auroc_ea_status == "measured"
    assert out.auroc_ds == metrics.auroc(scores[:40], labels[:40]) and not out.auroc_ds_imputed
    assert out.ece == metrics.ece(test.probs, labels) and out.brier == metrics.brier(test.probs, labels)
    assert out.recall_at_1pct_fpr is not None and 0 <= out.recall_at_1pct_fpr <= 1
    assert len(out.reliability) == 10 and out.roc_points[0] == (0.0, 0.0)
    json.dumps(out.to_dict())


def test_missing_distshift_and_reference_are_imputed_and_flagged():
    test = _examples([0.1, 0.9, 0.2, 0.8], [0, 1, 0, 1])
    out = task_metrics(task_id="x-v1", test=test, imputation=IMPUTATION)
    assert out.auroc_ds_imputed and out.auroc_ds == pytest.approx(0.7 * out.auroc)
    assert out.auroc_ea is None and out.auroc_ea_status == "imputed" and len(out.notes) == 2


def test_eval_awareness_probes_have_no_ea_correction():
    out = task_metrics(
        task_id="x-v1", test=_examples([0.1, 0.9], [0, 1]), ea_applicable=False, imputation=IMPUTATION
    )
    assert out.auroc_ea_status == "n/a"


def test_reference_scores_must_cover_every_test_id():
    with pytest.raises(EvaluatorError, match="reference scores missing for 1 test id"):
        task_metrics(
            task_id="x-v1",
            test=_examples([0.1, 0.9], [0, 1]),
            ea_reference={"t0": 0.0},
            imputation=IMPUTATION,
        )


def test_stored_records_round_trip():
    test = _examples([0.1, 0.9, -2.0], [0, 1, 0])
    again = ScoredExamples.from_records(test.to_records())
    np.testing.assert_array_equal(again.scores, test.scores)
    assert again.ids == test.ids


# --------------------------------------------------------------------------- the whole probe


@pytest.mark.model
def test_evaluate_probe_measures_every_component_it_can(probe_dir, tiny_registry, cache_dir):
    stages = []
    result = evaluate_probe(
        probe_dir,
        registry=tiny_registry,
        cache_dir=cache_dir,
        transfer_targets=[MINILM],
        latency_reps=100,
        device="cpu",
        dtype="float32",
        progress=lambda f, s: stages.append(f),
    )
    agg = result.aggregate
    assert agg["auroc"] >= 0.9 and agg["auroc_ds"] is not None
    # the CLI does not run the attack: the Goodhart resistance is imputed too, and says why
    assert result.imputed == {
        "auroc_ea": "no eval-awareness reference probe for this base model",
        "goodhart": "the attack was not run",
    }
    assert result.probe_score["components"]["auroc_ea"]["imputed"] is True
    assert result.probe_score["components"]["rho_ce"]["imputed"] is False
    assert 0 < result.probe_score["total"] <= 1
    baseline = result.tasks[TASK].baselines
    assert (
        baseline.diff_of_means_auroc > 0.8
        and baseline.lift_over_random == agg["auroc"] - baseline.random_direction_auroc
    )
    assert result.reproduction is not None and result.reproduction.reproduced
    assert result.reproduction.cosine == pytest.approx(1.0, abs=1e-5)
    (transfer,) = result.transfer
    assert transfer.target_model == MINILM and transfer.target_layer == 3 and transfer.n_examples == 16
    assert -1 <= transfer.pearson <= 1 and agg["rho_ce"] == max(0.0, transfer.pearson)
    assert result.latency.reps >= 100 and result.latency.probe_ms > 0 and "cpu" in result.latency.device
    assert result.latency.model_forward_ms is not None
    assert stages[-1] == 1.0
    out = result.to_dict()
    json.dumps(out)
    assert "examples" not in out["tasks"][TASK]["runs"]["test"]
    assert (
        out["tasks"][TASK]["runs"]["test"]["split_sha256"] == tiny_registry.task(TASK).splits["test"].sha256
    )


@pytest.mark.model
def test_an_eval_awareness_reference_probe_makes_auroc_ea_measured(probe_dir, tiny_registry, cache_dir):
    # Any probe on the same base model can serve as the reference here; the point is the plumbing.
    result = evaluate_probe(
        probe_dir,
        registry=tiny_registry,
        cache_dir=cache_dir,
        reference_probe=probe_dir,
        compute_transfer=False,
        compute_reproduction=False,
        latency_reps=100,
        device="cpu",
        dtype="float32",
    )
    assert result.tasks[TASK].metrics.auroc_ea_status == "measured"
    assert result.aggregate["auroc_ea"] is not None and "auroc_ea" not in result.imputed
    assert result.imputed["rho_ce"] == "transfer not computed"


@pytest.mark.model
def test_reproduction_detects_a_probe_that_is_not_what_its_recipe_makes(
    probe_dir, tiny_registry, cache_dir, tmp_path
):
    from evaluator.core.probes import load_probe, save_probe

    probe = load_probe(probe_dir, registry=tiny_registry)
    tampered = dict(probe.tensors)
    tampered["weight"] = np.random.default_rng(0).standard_normal(576)
    save_probe(tmp_path / "t", tampered, probe.metadata)
    check = reproduction_check(
        tmp_path / "t", registry=tiny_registry, cache_dir=cache_dir, device="cpu", dtype="float32"
    )
    assert not check.reproduced and abs(check.cosine) < 0.5


@pytest.mark.model
def test_the_cli_trains_and_evaluates_with_json_on_stdout(tiny_root, cache_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    common = [
        "--registry",
        str(tiny_root),
        "--cache-dir",
        str(cache_dir),
        "--device",
        "cpu",
        "--dtype",
        "float32",
    ]
    train = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "train",
            "--task",
            TASK,
            "--model",
            SMOLLM,
            "--layer",
            "12",
            "--method",
            "diff_of_means",
            "--out",
            str(tmp_path / "p"),
            *common,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert train.returncode == 0, train.stderr
    trained = json.loads(train.stdout)
    assert (tmp_path / "p" / "probe.safetensors").is_file() and trained["metadata"]["recipe"][
        "method"
    ] == "diff_of_means"
    assert trained["test"]["auroc"] > 0.8
    # progress on stderr, off a terminal one line per split: harvested, or read from the cache
    progress = [line for line in train.stderr.splitlines() if line.startswith("train diff_of_means [")]
    assert [line.split("] ")[1].split(":")[0] for line in progress] == [f"{TASK}/train", f"{TASK}/test"]
    evaluated = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "evaluate",
            "--probe",
            str(tmp_path / "p"),
            "--tasks",
            TASK,
            "--no-transfer",
            "--latency-reps",
            "100",
            *common,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    out = json.loads(evaluated.stdout)
    splits = {
        line.split("] ")[1].split(":")[0]
        for line in evaluated.stderr.splitlines()
        if line.startswith("evaluate [")
    }
    assert {f"{TASK}/train", f"{TASK}/test", "reproduce train", "reproduce test"} <= splits, evaluated.stderr
    # the newest weights spec by default
    assert out["probe_score"]["spec"] == "v0.0.3" and out["aggregate"]["auroc"] > 0.8
    jsonschema.validate(out, records.schema("evaluation"))  # the committed schema of this output
    assert out["reproduction"]["reproduced"] is True


def test_the_cli_reports_a_bad_artifact_as_an_error(tiny_root, tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "probe.safetensors").write_bytes(b"\x80\x04junk")
    (tmp_path / "p" / "probe.json").write_text(
        json.dumps(
            {
                "name": "x",
                "category": "hallucination",
                "base_model": SMOLLM,
                "layer": 3,
                "position": "last_token",
                "input": "single",
                "output": "logit",
                "license": "MIT",
            }
        )
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "evaluate",
            "--probe",
            str(tmp_path / "p"),
            "--registry",
            str(tiny_root),
            "--cache-dir",
            str(tmp_path / "c"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        timeout=120,
    )
    assert result.returncode == 2 and "looks like a Python pickle" in result.stderr


def test_importing_the_evaluator_loads_neither_django_nor_torch():
    code = (
        "import sys, evaluator, evaluator.axes.evaluate, evaluator.metrics.measure, evaluator.core.probes, evaluator.core.recipes, evaluator.core.activations,"
        " evaluator.core.models, evaluator.axes.transfer, evaluator.axes.latency, evaluator.commands.train_cli, evaluator.commands.cli;"
        " heavy = [m for m in ('django', 'torch', 'transformers', 'sklearn') if m in sys.modules];"
        " print(','.join(heavy))"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT_ROOT, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


@pytest.mark.model
def test_a_worker_can_pass_the_models_it_keeps_loaded(probe_dir, tiny_registry, cache_dir, smollm, minilm):
    from evaluator.axes.transfer import cross_model_transfer
    from evaluator.core.probes import load_probe

    run = execute_run(
        probe_dir, task_id=TASK, split="test", registry=tiny_registry, cache_dir=cache_dir, lm=smollm
    )
    assert run.model["id"] == SMOLLM
    with pytest.raises(EvaluatorError, match="reads smollm2-135m-instruct, not all-minilm-l6-v2"):
        execute_run(
            probe_dir, task_id=TASK, split="test", registry=tiny_registry, cache_dir=cache_dir, lm=minilm
        )
    asked = []

    def load(model_id):
        asked.append(model_id)
        return {SMOLLM: smollm, MINILM: minilm}[model_id]

    probe = load_probe(probe_dir, registry=tiny_registry)
    (result,) = cross_model_transfer(
        probe, targets=[MINILM], registry=tiny_registry, cache_dir=cache_dir, load=load
    )
    assert asked == [SMOLLM, MINILM] and result.target_model == MINILM
