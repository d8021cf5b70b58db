"""Measurement protocol p1: loading and validation, the numerics it sets, the environment record,
and the reproduction rule it states. Fast: no model forward except one memoized load."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from evaluator.axes.baselines import BASELINE_SEED
from evaluator.axes.reproduction import reproduction_verdict
from evaluator.axes.transfer import TRANSFER_SEED
from evaluator.core.environment import CPU_FLAGS, cpu_info, environment_capture, environment_label
from evaluator.core.harvest import HarvestConfig
from evaluator.core.models import ProtocolViolation, load_model, protocol_numerics_apply
from evaluator.data.registry.load import load_registry
from evaluator.data.registry.protocols import load_protocol
from evaluator.errors import RegistryError
from evaluator.metrics.metrics import BOOTSTRAP_SEED
from tests.evaluator.conftest import PROJECT_ROOT, SMOLLM

P1 = PROJECT_ROOT / "registry" / "protocols" / "p1.yaml"


@pytest.fixture(scope="module")
def p1():
    return load_protocol(P1)


def test_the_current_protocol_is_p2_with_p1s_numerics(p1):
    """p2 adds the graded attack; every clean number is measured as under p1."""
    current = load_registry(PROJECT_ROOT).protocol()
    assert current.id == "p2" and current.attack_graded is not None
    assert (current.dtype, current.tolerances, current.seeds) == (p1.dtype, p1.tolerances, p1.seeds)
    assert HarvestConfig.from_protocol(current) == HarvestConfig.from_protocol(p1)


def test_p1_is_float32_without_tf32(p1):
    assert p1.id == "p1"
    assert (p1.dtype, p1.tf32, p1.float32_matmul_precision) == ("float32", False, "highest")
    assert set(p1.devices) == {"cpu", "cuda"}
    t = p1.tolerances
    assert (t.auroc, t.ece) == (0.002, 0.005)
    assert 0 < t.score_bound(25.0) < 0.01
    assert "Pearson ≥ 0.99" in t.reproduction_criterion and "|ΔAUROC| ≤ 0.02" in t.reproduction_criterion


def test_the_protocol_states_the_seeds_and_harvest_settings_the_code_uses(p1):
    assert p1.seeds == {
        "recipe": 0,
        "baselines": BASELINE_SEED,
        "bootstrap": BOOTSTRAP_SEED,
        "transfer": TRANSFER_SEED,
    }
    assert HarvestConfig.from_protocol(p1) == HarvestConfig()
    assert HarvestConfig.from_protocol(p1, batch_size=1).batch_size == 1


def test_a_small_registry_without_protocols_uses_the_projects(tiny_registry):
    assert tiny_registry.protocol().sha256 == load_protocol(P1.with_name("p2.yaml")).sha256


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["compute"].update(dtype="bfloat16"), "exploration"),
        (lambda d: d["compute"].update(tf32=True), "TF32 must be off"),
        (lambda d: d["harvest"].update(truncation_side="right"), "truncates on the left"),
        (lambda d: d["tolerances"].update(auroc=-0.1), "tolerances.auroc"),
        (lambda d: d["tolerances"]["reproduction"].update(min_score_correlation=1.5), "(0, 1]"),
        (lambda d: d["seeds"].pop("bootstrap"), "seeds.bootstrap"),
        (lambda d: d.update(id="p2"), "match the file name"),
    ],
)
def test_a_protocol_that_breaks_the_contract_is_refused(tmp_path: Path, change, message):
    data = yaml.safe_load(P1.read_text())
    change(data)
    path = tmp_path / "p1.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RegistryError, match=message.replace("(", r"\(").replace("]", r"\]")):
        load_protocol(path)


# --------------------------------------------------------------------------- numerics


def test_the_cuda_numerics_switch_tf32_off_and_cpu_is_left_alone():
    import torch

    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("medium")
        assert protocol_numerics_apply(device="cpu") == {}
        assert torch.backends.cuda.matmul.allow_tf32  # untouched on CPU
        applied = protocol_numerics_apply(device="cuda")
        assert applied == {
            "matmul_allow_tf32": False,
            "cudnn_allow_tf32": False,
            "float32_matmul_precision": "highest",
        }
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


def test_a_board_run_refuses_bf16_before_loading_anything(tiny_registry, tmp_path, p1, monkeypatch):
    import evaluator.core.models as models

    with pytest.raises(ProtocolViolation, match="protocol p1.*bfloat16 on cpu is for exploration"):
        load_model(
            SMOLLM, registry=tiny_registry, cache_dir=tmp_path, device="cpu", dtype="bfloat16", protocol=p1
        )
    monkeypatch.setattr(models, "cpu_has_fast_bf16", lambda: True)  # "auto" would pick bf16 here
    with pytest.raises(ProtocolViolation):
        load_model(
            SMOLLM, registry=tiny_registry, cache_dir=tmp_path, device="cpu", dtype="auto", protocol=p1
        )
    assert not (tmp_path / "models").exists()


@pytest.mark.model
def test_the_protocol_computes_in_float32_on_a_cpu_with_bf16_units(smollm, tiny_registry, p1, cache_dir):
    lm = load_model(SMOLLM, registry=tiny_registry, cache_dir=cache_dir, device="cpu", protocol=p1)
    assert lm.dtype_name == "float32" and lm.protocol_id == "p1"
    assert lm.describe()["protocol"] == "p1"
    explore = load_model(SMOLLM, registry=tiny_registry, cache_dir=cache_dir, device="cpu", dtype="bfloat16")
    assert explore.protocol_id is None and explore.describe()["protocol"] is None


# --------------------------------------------------------------------------- environment


CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9B14
flags\t\t: fpu sse2 avx avx2 avx512f avx512_bf16 avx512_vnni
processor\t: 1
model name\t: AMD EPYC 9B14
flags\t\t: fpu sse2 avx avx2 avx512f avx512_bf16 avx512_vnni
"""


def test_cpu_info_reads_the_model_and_the_kernel_flags():
    info = cpu_info(CPUINFO)
    assert info["cpu_model"] == "AMD EPYC 9B14"
    assert info["cpu_flags"] == {"avx2": True, "avx512f": True, "avx512_bf16": True, "amx_bf16": False}
    assert cpu_info("")["cpu_flags"] == dict.fromkeys(CPU_FLAGS, False)


def test_the_environment_of_this_machine_is_recorded():
    import sklearn
    import torch
    import transformers

    env = environment_capture(device="cpu", dtype="float32", protocol_id="p1")
    assert env["protocol"] == "p1" and env["device"] == "cpu" and env["dtype"] == "float32"
    assert env["threads"] == torch.get_num_threads()
    assert (env["torch"], env["transformers"], env["scikit_learn"]) == (
        torch.__version__,
        transformers.__version__,
        sklearn.__version__,
    )
    flags = Path("/proc/cpuinfo").read_text().split()
    assert env["cpu_flags"]["avx512_bf16"] == ("avx512_bf16" in flags)
    assert env["gpu"] is None and env["tf32"] is None
    label = environment_label(env)
    assert (
        label.startswith("p1 · cpu (") and " · float32 · " in label and f"torch {torch.__version__}" in label
    )
    assert environment_label({}) == ""
    assert environment_label(dict(env, protocol=None, dtype="bfloat16")).startswith("no protocol · cpu (")


# --------------------------------------------------------------------------- reproduction rule


def test_a_refit_whose_weights_rotate_but_whose_scores_agree_is_reproduced(p1):
    """Two identical features: [1, 0] and [0, 1] are orthogonal weight vectors (cosine 0) that
    give the same score to every row. The rule judges the scores."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(200)
    X = np.stack([x, x], axis=1)
    labels = (x + 0.5 * rng.standard_normal(200) > 0).astype(int)
    w_artifact, w_refit = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    assert float(w_artifact @ w_refit) == 0.0
    verdict = reproduction_verdict(
        submitted_scores=X @ w_artifact, refit_scores=X @ w_refit, labels=labels, tolerances=p1.tolerances
    )
    assert verdict.reproduced and verdict.score_pearson == 1.0 and verdict.auroc_diff == 0.0
    assert verdict.criteria == p1.tolerances.reproduction_criterion


def test_a_refit_that_scores_the_rows_differently_is_not_reproduced(p1):
    rng = np.random.default_rng(1)
    s = rng.standard_normal(300)
    labels = (s > 0).astype(int)
    noisy = s + 0.5 * rng.standard_normal(300)  # correlation ≈ 0.9, AUROC close
    verdict = reproduction_verdict(
        submitted_scores=s, refit_scores=noisy, labels=labels, tolerances=p1.tolerances
    )
    assert not verdict.reproduced and verdict.score_pearson < 0.99
    loose = dataclasses.replace(p1.tolerances, repro_min_score_correlation=0.5, repro_max_auroc_diff=0.5)
    assert reproduction_verdict(
        submitted_scores=s, refit_scores=noisy, labels=labels, tolerances=loose
    ).reproduced
    flipped = reproduction_verdict(submitted_scores=s, refit_scores=-s, labels=labels, tolerances=loose)
    assert not flipped.reproduced  # a sign flip is a different probe
