"""Cross-model transfer shares its harvests: the re-fit's train split and the word ablations of
source and target go through the activation cache at every layer, so the transfer of a second
probe of the same task (at another layer) runs no forward on either model, and every number is
the one of the path that harvested afresh on each call."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator.axes.transfer import cross_model_transfer
from evaluator.core.activations import ActivationCache
from evaluator.core.probes import probe_from_tensors
from evaluator.core.recipes import Recipe, train_recipe
from tests.evaluator.conftest import MINILM, SMOLLM, TASK, fresh_cache

pytestmark = pytest.mark.model


def _probe(lm, registry, cache_dir, layer):
    recipe = Recipe(method="logistic_regression", task=TASK, layer=layer, seed=0)
    trained = train_recipe(recipe, lm, registry=registry, cache=ActivationCache(cache_dir))
    return probe_from_tensors(
        trained.tensors,
        trained.metadata(name=f"capitals L{layer}", category="hallucination"),
        registry=registry,
    )


def test_a_second_probes_transfer_runs_no_forward_and_keeps_its_numbers(
    smollm, minilm, tiny_registry, tmp_path
):
    models = {SMOLLM: smollm, MINILM: minilm}
    forwards: list[str] = []
    handles = [
        lm.model.register_forward_pre_hook(lambda module, args, name=name: forwards.append(name))
        for name, lm in models.items()
    ]
    try:
        shared_dir = fresh_cache(tmp_path / "shared")
        probes = [_probe(smollm, tiny_registry, shared_dir, layer) for layer in (15, 9)]

        def transfer(probe, cache_dir, share):
            (result,) = cross_model_transfer(
                probe,
                targets=[MINILM],
                registry=tiny_registry,
                cache_dir=cache_dir,
                load=models.__getitem__,
                share_activations=share,
                n_examples=8,
            )
            return result

        forwards.clear()
        first = transfer(probes[0], shared_dir, True)
        assert set(forwards) == {SMOLLM, MINILM}  # the first transfer of the task harvests
        forwards.clear()
        second = transfer(probes[1], shared_dir, True)
        assert forwards == []  # the second reads every activation from the cache
        assert second.target_layer != first.target_layer

        forwards.clear()
        old = [transfer(p, fresh_cache(tmp_path / f"old{i}"), False) for i, p in enumerate(probes)]
        assert forwards.count(SMOLLM) >= 2 and forwards.count(MINILM) >= 2  # each call harvests
    finally:
        for handle in handles:
            handle.remove()
    for new, before in zip((first, second), old, strict=True):
        assert new.pearson == pytest.approx(before.pearson, abs=1e-6)
        assert (new.n_pairs, new.example_ids, new.target_layer) == (
            before.n_pairs,
            before.example_ids,
            before.target_layer,
        )
        assert np.isfinite(new.pearson)
