"""``python -m evaluator attack`` on the real SmolLM2: the soft suffix lowers the probe's scores on
the positives, zero steps change nothing, a random-direction probe stays at chance, and every
reported recall is recomputed from the scores the CLI prints."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.evaluator.conftest import SMOLLM, TASK

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def probes(tiny_root, tiny_registry, cache_dir, smollm, tmp_path_factory):
    """A logistic probe on capitals-v1 at SmolLM2's layer 6, and a random direction there."""
    from evaluator.core.activations import ActivationCache
    from evaluator.core.probes import save_probe
    from evaluator.core.recipes import Recipe, train_recipe

    recipe = Recipe(method="logistic_regression", task=TASK, layer=6, position="last_token", seed=0)
    trained = train_recipe(recipe, smollm, registry=tiny_registry, cache=ActivationCache(cache_dir))
    fitted = tmp_path_factory.mktemp("fitted")
    save_probe(fitted, trained.tensors, trained.metadata(name="capitals logreg", category="hallucination"))
    direction = np.random.default_rng(7).normal(size=smollm.d_model).astype(np.float32)
    random = tmp_path_factory.mktemp("random")
    meta = {
        k: v
        for k, v in trained.metadata(name="random direction", category="hallucination").items()
        if k != "recipe"
    }
    save_probe(
        random, {"weight": direction / np.linalg.norm(direction), "bias": np.zeros(1, np.float32)}, meta
    )
    return fitted, random


def _attack(capsys, root, cache_dir, probe, steps: int | None, *extra: str) -> dict:
    from evaluator.commands.cli import main

    argv = ["attack", "--probe", str(probe), "--task", TASK, *extra]
    argv += ["--steps", str(steps)] if steps is not None else []
    assert main([*argv, "--registry", str(root), "--cache-dir", str(cache_dir), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _recall(scores, threshold) -> float:
    return float(np.mean(np.asarray(scores) > threshold))


def test_the_attack_lowers_the_positives_and_its_recall_is_the_printed_scores(
    probes, tiny_root, cache_dir, capsys
):
    fitted, _ = probes
    out = _attack(capsys, tiny_root, cache_dir, fitted, steps=6)
    s = out["scores"]
    assert set(out) >= {"threshold", "recall_clean", "recall_attacked", "steps_to_half", "scores"}
    assert len(s["positives_attacked"]) == len(s["positives_clean"]) == out["n_positives"]
    assert out["recall_attacked"] == _recall(s["positives_attacked"], out["threshold"])
    assert out["recall_clean"] == _recall(s["positives_clean"], out["threshold"])
    # the threshold flags at most 1% of the clean train negatives; test negatives are printed clean
    assert len(s["negatives_clean"]) == out["n_negatives"]
    assert np.mean(s["positives_attacked"]) < np.mean(s["positives_clean"])
    steps = [c["step"] for c in out["curve"]]
    assert steps[0] == 0 and steps[-1] == out["steps_run"] <= 6
    # the adversary keeps its best suffix; it stops early only where nothing is caught any more
    assert out["recall_attacked"] == min(c["recall"] for c in out["curve"])
    assert out["steps_run"] == 6 or out["curve"][-1]["recall"] == 0.0


def test_the_attack_stops_at_the_first_checkpoint_that_catches_nothing(probes, tiny_root, cache_dir, capsys):
    """With a budget of 200 steps the logistic probe is driven to recall 0 long before the end:
    the attack stops at that checkpoint and the kept scores are its."""
    fitted, _ = probes
    out = _attack(capsys, tiny_root, cache_dir, fitted, steps=200)
    assert out["recall_clean"] > 0.2
    assert out["recall_attacked"] == 0.0 == _recall(out["scores"]["positives_attacked"], out["threshold"])
    assert out["steps_run"] == out["best_step"] == out["curve"][-1]["step"] < 200
    assert all(c["recall"] > 0 for c in out["curve"][:-1])


def test_zero_steps_change_nothing(probes, tiny_root, cache_dir, capsys):
    fitted, _ = probes
    out = _attack(capsys, tiny_root, cache_dir, fitted, steps=0)
    assert out["scores"]["positives_attacked"] == out["scores"]["positives_clean"]
    assert out["recall_attacked"] == out["recall_clean"]
    assert out["steps_to_half"] is None or out["recall_clean"] == 0


def test_the_clean_scores_are_the_boards(probes, tiny_registry, cache_dir):
    """The attack's clean scores come from the workers' measurement, and its own forward with no
    suffix reproduces them (the pooled vectors are the harvest's)."""
    from evaluator.axes.attack import _encode, _scores
    from evaluator.axes.run import execute_run
    from evaluator.core.activations import read_split
    from evaluator.core.harvest import render_prompts
    from evaluator.core.models import load_model
    from evaluator.core.probes import load_probe

    fitted, _ = probes
    probe = load_probe(fitted, registry=tiny_registry)
    run = execute_run(
        fitted, task_id=TASK, split="test", registry=tiny_registry, cache_dir=cache_dir, device="cpu"
    )
    lm = load_model(SMOLLM, registry=tiny_registry, cache_dir=cache_dir, device="cpu")
    rows = read_split(tiny_registry, TASK, "test")
    encoded = _encode(lm, render_prompts(tiny_registry.task(TASK), rows.texts, "single"), 512, 0)
    own = _scores(lm, probe, encoded, range(len(rows.ids)), None)
    assert own == pytest.approx(run.examples.scores, abs=1e-3)


def test_a_random_direction_is_at_chance_before_and_after(probes, tiny_root, cache_dir, capsys):
    _, random = probes
    out = _attack(capsys, tiny_root, cache_dir, random, steps=3)
    assert out["recall_clean"] <= 0.2
    assert out["recall_attacked"] <= 0.2


def test_an_encoder_or_a_contrast_pair_probe_is_refused(tmp_path, tiny_registry):
    from evaluator.axes.attack import attack_eligibility
    from evaluator.errors import EvaluatorError  # noqa: F401 - the CLI's error type

    class _Spec:
        encoder = True

    class _LM:
        spec = _Spec()
        id = "all-minilm-l6-v2"

    class _Meta:
        input = "single"

    class _Probe:
        metadata = _Meta()

    assert "needs a decoder base model" in attack_eligibility(_Probe(), _LM())
    _Spec.encoder = False
    _Meta.input = "contrast_pair"
    assert "a contrast pair has two" in attack_eligibility(_Probe(), _LM())


def test_bad_steps_are_refused_with_the_accepted_range(probes, tiny_root, cache_dir, capsys):
    from evaluator.commands.cli import main

    fitted, _ = probes
    argv = ["attack", "--probe", str(fitted), "--task", TASK, "--steps", "-1", "--registry", str(tiny_root)]
    assert main([*argv, "--cache-dir", str(cache_dir), "--json"]) == 2
    assert "accepted 0..5000" in capsys.readouterr().err


def test_a_kept_suffix_applied_again_reproduces_the_attack(probes, tiny_root, cache_dir, capsys, tmp_path):
    """The transfer path: the suffix the attack kept, applied with --suffix-in (no optimisation),
    gives the attacked scores of the attack's best checkpoint; one made on another model is refused."""
    from safetensors.numpy import load_file, save_file

    from evaluator.commands.cli import main

    fitted, random = probes
    kept = tmp_path / "suffix.safetensors"
    direct = _attack(capsys, tiny_root, cache_dir, fitted, 4, "--suffix-out", str(kept))
    again = _attack(capsys, tiny_root, cache_dir, fitted, None, "--suffix-in", str(kept))
    assert again["steps"] == 0 and again["transfer_from"]["probe"] == "capitals logreg"
    assert again["scores"]["positives_attacked"] == pytest.approx(
        direct["scores"]["positives_attacked"], abs=1e-3
    )
    assert again["recall_attacked"] == _recall(again["scores"]["positives_attacked"], again["threshold"])
    # applied to another probe on the same model: one forward, its own threshold
    other = _attack(capsys, tiny_root, cache_dir, random, None, "--suffix-in", str(kept))
    assert other["n_positives"] == direct["n_positives"] and other["threshold"] != direct["threshold"]

    foreign = tmp_path / "foreign.safetensors"
    save_file(load_file(str(kept)), str(foreign), metadata={"base_model": "gemma-3-270m"})
    argv = ["attack", "--probe", str(fitted), "--task", TASK, "--suffix-in", str(foreign)]
    assert main([*argv, "--registry", str(tiny_root), "--cache-dir", str(cache_dir), "--json"]) == 2
    assert "made on gemma-3-270m, not on smollm2-135m-instruct" in capsys.readouterr().err
    argv = ["attack", "--probe", str(fitted), "--task", TASK, "--suffix-in", str(kept), "--steps", "3"]
    assert main([*argv, "--registry", str(tiny_root), "--cache-dir", str(cache_dir), "--json"]) == 2
    assert "takes no --steps" in capsys.readouterr().err
