"""Slow checks (``-m slow``): Gemma 3, bf16 against fp32, and a real task from tasks.yaml."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator.core.activations import ActivationCache, split_activations
from evaluator.core.harvest import harvest
from evaluator.core.models import load_model
from evaluator.core.recipes import Recipe, fit_recipe
from evaluator.metrics.metrics import auroc
from tests.evaluator.conftest import GEMMA, MINILM, PROJECT_ROOT, SMOLLM, TASK

pytestmark = [pytest.mark.slow, pytest.mark.model]


@pytest.fixture(scope="module")
def gemma(tiny_registry, cache_dir):
    return load_model(GEMMA, registry=tiny_registry, cache_dir=cache_dir, device="cpu", dtype="float32")


def _logistic_auroc(lm, registry, layer: int, cache=None) -> tuple[float, np.ndarray]:
    acts = {
        split: split_activations(
            lm, registry, TASK, split, layers=[layer], position="last_token", cache=cache
        )[layer]
        for split in ("train", "test")
    }
    t = fit_recipe(Recipe("logistic_regression", TASK, layer), acts["train"].X, acts["train"].labels)
    scores = ((acts["test"].X - t["mean"]) / t["scale"]) @ t["weight"] + t["bias"]
    return auroc(scores, acts["test"].labels), acts["test"].X


def test_gemma_batched_equals_one_by_one_and_the_full_forward(gemma):
    import torch

    prompts = ["The capital of France is Paris.", "Hi", "A much longer prompt that needs padding in a batch."]
    batched = harvest(gemma, prompts, layers=[0, 9, 18], positions=["last_token", "mean"])
    for i, prompt in enumerate(prompts):
        alone = harvest(gemma, [prompt], layers=[0, 9, 18], positions=["last_token", "mean"])
        for key, matrix in batched.items():
            scale = max(1.0, float(np.abs(alone[key][0]).max()))
            assert np.abs(matrix[i] - alone[key][0]).max() <= 1e-4 * scale, key
        enc = gemma.tokenizer([prompt], return_tensors="pt")
        with torch.inference_mode():
            full = gemma.model(**enc, output_hidden_states=True).hidden_states[9][0, -1].numpy()
        assert np.abs(batched[(9, "last_token")][i] - full).max() <= 1e-4 * np.abs(full).max()


def test_a_logistic_probe_on_gemma_separates_held_out_capitals(gemma, tiny_registry):
    score, _ = _logistic_auroc(gemma, tiny_registry, 9)
    assert score >= 0.9  # 0.998 was measured with grouped CV at layer 9


@pytest.mark.parametrize(("model_id", "layer"), [(SMOLLM, 15), (GEMMA, 9)])
def test_bf16_gives_the_same_probe_results_as_fp32(model_id, layer, tiny_registry, cache_dir):
    """What ``bf16_ok: true`` in models.yaml claims (bf16 is used only where it is native)."""
    fp32 = load_model(model_id, registry=tiny_registry, cache_dir=cache_dir, device="cpu", dtype="float32")
    bf16 = load_model(model_id, registry=tiny_registry, cache_dir=cache_dir, device="cpu", dtype="bfloat16")
    a32, x32 = _logistic_auroc(fp32, tiny_registry, layer)
    a16, x16 = _logistic_auroc(bf16, tiny_registry, layer)
    cosines = (x32 * x16).sum(1) / (np.linalg.norm(x32, axis=1) * np.linalg.norm(x16, axis=1))
    assert cosines.min() > 0.999
    assert abs(a32 - a16) <= 0.02


def test_a_real_task_trains_and_evaluates_with_transfer_to_every_model(tmp_path):
    from evaluator.axes.evaluate import evaluate_probe
    from evaluator.core.probes import save_probe
    from evaluator.core.recipes import train_recipe
    from evaluator.data.registry.load import load_registry
    from tests.evaluator.conftest import fresh_cache, model_cache_dir

    registry = load_registry(PROJECT_ROOT)
    task_id = "cities-truth-v1"
    if task_id not in registry.tasks:
        pytest.skip(f"{task_id} is not in tasks.yaml yet")
    cache_dir = model_cache_dir()  # the project cache: reruns read the activations from disk
    fresh_cache(cache_dir)
    lm = load_model(SMOLLM, registry=registry, cache_dir=cache_dir, device="cpu", dtype="float32")
    trained = train_recipe(
        Recipe("logistic_regression", task_id, 15), lm, registry=registry, cache=ActivationCache(cache_dir)
    )
    save_probe(tmp_path / "p", trained.tensors, trained.metadata(name="cities LR", category="hallucination"))
    result = evaluate_probe(
        tmp_path / "p",
        registry=registry,
        cache_dir=cache_dir,
        tasks=[task_id],
        transfer_targets=[GEMMA, MINILM],
        device="cpu",
        dtype="float32",
    )
    assert result.aggregate["auroc"] > 0.75
    assert {t.target_model for t in result.transfer} == {GEMMA, MINILM}
    assert result.reproduction is not None and result.reproduction.reproduced
    assert not result.tasks[task_id].metrics.auroc_ds_imputed
