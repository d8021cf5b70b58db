"""One forward for every probe: the first harvest of a split keeps every layer of the residual
stream, so a probe at another layer of the same split reads the cache without running the model,
and the vectors (and the scores read from them) are the ones a one-layer harvest gives."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from evaluator.core.activations import ActivationCache, prompt_activations, residual_layers, split_activations
from tests.evaluator.conftest import TASK, fresh_cache

pytestmark = pytest.mark.model


@contextmanager
def counting_forwards(lm) -> Iterator[list[int]]:
    """Every call of the base model's forward (one per batch), counted by a hook on the model."""
    calls: list[int] = []
    handle = lm.model.register_forward_pre_hook(lambda module, args: calls.append(1))
    try:
        yield calls
    finally:
        handle.remove()


def _acts(lm, registry, cache, layer, *, all_layers=True, input_kind="single", position="last_token"):
    return split_activations(
        lm,
        registry,
        TASK,
        "test",
        layers=[layer],
        position=position,
        input_kind=input_kind,
        cache=cache,
        all_layers=all_layers,
    )[layer]


@pytest.fixture
def cache(tmp_path) -> ActivationCache:
    return ActivationCache(fresh_cache(tmp_path / "cache"))


def _scores(X: np.ndarray, seed: int) -> np.ndarray:
    """s(x) of a seeded linear probe (the board's scores are a matrix product like this one)."""
    rng = np.random.default_rng(seed)
    return X.astype(np.float64) @ rng.standard_normal(X.shape[1]) + 0.1


def test_a_second_probe_at_another_layer_runs_no_forward(smollm, tiny_registry, cache):
    with counting_forwards(smollm) as first:
        before = _acts(smollm, tiny_registry, cache, 6)
    with counting_forwards(smollm) as second:
        after = {layer: _acts(smollm, tiny_registry, cache, layer) for layer in (0, 20, 30)}
    assert not before.cache_hit and len(first) >= 1
    assert second == [] and all(a.cache_hit for a in after.values())
    entries = sorted(cache.root.rglob("*.safetensors"))
    assert len(entries) == len(residual_layers(smollm)) == smollm.n_layers + 1


def test_every_layer_gives_the_scores_of_a_one_layer_harvest(smollm, tiny_registry, tmp_path):
    tolerances = tiny_registry.protocol().tolerances
    every = ActivationCache(fresh_cache(tmp_path / "every"))
    _acts(smollm, tiny_registry, every, 15)  # the first probe: all layers harvested and stored
    for layer in (0, 7, 15, 29, 30):
        one = _acts(smollm, tiny_registry, None, layer, all_layers=False)  # the forward stopped there
        cached = _acts(smollm, tiny_registry, every, layer)
        assert cached.cache_hit and cached.cache_key == one.cache_key
        s_one, s_cached = _scores(one.X, layer), _scores(cached.X, layer)
        atol = tolerances.score_atol + tolerances.score_rtol * float(np.abs(s_one).max())
        np.testing.assert_allclose(s_cached, s_one, rtol=0, atol=atol)
        np.testing.assert_allclose(cached.X, one.X, rtol=0, atol=1e-4 * float(np.abs(one.X).max()))


def test_contrast_pairs_and_the_mean_position_keep_every_layer_too(smollm, tiny_registry, cache):
    _acts(smollm, tiny_registry, cache, 4, input_kind="contrast_pair", position="mean")
    with counting_forwards(smollm) as calls:
        later = _acts(smollm, tiny_registry, cache, 25, input_kind="contrast_pair", position="mean")
    one = _acts(
        smollm, tiny_registry, None, 25, all_layers=False, input_kind="contrast_pair", position="mean"
    )
    assert calls == [] and later.cache_hit
    np.testing.assert_allclose(later.X, one.X, rtol=0, atol=1e-4 * float(np.abs(one.X).max()))
    with counting_forwards(smollm) as calls:  # another position is another harvest
        assert not _acts(smollm, tiny_registry, cache, 25, input_kind="contrast_pair").cache_hit
    assert calls


def test_an_entry_written_by_a_one_layer_harvest_is_read_and_kept(smollm, tiny_registry, cache):
    old = _acts(smollm, tiny_registry, cache, 6, all_layers=False)  # as the cache was filled before
    assert sorted(p.stem for p in cache.root.rglob("*.safetensors")) == [old.cache_key]
    written = cache.path(old.cache_key).stat().st_mtime_ns
    with counting_forwards(smollm) as calls:
        assert _acts(smollm, tiny_registry, cache, 6).cache_hit
    assert calls == []
    assert not _acts(smollm, tiny_registry, cache, 9).cache_hit  # fills the other layers
    assert len(list(cache.root.rglob("*.safetensors"))) == smollm.n_layers + 1
    assert cache.path(old.cache_key).stat().st_mtime_ns == written  # the old entry was not rewritten


def test_prompt_lists_are_cached_by_their_content_at_every_layer(smollm, cache):
    prompts = ["The capital of France is Paris.", "Paris is the capital of France, it is said.", "Hi"]
    X, key, hit = prompt_activations(smollm, prompts, layer=12, position="last_token", cache=cache)
    with counting_forwards(smollm) as calls:
        X2, key2, hit2 = prompt_activations(smollm, prompts, layer=27, position="last_token", cache=cache)
    assert (hit, hit2, calls) == (False, True, []) and key != key2
    one, _, _ = prompt_activations(smollm, prompts, layer=27, position="last_token", cache=None)
    np.testing.assert_allclose(X2, one, rtol=0, atol=1e-4 * float(np.abs(one).max()))
    _, other, hit3 = prompt_activations(smollm, prompts[:2], layer=27, position="last_token", cache=cache)
    assert not hit3 and other != key2  # another list is another entry
