"""The SAE foundation without a model (evaluator/core/sae/, evaluator/data/registry/saes.py,
evaluator/data/corpus.py): the TopK encoding, the SAELens files and their hash check, the seeded
trainer on synthetic activations, the statistics of the card and the registry's checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from evaluator.commands.cli import build_parser
from evaluator.core.sae.activations import shuffled_batches
from evaluator.core.sae.card import sae_statistics
from evaluator.core.sae.model import (
    CFG_NAME,
    WEIGHTS_NAME,
    SaeFilesError,
    SaeHashMismatch,
    TopKSae,
    load_sae,
    sae_cfg,
    sae_from_registry,
    save_sae,
)
from evaluator.core.sae.train import TrainConfig, geometric_median, train_on_activations
from evaluator.data.builders.sources import load_sources
from evaluator.data.corpus import corpus_split, is_heldout
from evaluator.data.registry.load import load_registry
from evaluator.data.registry.saes import load_saes
from evaluator.errors import RegistryError
from tests.evaluator.conftest import PROJECT_ROOT

D_MODEL, FEATURES, WIDTH, K = 32, 48, 64, 4


def synthetic_blocks(tokens: int, *, seed: int = 0, block: int = 500) -> list[torch.Tensor]:
    """Activations made of K of FEATURES fixed directions each (plus an offset and a little noise):
    what an SAE should learn to read."""
    g = torch.Generator().manual_seed(seed)
    dictionary = torch.randn(FEATURES, D_MODEL, generator=g)
    dictionary /= dictionary.norm(dim=1, keepdim=True)
    offset = 3 * torch.randn(D_MODEL, generator=g)
    blocks = []
    for start in range(0, tokens, block):
        n = min(block, tokens - start)
        which = torch.randint(0, FEATURES, (n, K), generator=g)
        coefs = 1 + 4 * torch.rand(n, K, generator=g)
        x = (coefs[..., None] * dictionary[which]).sum(dim=1) + offset
        blocks.append(x + 0.01 * torch.randn(n, D_MODEL, generator=g))
    return blocks


def tiny_config(seed: int = 0, **overrides) -> TrainConfig:
    values = dict(
        width=WIDTH,
        k=K,
        tokens=12_000,
        seed=seed,
        batch_size=250,
        buffer_tokens=2_000,
        init_tokens=500,
        lr=3e-3,
    )
    return TrainConfig(**(values | overrides))


def small_sae(seed: int = 0) -> TopKSae:
    return TopKSae.initial(D_MODEL, WIDTH, K, generator=torch.Generator().manual_seed(seed))


def saved(tmp_path: Path, sae: TopKSae | None = None) -> tuple[Path, str]:
    sae = sae or small_sae()
    cfg = sae_cfg(
        sae,
        model_id="smollm2-135m-instruct",
        layer=3,
        context=64,
        prepend_bos=False,
        dataset="test",
        provenance={"note": "synthetic"},
    )
    directory = tmp_path / "sae"
    return directory, save_sae(sae, cfg, directory)


# --------------------------------------------------------------------------- the TopK SAE


def test_topk_encode_gives_exactly_k_active_latents():
    sae = small_sae()
    x = torch.randn(200, D_MODEL)
    z = sae.encode(x)
    assert z.shape == (200, WIDTH)
    assert ((z != 0).sum(dim=1) <= K).all()
    sae.b_enc = torch.full((WIDTH,), 100.0)  # every pre-activation positive: the ReLU keeps all k
    z = sae.encode(x)
    assert ((z != 0).sum(dim=1) == K).all()
    assert torch.allclose(sae.decode(z), sae.reconstruct(x), atol=1e-4)


def test_the_decoder_rows_start_and_stay_unit_norm_and_scale_folds_into_the_biases():
    sae = small_sae()
    assert torch.allclose(sae.W_dec.norm(dim=1), torch.ones(WIDTH), atol=1e-5)
    sae.b_dec = torch.randn(D_MODEL)
    x = torch.randn(50, D_MODEL)
    raw = sae.folded(7.0)
    assert torch.allclose(raw.reconstruct(x), sae.reconstruct(7.0 * x) / 7.0, atol=1e-4)
    trained = train_on_activations(synthetic_blocks(3000), d_model=D_MODEL, config=tiny_config(tokens=3000))
    assert torch.allclose(trained.sae.W_dec.norm(dim=1), torch.ones(WIDTH), atol=1e-4)


def test_the_geometric_median_ignores_an_outlier_the_mean_does_not():
    points = torch.cat([torch.zeros(99, 4), torch.full((1, 4), 1000.0)])
    assert float(geometric_median(points).norm()) < 1.0 < float(points.mean(dim=0).norm())


# --------------------------------------------------------------------------- files and the hash


def test_saelens_files_have_the_expected_names_and_shapes(tmp_path):
    directory, digest = saved(tmp_path)
    assert sorted(p.name for p in directory.iterdir()) == [CFG_NAME, WEIGHTS_NAME]
    tensors = load_file(str(directory / WEIGHTS_NAME))
    assert {name: tuple(t.shape) for name, t in tensors.items()} == {
        "W_enc": (D_MODEL, WIDTH),
        "b_enc": (WIDTH,),
        "W_dec": (WIDTH, D_MODEL),
        "b_dec": (D_MODEL,),
    }
    assert all(t.dtype == torch.float32 for t in tensors.values())
    cfg = json.loads((directory / CFG_NAME).read_text())
    assert (cfg["d_in"], cfg["d_sae"], cfg["k"], cfg["architecture"]) == (D_MODEL, WIDTH, K, "topk")
    assert (cfg["hook_name"], cfg["hook_layer"], cfg["probebench"]["layer"]) == (
        "blocks.2.hook_resid_post",
        2,
        3,
    )
    assert cfg["probebench"]["weights_sha256"] == digest
    sae, _ = load_sae(directory)
    assert torch.equal(sae.W_dec, small_sae().W_dec)


def test_a_changed_byte_in_the_weights_is_refused(tmp_path):
    directory, digest = saved(tmp_path)
    weights = directory / WEIGHTS_NAME
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x01  # one bit of the last float
    weights.write_bytes(bytes(data))
    with pytest.raises(SaeHashMismatch, match="pins " + digest):
        load_sae(directory)
    with pytest.raises(SaeHashMismatch, match="registry"):
        load_sae(directory, expected_sha256=digest)


def test_a_directory_without_its_files_or_with_wrong_shapes_is_refused(tmp_path):
    with pytest.raises(SaeFilesError, match="cfg.json"):
        load_sae(tmp_path)
    sae = small_sae()
    sae.b_dec = torch.zeros(D_MODEL + 1)
    directory, _ = saved(tmp_path, sae)
    with pytest.raises(SaeFilesError, match="b_dec has shape"):
        load_sae(directory)


def test_a_registered_sae_is_checked_against_the_registry_hash(tmp_path):
    directory, digest = saved(tmp_path)
    project = yaml.safe_load((PROJECT_ROOT / "registry" / "saes.yaml").read_text())
    corpus = project["corpora"][0]
    entry = {
        "id": "test-sae",
        "model": "smollm2-135m-instruct",
        "layer": 3,
        "hook": "blocks.2.hook_resid_post",
        "architecture": "topk",
        "d_model": D_MODEL,
        "width": WIDTH,
        "k": K,
        "corpus": {key: corpus[key] for key in ("id", "package", "version", "sha256")},
        "tokens": 1000,
        "context": 64,
        "seed": 0,
        "license": "Apache-2.0",
        "path": "sae",
        "weights_sha256": digest,
    }
    (tmp_path / "registry").mkdir()
    registry_file = tmp_path / "registry" / "saes.yaml"
    registry_file.write_text(yaml.safe_dump({"corpora": [corpus], "saes": [entry]}))
    sae, _, spec = sae_from_registry("test-sae", root=tmp_path)
    assert (spec.layer, sae.width) == (3, WIDTH)
    registry_file.write_text(
        yaml.safe_dump({"corpora": [corpus], "saes": [entry | {"weights_sha256": "0" * 64}]})
    )
    with pytest.raises(SaeHashMismatch, match="registry/saes.yaml"):
        sae_from_registry("test-sae", root=tmp_path)
    registry_file.write_text(
        yaml.safe_dump({"corpora": [corpus], "saes": [entry | {"hook": "blocks.3.hook_resid_post"}]})
    )
    with pytest.raises(RegistryError, match="after block L"):
        load_saes(tmp_path)


# --------------------------------------------------------------------------- the trainer


def test_the_trainer_is_deterministic_for_a_seed():
    runs = [
        train_on_activations(synthetic_blocks(6000), d_model=D_MODEL, config=tiny_config(seed, tokens=6000))
        for seed in (0, 0, 1)
    ]
    for name in ("W_enc", "b_enc", "W_dec", "b_dec"):
        assert torch.equal(getattr(runs[0].sae, name), getattr(runs[1].sae, name))
    assert not torch.equal(runs[0].sae.W_dec, runs[2].sae.W_dec)
    assert runs[0].stats["curve"] == runs[1].stats["curve"]


def test_training_improves_fve_over_the_untrained_sae_and_the_statistics_are_in_range():
    blocks = synthetic_blocks(12_000)
    held_out = synthetic_blocks(3000, seed=0)[:2]  # same dictionary and offset: the same data
    trained = train_on_activations(blocks, d_model=D_MODEL, config=tiny_config())
    untrained = small_sae()
    untrained.b_dec = geometric_median(torch.cat(blocks[:1]))
    before, after = sae_statistics(untrained, held_out), sae_statistics(trained.sae, held_out)
    assert after["fve"] > before["fve"] + 0.15
    assert after["fve"] > 0.85
    for stats in (before, after):
        assert 0 <= stats["l0"] <= K
        assert stats["dead_latents"] + stats["alive_latents"] == WIDTH
        assert stats["tokens"] == 1000
    assert trained.stats["tokens"] == 12_000
    assert trained.stats["steps"] == 12_000 // 250
    assert trained.stats["peak_rss_mb"] > 0


def test_the_shuffle_buffer_hands_out_every_row_once():
    rows = torch.arange(1000, dtype=torch.float32)[:, None]
    blocks = [rows[i : i + 70] for i in range(0, 1000, 70)]
    out = list(
        shuffled_batches(blocks, capacity=200, batch_size=50, generator=torch.Generator().manual_seed(0))
    )
    got = torch.cat(out)[:, 0]
    assert sorted(got.tolist()) == list(range(1000))
    assert not torch.equal(got, rows[:, 0])  # mixed across blocks
    assert all(b.shape[0] == 50 for b in out[:-1])


# --------------------------------------------------------------------------- the registry and the corpus


def test_the_sae_registry_loads_and_pins_the_same_corpus_archive_as_the_builders():
    registry = load_registry(PROJECT_ROOT)
    saes = load_saes(PROJECT_ROOT, registry.models)
    corpus = saes.default_corpus
    source = load_sources(PROJECT_ROOT)[corpus.package]
    assert (source.version, source.filename, source.sha256) == (
        corpus.version,
        corpus.filename,
        corpus.sha256,
    )
    assert corpus.license
    for sae in saes.saes.values():  # every registered SAE's weights are checked before use
        sae_from_registry(sae.id, root=PROJECT_ROOT, saes=saes)


def test_the_held_out_documents_depend_on_the_text_only():
    corpus = load_saes(PROJECT_ROOT).default_corpus
    docs = [f"document number {i}" for i in range(400)] + ["document number 3"]
    split = corpus_split(corpus, docs)
    assert split.duplicates == 1
    assert len(split.train) + len(split.heldout) == 400
    assert 5 <= len(split.heldout) <= 40  # about one in twenty
    assert all(is_heldout(text, corpus.heldout_every) for text in split.heldout)
    again = corpus_split(corpus, list(reversed(docs)))
    assert set(again.heldout) == set(split.heldout)


def test_the_commands_are_registered():
    parser = build_parser()
    args = parser.parse_args(
        [
            "train-sae",
            "--model",
            "m",
            "--layer",
            "15",
            "--width",
            "4608",
            "--k",
            "32",
            "--tokens",
            "2000000",
            "--seed",
            "0",
            "--out",
            "d",
        ]
    )
    assert (args.layer, args.width, args.k, args.tokens, args.seed) == (15, 4608, 32, 2_000_000, 0)
    assert parser.parse_args(["sae-card", "--sae", "d"]).sae == "d"
