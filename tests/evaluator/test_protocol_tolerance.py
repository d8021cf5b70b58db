"""The tolerance contract of protocol p1 on the real SmolLM2 (registry/protocols/p1.yaml).

One artifact, the committed HaluEval contrast-pair reference probe (layer 20, |s| up to ~25), is
scored on a real slice of halueval-qa-v1 under numerics the protocol says are result-neutral:
1 vs 2 threads, batch size 1 vs 32, ``ATEN_CPU_CAPABILITY=avx2`` vs the default kernels (read at
torch import, so a subprocess), and a cold vs a warm activation cache. Every pair must agree
within the protocol: per-example scores within ``score_atol + score_rtol · max|s|``, AUROC within
``tolerances.auroc``, ECE within ``tolerances.ece``, the same reproduction verdict (a recipe
re-fit in each environment judged against one artifact). bfloat16 compute, which the protocol
refuses for a board run, is shown to fall outside the bound.

The slice: 40 test rows and 64 train rows (contrast pairs: 208 prompts per environment), about
two minutes on two cores. The full test split runs under ``-m slow``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evaluator.axes.reproduction import reproduction_check
from evaluator.axes.run import execute_run
from evaluator.core.activations import ActivationCache
from evaluator.core.harvest import HarvestConfig
from evaluator.core.models import load_model
from evaluator.core.probes import load_probe, save_probe
from evaluator.core.recipes import Recipe, train_recipe
from evaluator.data.registry.load import load_registry
from evaluator.metrics.metrics import auroc, ece
from tests.evaluator.conftest import PROJECT_ROOT, SMOLLM, fresh_cache, model_cache_dir
from tests.integration.mini_registry import build_mini_registry

pytestmark = pytest.mark.model

TASK = "halueval-qa-v1"
ARTIFACT = PROJECT_ROOT / "registry" / "reference_probes" / "halueval-cp-logreg-smollm2"
SLICE = {"train": 64, "test": 40, "distshift": 4, "holdout_pool": 4}
FULL = {"train": 64, "test": 300, "distshift": 4, "holdout_pool": 4}


def measure(
    root: Path, cache_dir: Path, repro_artifact: Path, *, batch_size: int, dtype: str, reproduce: bool = True
) -> dict:
    """Score the artifact on the slice's test split and run the reproduction check of the re-fit
    artifact (unless ``reproduce`` is False), in this process's numerics. JSON-able, so a subprocess
    can return it."""
    reg = load_registry(root)
    protocol = reg.protocol()
    lm = load_model(SMOLLM, registry=reg, cache_dir=cache_dir, device="cpu", dtype=dtype, memo=False)
    config = HarvestConfig.from_protocol(protocol, batch_size=batch_size)
    probe = load_probe(ARTIFACT, registry=reg)
    run = execute_run(
        probe, task_id=TASK, split="test", registry=reg, cache_dir=cache_dir, lm=lm, harvest_config=config
    )
    repro = (
        reproduction_check(repro_artifact, registry=reg, cache_dir=cache_dir, lm=lm, harvest_config=config)
        if reproduce
        else None
    )
    return {
        "scores": run.examples.scores.tolist(),
        "probs": run.examples.probs.tolist(),
        "labels": run.examples.labels.tolist(),
        "cache_hit": run.cache_hit,
        "protocol": run.protocol,
        "cpu_capability": run.environment["cpu_capability"],
        "threads": run.environment["threads"],
        "reproduced": repro.reproduced if repro else None,
        "repro_pearson": repro.score_pearson if repro else None,
    }


def measure_in_subprocess(root: Path, cache_dir: Path, repro_artifact: Path, env: dict) -> dict:
    code = (
        "import json, sys; from pathlib import Path;"
        "from tests.evaluator.test_protocol_tolerance import measure;"
        "r = measure(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), batch_size=32, dtype='float32');"
        "print(json.dumps(r))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(root), str(cache_dir), str(repro_artifact)],
        cwd=PROJECT_ROOT,
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_within_protocol(base: dict, other: dict, tolerances, what: str) -> None:
    s0, s1 = np.array(base["scores"]), np.array(other["scores"])
    labels = np.array(base["labels"])
    assert other["labels"] == base["labels"]
    bound = tolerances.score_bound(np.abs(s0).max())
    worst = float(np.abs(s1 - s0).max())
    assert worst <= bound, f"{what}: per-example |Δs| {worst:.3g} > {bound:.3g}"
    d_auroc = abs(auroc(s1, labels) - auroc(s0, labels))
    assert d_auroc <= tolerances.auroc, f"{what}: |ΔAUROC| {d_auroc:.4g}"
    d_ece = abs(ece(np.array(other["probs"]), labels) - ece(np.array(base["probs"]), labels))
    assert d_ece <= tolerances.ece, f"{what}: |ΔECE| {d_ece:.4g}"
    assert other["reproduced"] == base["reproduced"], what


def _setup(tmp_path_factory, sizes: dict) -> tuple[Path, Path, object]:
    """A registry holding a real slice of halueval-qa-v1, and a re-fit artifact: the reference
    probe's recipe trained on the slice's train rows (the reproduction check re-fits it again).
    The train rows are harvested once, into the base cache, in the base's numerics: the base
    measurement's reproduction check reads them (the test split it scores stays cold)."""
    root = build_mini_registry(tmp_path_factory.mktemp("halueval"), task_ids=(TASK,), sizes=sizes)
    reg = load_registry(root)
    cache = fresh_cache(tmp_path_factory.mktemp("acts-base"))
    lm = load_model(SMOLLM, registry=reg, cache_dir=model_cache_dir(), device="cpu", dtype="float32")
    committed = load_probe(ARTIFACT, registry=reg)
    recipe = Recipe.from_dict(committed.metadata.recipe, probe=committed.metadata, registry=reg)
    trained = train_recipe(
        recipe,
        lm,
        registry=reg,
        cache=ActivationCache(cache),
        config=HarvestConfig.from_protocol(reg.protocol(), batch_size=32),
    )
    artifact = tmp_path_factory.mktemp("refit") / "probe"
    save_probe(
        artifact,
        trained.tensors,
        trained.metadata(name="halueval slice re-fit", category="hallucination", license="Apache-2.0"),
    )
    return root, cache, artifact


@pytest.fixture(scope="module")
def halueval_slice(tmp_path_factory):
    return _setup(tmp_path_factory, SLICE)


def _contract(root: Path, cache: Path, artifact: Path, tmp_path: Path) -> dict[str, dict]:
    import torch

    tolerances = load_registry(root).protocol().tolerances
    results = {"base": measure(root, cache, artifact, batch_size=32, dtype="float32")}
    assert (
        results["base"]["protocol"] == load_registry(root).protocol().id and not results["base"]["cache_hit"]
    )
    assert results["base"]["reproduced"], "the re-fit of the same recipe on the same rows reproduces"

    results["warm"] = measure(root, cache, artifact, batch_size=32, dtype="float32")
    assert results["warm"]["cache_hit"]
    assert results["warm"]["scores"] == results["base"]["scores"]  # the cache stores float32 exactly

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        results["1 thread"] = measure(
            root, fresh_cache(tmp_path / "t1"), artifact, batch_size=32, dtype="float32"
        )
    finally:
        torch.set_num_threads(threads)
    assert results["1 thread"]["threads"] == 1

    results["batch 1"] = measure(root, fresh_cache(tmp_path / "b1"), artifact, batch_size=1, dtype="float32")
    results["avx2"] = measure_in_subprocess(
        root, fresh_cache(tmp_path / "avx2"), artifact, {"ATEN_CPU_CAPABILITY": "avx2"}
    )
    assert results["avx2"]["cpu_capability"] == "AVX2"
    for what, other in results.items():
        assert_within_protocol(results["base"], other, tolerances, what)
    return results


def test_threads_batching_kernels_and_the_cache_move_no_number_beyond_the_protocol(halueval_slice, tmp_path):
    root, cache, artifact = halueval_slice
    _contract(root, cache, artifact, tmp_path)


def test_bf16_compute_falls_outside_the_protocol_bound_and_is_not_a_protocol_run(halueval_slice, tmp_path):
    root, cache, artifact = halueval_slice
    tolerances = load_registry(root).protocol().tolerances
    # the test split's scores are enough to show the bound broken (no re-fit: bfloat16 matrix products
    # are emulated, and slow, on a CPU without bfloat16 instructions)
    base = measure(root, cache, artifact, batch_size=32, dtype="float32", reproduce=False)
    bf16 = measure(
        root, fresh_cache(tmp_path / "bf16"), artifact, batch_size=32, dtype="bfloat16", reproduce=False
    )
    assert bf16["protocol"] is None  # exploration: never a board number
    s0, s1 = np.array(base["scores"]), np.array(bf16["scores"])
    assert np.abs(s1 - s0).max() > 10 * tolerances.score_bound(np.abs(s0).max())


@pytest.mark.slow
def test_the_contract_holds_on_the_whole_halueval_test_split(tmp_path_factory, tmp_path):
    root, cache, artifact = _setup(tmp_path_factory, FULL)
    _contract(root, cache, artifact, tmp_path)
