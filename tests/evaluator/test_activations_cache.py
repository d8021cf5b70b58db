"""The activation cache is content-addressed: hit on a repeat, missed after any change to what
the vectors depend on, and safe when two processes write the same entry."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from evaluator.core.activations import ActivationCache, split_activations
from evaluator.data.registry.load import load_registry
from evaluator.errors import SplitHashMismatch
from tests.evaluator.conftest import TASK, build_registry, capitals_task, fresh_cache


def _acts(
    lm, registry, cache, layer=6, split="test", position="last_token", input_kind="single", all_layers=True
):
    return split_activations(
        lm,
        registry,
        TASK,
        split,
        layers=[layer],
        position=position,
        input_kind=input_kind,
        cache=cache,
        all_layers=all_layers,
    )[layer]


@pytest.fixture
def cache(tmp_path) -> ActivationCache:
    return ActivationCache(fresh_cache(tmp_path / "cache"))


@pytest.mark.model
def test_a_second_call_hits_the_cache_with_identical_vectors(smollm, tiny_registry, cache):
    first = _acts(smollm, tiny_registry, cache)
    second = _acts(smollm, tiny_registry, cache)
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert first.cache_key == second.cache_key
    np.testing.assert_array_equal(first.X, second.X)
    assert second.ids == first.ids and second.split_sha256 == tiny_registry.task(TASK).splits["test"].sha256


@pytest.mark.model
def test_the_cache_survives_a_new_cache_object(smollm, tiny_registry, cache):
    _acts(smollm, tiny_registry, cache)
    assert _acts(smollm, tiny_registry, ActivationCache(cache.root.parent)).cache_hit


@pytest.mark.model
def test_another_layer_or_position_is_a_different_entry(smollm, tiny_registry, cache):
    base = _acts(smollm, tiny_registry, cache, all_layers=False)  # only layer 6 is stored
    assert not _acts(smollm, tiny_registry, cache, layer=5, all_layers=False).cache_hit
    assert not _acts(smollm, tiny_registry, cache, position="mean").cache_hit
    assert len({base.cache_key, _acts(smollm, tiny_registry, cache, layer=5).cache_key}) == 2


@pytest.mark.model
def test_a_changed_template_misses_the_cache(smollm, tiny_registry, cache, tmp_path):
    before = _acts(smollm, tiny_registry, cache)
    root = build_registry(tmp_path / "reg2", [capitals_task(tmp_path / "reg2", single="Claim: {text}")])
    changed = _acts(smollm, load_registry(root), cache)
    assert not changed.cache_hit and changed.cache_key != before.cache_key
    assert changed.split_sha256 == before.split_sha256  # same split bytes, new template
    assert not np.allclose(changed.X, before.X)


@pytest.mark.model
def test_a_changed_split_misses_the_cache(smollm, tiny_registry, cache, tmp_path):
    before = _acts(smollm, tiny_registry, cache)
    root = build_registry(tmp_path / "reg3", [capitals_task(tmp_path / "reg3", n_test=12)])
    changed = _acts(smollm, load_registry(root), cache)
    assert not changed.cache_hit and changed.split_sha256 != before.split_sha256
    assert changed.cache_key != before.cache_key


@pytest.mark.model
def test_a_changed_harvester_version_misses_the_cache(smollm, tiny_registry, cache, monkeypatch):
    import evaluator.core.activations as activations

    before = _acts(smollm, tiny_registry, cache)
    monkeypatch.setattr(activations, "HARVESTER_VERSION", "harvest-next")
    after = _acts(smollm, tiny_registry, cache)
    assert not after.cache_hit and after.cache_key != before.cache_key


@pytest.mark.model
def test_contrast_pairs_store_both_sides_and_read_their_difference(smollm, tiny_registry, cache):
    pair = _acts(smollm, tiny_registry, cache, input_kind="contrast_pair")
    again = _acts(smollm, tiny_registry, cache, input_kind="contrast_pair")
    assert again.cache_hit and pair.X_pos is not None and pair.X_neg is not None
    np.testing.assert_array_equal(again.X, pair.X_pos - pair.X_neg)


def test_a_split_file_edited_behind_tasks_yaml_is_refused(tmp_path):
    root = build_registry(tmp_path / "reg")
    registry = load_registry(root)
    path = root / registry.task(TASK).splits["test"].path
    original = path.read_bytes()
    path.write_bytes(original.replace(b"Jakarta", b"Bandung"))
    assert path.read_bytes() != original
    from evaluator.core.activations import read_split

    with pytest.raises(SplitHashMismatch, match="does not match the pinned"):
        read_split(registry, TASK, "test")


def test_a_damaged_entry_counts_as_a_miss(tmp_path):
    cache = ActivationCache(tmp_path)
    key = ActivationCache.make_key({"x": 1})
    cache.put(key, {"X": np.ones((3, 4))}, {"ids": ["a", "b", "c"]})
    assert cache.get(key) is not None
    path = cache.path(key)
    path.write_bytes(path.read_bytes()[:-5])
    assert cache.get(key) is None


def _writer(root: str, key: str, rounds: int) -> None:
    cache = ActivationCache(root)
    matrix = np.arange(20000, dtype=np.float32).reshape(200, 100)
    for _ in range(rounds):
        cache.put(key, {"X": matrix}, {"ids": [str(i) for i in range(200)], "writer": "any"})


def test_two_processes_writing_the_same_entry_leave_a_valid_file(tmp_path):
    key = ActivationCache.make_key({"concurrent": True})
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), key, 25)) for _ in range(2)]
    for p in procs:
        p.start()
    reads = 0
    cache = ActivationCache(tmp_path)
    while any(p.is_alive() for p in procs):
        got = cache.get(key)
        if got is not None:  # whenever the file exists it is complete
            assert got[0]["X"].shape == (200, 100)
            reads += 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    arrays, meta = cache.get(key)
    np.testing.assert_array_equal(arrays["X"], np.arange(20000, dtype=np.float32).reshape(200, 100))
    assert meta["ids"][:2] == ["0", "1"]
    assert not [p for p in Path(cache.root).rglob("*.tmp")]  # no temporary files left behind


def test_cache_keys_are_canonical_json_hashes():
    a = ActivationCache.make_key({"layer": 3, "position": "mean"})
    b = ActivationCache.make_key(json.loads('{"position": "mean", "layer": 3}'))
    assert a == b and len(a) == 64
