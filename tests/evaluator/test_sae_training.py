"""A tiny SAE trained on the real SmolLM2 and the real corpus (evaluator/core/sae/): the seeded
trainer gives the same weights twice, the card's numbers are in range and beat the untrained SAE's,
and the two commands write and re-measure an SAELens directory."""

from __future__ import annotations

import json

import pytest
import torch

from evaluator.commands.cli import main
from evaluator.core.sae.activations import token_activations
from evaluator.core.sae.card import CardConfig, sae_card, sae_statistics
from evaluator.core.sae.model import CARD_NAME, CFG_NAME, WEIGHTS_NAME, TopKSae, load_sae
from evaluator.core.sae.train import TrainConfig, train_sae
from evaluator.data.corpus import corpus_load
from evaluator.data.registry.saes import load_saes
from tests.evaluator.conftest import PROJECT_ROOT, SMOLLM

pytestmark = pytest.mark.model

LAYER, WIDTH, K, CONTEXT = 3, 128, 8, 64
CONFIG = TrainConfig(
    width=WIDTH,
    k=K,
    tokens=3000,
    seed=0,
    context=CONTEXT,
    batch_size=250,
    buffer_tokens=1000,
    init_tokens=500,
    lr=3e-3,
)


@pytest.fixture(scope="module")
def corpus(sources_dir):
    return corpus_load(
        load_saes(PROJECT_ROOT).default_corpus, root=PROJECT_ROOT, sources_dir=sources_dir, download=False
    )


@pytest.fixture(scope="module")
def trained(smollm, corpus):
    return train_sae(smollm, corpus.train, layer=LAYER, config=CONFIG)


def test_the_held_out_documents_are_never_trained_on(corpus):
    assert not set(corpus.train) & set(corpus.heldout)
    assert 0.03 < len(corpus.heldout) / (len(corpus.train) + len(corpus.heldout)) < 0.07


def test_the_trainer_gives_the_same_weights_for_a_seed(smollm, corpus, trained):
    again = train_sae(smollm, corpus.train, layer=LAYER, config=CONFIG)
    for name in ("W_enc", "b_enc", "W_dec", "b_dec"):
        assert torch.equal(getattr(trained.sae, name), getattr(again.sae, name))
    assert trained.stats["tokens"] == CONFIG.tokens
    assert trained.stats["harvest_tokens_per_s"] > 0


def test_the_card_is_in_range_and_beats_the_untrained_sae(smollm, corpus, trained):
    held_out = corpus.heldout[:30]
    card = sae_card(
        smollm,
        trained.sae,
        layer=LAYER,
        documents=held_out,
        context=CONTEXT,
        config=CardConfig(tokens=1500, loss_contexts=4, contexts_per_batch=8),
    )
    assert card["tokens"] == 1500
    assert 0 < card["l0"] <= K
    assert 0 < card["fve"] <= 1
    assert card["dead_latents"] + card["alive_latents"] == WIDTH
    loss = card["loss"]
    assert loss["clean"] < loss["reconstruction"] < loss["zero_ablation"]
    assert 0 < card["loss_recovered"] < 1
    untrained = TopKSae.initial(smollm.d_model, WIDTH, K, generator=torch.Generator().manual_seed(0))
    untrained.b_dec = trained.sae.b_dec  # the same centre: the training is what differs
    blocks = token_activations(smollm, held_out, layer=LAYER, context=CONTEXT, tokens=1500)
    assert card["fve"] > sae_statistics(untrained, blocks)["fve"] + 0.1


def test_train_sae_writes_the_saelens_directory_and_sae_card_recomputes_it(
    tmp_path, cache_dir, sources_dir, capsys
):
    out = tmp_path / "sae"
    common = ["--cache-dir", str(cache_dir), "--sources", str(sources_dir), "--card-tokens", "600"]
    common += ["--loss-contexts", "2", "--json"]
    argv = ["train-sae", "--model", SMOLLM, "--layer", "2", "--width", "64", "--k", "4", "--tokens", "1000"]
    argv += [
        "--seed",
        "1",
        "--out",
        str(out),
        "--context",
        "32",
        "--batch-size",
        "250",
        "--buffer-tokens",
        "500",
    ]
    assert main(argv + common) == 0
    result = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in out.iterdir()) == [CARD_NAME, CFG_NAME, WEIGHTS_NAME]
    entry = result["registry_entry"]
    assert (entry["layer"], entry["hook"], entry["width"], entry["k"]) == (
        2,
        "blocks.1.hook_resid_post",
        64,
        4,
    )
    assert entry["weights_sha256"] == result["weights_sha256"]
    assert result["training"]["peak_rss_mb"] > 0
    sae, cfg = load_sae(out)
    assert (sae.width, cfg["probebench"]["corpus"]["id"]) == (64, entry["corpus"]["id"])
    assert main(["sae-card", "--sae", str(out), *common]) == 0
    again = json.loads(capsys.readouterr().out)
    written = json.loads((out / CARD_NAME).read_text())
    for key in ("l0", "fve", "dead_latents", "loss_recovered"):
        assert again[key] == pytest.approx(written[key], rel=1e-6, abs=1e-9)
