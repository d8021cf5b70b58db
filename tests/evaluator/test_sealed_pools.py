"""The quarterly holdouts' sealed pools, built from the real pinned source archives (no Django, no
model): each is disjoint from every public split of its task (the retired public holdout_pool
included) by id, group and normalised text, deterministic, label-balanced, and at least ten times
the holdout drawn from it; the tasks whose upstream cannot give one are named, and draw from their
public pool with the reason. The sealing itself: a key made once with mode 0600, files that do not
open without it."""

from __future__ import annotations

import hashlib
import os
import stat
from concurrent.futures import ThreadPoolExecutor

import pytest

from evaluator.data.builders.pools import POOL_BUILDERS
from evaluator.data.holdouts import DEFAULT_SIZE, draw_seed, mint_holdout
from evaluator.data.pools import (
    POOL_RATIO,
    PUBLIC,
    SEALED,
    holdout_size,
    pool_bytes,
    pool_choose,
    public_rows,
    sealed_pool_build,
    sealed_pool_path,
    source_context,
)
from evaluator.data.registry.files import default_root
from evaluator.data.registry.load import load_registry
from evaluator.data.sealing import SealError, key_load_or_create, read_sealed, seal, unseal, write_sealed
from evaluator.data.texts import text_hash

FLOOR = 40  # the default PROBEBENCH_HOLDOUT_MIN_SIZE
#: the tasks whose upstream source is all but spent by their public splits (docs/METHODOLOGY.md,
#: "Sealed quarterly holdouts"): their cycles draw from the public holdout_pool
SHORT = {"halueval-qa-v1", "gsm8k-cot-consistency-v1", "humaneval-hacks-v1", "harmful-requests-v1"}


@pytest.fixture(scope="module")
def registry():
    return load_registry(default_root())


@pytest.fixture(scope="module")
def pools(registry, sources_dir):
    ctx = source_context(registry, sources_dir, download=False)
    return {task: sealed_pool_build(registry, task, ctx) for task in POOL_BUILDERS}


def test_every_task_about_its_text_has_a_pool_builder(registry):
    text_tasks = {t for t, spec in registry.tasks.items() if not spec.on_policy and spec.status == "active"}
    assert text_tasks <= set(POOL_BUILDERS)


def test_a_sealed_pool_is_disjoint_from_every_public_split_of_its_task(registry, pools):
    for task, rows in pools.items():
        public = public_rows(registry, task)  # train, test, distshift, holdout_pool, stress
        assert {"holdout_pool"} <= set(registry.task(task).splits)
        ids, groups = {r["id"] for r in public}, {r["group"] for r in public}
        texts = {text_hash(r["text"]) for r in public}
        assert not {r["id"] for r in rows} & ids, task
        assert not {r["group"] for r in rows} & groups, task
        assert not {text_hash(r["text"]) for r in rows} & texts, task
        assert len({r["id"] for r in rows}) == len(rows)  # ids unique
        if rows:
            share = sum(r["label"] for r in rows) / len(rows)
            assert 0.45 <= share <= 0.55, (task, share)


def test_a_sealed_pool_is_ten_times_its_holdout_or_its_task_is_named(registry, pools):
    sizes = {task: len(rows) for task, rows in pools.items()}
    short = {task for task, n in sizes.items() if n < POOL_RATIO * FLOOR}
    assert short == SHORT, sizes
    for task, n in sizes.items():
        if task not in SHORT:
            size = holdout_size(n, size=DEFAULT_SIZE, floor=FLOOR)
            assert n >= POOL_RATIO * size, (task, n, size)
            # a real draw from it: full size, label-balanced, inside the pool
            h = mint_holdout(task_id=task, quarter="2027Q1", pool=pools[task], secret=b"x" * 32, size=size)
            assert len(h.rows) == size and sum(r["label"] for r in h.rows) == size // 2


def test_a_sealed_pool_is_the_same_on_every_build(registry, sources_dir, pools):
    again = source_context(registry, sources_dir, download=False)
    for task in ("cities-truth-v1", "benchmark-vs-user-v1", "persuasion-techniques-v1"):
        assert pool_bytes(sealed_pool_build(registry, task, again)) == pool_bytes(pools[task])


def test_a_cycle_draws_from_the_sealed_pool_or_says_why_it_cannot(registry, sources_dir, tmp_path):
    key = key_load_or_create(tmp_path / "key")
    choose = {
        "data_dir": tmp_path,
        "key": key,
        "sources_dir": sources_dir,
        "size": DEFAULT_SIZE,
        "floor": FLOOR,
    }
    sealed = pool_choose(registry, "cities-truth-v1", **choose)
    assert sealed.kind == SEALED and sealed.note == "" and len(sealed.rows) == sealed.sealed_rows
    assert sealed.sha256 == hashlib.sha256(pool_bytes(sealed.rows)).hexdigest()
    assert sealed_pool_path(tmp_path, "cities-truth-v1").is_file()
    # cached: the next cycle reads the sealed file, with no source archive in reach
    cached = pool_choose(registry, "cities-truth-v1", **(choose | {"sources_dir": tmp_path / "none"}))
    assert cached.sha256 == sealed.sha256
    short = pool_choose(registry, "gsm8k-cot-consistency-v1", **choose)
    assert short.kind == PUBLIC and "fewer than 10×" in short.note and "not caught" in short.note
    assert short.sha256 == registry.task("gsm8k-cot-consistency-v1").splits["holdout_pool"].sha256
    onpolicy = pool_choose(registry, "onpolicy-city-country-v1", "smollm2-135m-instruct", **choose)
    assert onpolicy.kind == PUBLIC and "on-policy" in onpolicy.note


# --------------------------------------------------------------------------- sizes and seeds


@pytest.mark.parametrize(
    ("rows", "size", "floor", "expected"),
    [(1400, 100, 40, 100), (680, 100, 40, 68), (102, 100, 40, 40), (200, 16, 40, 16), (48, 16, 4, 4)],
)
def test_a_holdout_is_a_tenth_of_its_pool_between_the_floor_and_the_size(rows, size, floor, expected):
    assert holdout_size(rows, size=size, floor=floor) == expected


def test_each_draw_has_its_own_seed():
    secret = b"s" * 32
    seeds = {draw_seed(secret, t, m) for t in ("a-v1", "b-v1") for m in ("", "smol")}
    assert len(seeds) == 4 and draw_seed(b"t" * 32, "a-v1") not in seeds


# --------------------------------------------------------------------------- sealing


def test_the_key_is_made_once_with_mode_0600_even_by_two_processes_at_once(tmp_path):
    path = tmp_path / "keys" / "sealing.key"
    with ThreadPoolExecutor(4) as pool:
        keys = set(pool.map(lambda _: key_load_or_create(path), range(8)))
    assert len(keys) == 1 and len(keys.pop()) == 32
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["sealing.key"]  # no temporary file left


def test_a_sealed_file_opens_only_with_its_key_and_its_label(tmp_path):
    key = key_load_or_create(tmp_path / "key")
    path = tmp_path / "pool.sealed"
    write_sealed(path, b'{"id": "x", "text": "The city of Lyon is in France."}\n', key=key, label="pool:a")
    assert b"Lyon" not in path.read_bytes()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert b"Lyon" in read_sealed(path, key=key, label="pool:a")
    with pytest.raises(SealError, match="does not open"):
        read_sealed(path, key=os.urandom(32), label="pool:a")
    with pytest.raises(SealError, match="does not open"):
        read_sealed(path, key=key, label="pool:b")
    blob = bytearray(seal(b"rows", key=key, label="x"))
    blob[-1] ^= 1
    with pytest.raises(SealError, match="does not open"):
        unseal(bytes(blob), key=key, label="x")
    with pytest.raises(SealError, match="not a sealed file"):
        unseal(b"plain text", key=key, label="x")
    (tmp_path / "bad.key").write_text("not hex")
    with pytest.raises(SealError, match="64 hex digits"):
        key_load_or_create(tmp_path / "bad.key")
