"""Feature cards without a model (evaluator/core/sae/features.py): a tiny SAE whose latents read
known directions, a character-level tokenizer and a fake harvest. The counts and the top snippets
match a dense brute force, do not depend on how the harvest is cut into blocks, keep one snippet per
context and point back at the right place of the right document; the command prints them."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from evaluator.commands import sae_cli
from evaluator.commands.cli import build_parser, main
from evaluator.core.sae import activations
from evaluator.core.sae.features import (
    Context,
    cards_from_blocks,
    document_contexts,
    feature_cards,
    printable,
)
from evaluator.core.sae.model import TopKSae
from evaluator.errors import EvaluatorError

BOS = 1


class CharTokenizer:
    """One token per character (its code point); ``bos`` puts id 1 before every input."""

    def __init__(self, bos: bool):
        self.bos = bos

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        ids = [ord(c) for c in text]
        return {"input_ids": ([BOS] if self.bos and add_special_tokens else []) + ids}

    def decode(self, ids: list[int], clean_up_tokenization_spaces: bool = True) -> str:
        return "".join("" if i == BOS else chr(i) for i in ids)


def identity_sae(width: int = 4, k: int = 2) -> TopKSae:
    """Latent i reads coordinate i of the activation (the pre-activation is the activation)."""
    eye = torch.eye(width)
    return TopKSae(
        W_enc=eye.clone(), b_enc=torch.zeros(width), W_dec=eye.clone(), b_dec=torch.zeros(width), k=k
    )


#: what a character's activation is (for identity_sae): latent 0 reads "x", latent 1 "y" (and
#: weakly "x"), latent 2 the digits (by their value), latent 3 never fires
def char_vector(code: int) -> list[float]:
    c = chr(code) if code != BOS else ""
    return [
        3.0 if c == "x" else 0.0,
        2.0 if c == "y" else (0.5 if c == "x" else 0.0),
        float(c) if c.isdigit() else 0.0,
        -1.0,
    ]


def fake_lm(bos: bool) -> Any:
    return SimpleNamespace(tokenizer=CharTokenizer(bos), d_model=4, n_layers=2, id="fake", device="cpu")


@pytest.fixture
def fake_harvest(monkeypatch):
    """The real token_activations, with the forward pass replaced by char_vector per token."""

    def layer_hidden(lm, batch, layer):
        return torch.tensor([[char_vector(i) for i in ids] for ids in batch], dtype=torch.float32)

    monkeypatch.setattr(activations, "layer_hidden", layer_hidden)


DOCUMENTS = [
    "ab x cd 1 ef 9 gh y ij 2 kl",  # 27 characters
    "short",
    "the x is here, then xx and y, 5 and 7; line\nbreak x\tend 3.",
    "no marks at all in this one whatsoever",
]


# --------------------------------------------------------------------------- the cards


@pytest.mark.parametrize("bos", [False, True])
def test_the_top_snippets_point_back_at_their_document_and_position(fake_harvest, bos):
    lm = fake_lm(bos)
    cards = feature_cards(
        lm,
        identity_sae(),
        layer=1,
        documents=DOCUMENTS,
        context=8,
        latents=[2, 0, 3],
        tokens=10_000,
        top=3,
        window=(3, 2),
        contexts_per_batch=2,
    )
    assert [c["latent"] for c in cards] == [2, 0, 3]
    digits, xs, never = cards
    assert never == {"latent": 3, "frequency": 0.0, "mean_when_active": None, "max": 0.0, "top": []}
    assert [s["value"] for s in digits["top"]] == [9.0, 7.0, 5.0]
    assert digits["max"] == 9.0
    for card in (digits, xs):
        assert card["top"] and len(card["top"]) <= 3
        for s in card["top"]:
            text = DOCUMENTS[s["document"]]
            assert text[s["position"]] == s["token"]
            before, after = s["text_before"], s["text_after"]
            assert len(before) <= 3 and len(after) <= 2
            assert printable(text[s["position"] - len(before) : s["position"]]) == before
            assert printable(text[s["position"] + 1 : s["position"] + 1 + len(after)]) == after
    assert all(s["token"] == "x" and s["value"] == 3.0 for s in xs["top"])
    assert xs["mean_when_active"] == 3.0
    # one snippet per context: the contexts of a document are the body-sized pieces from its start
    body = 8 - (1 if bos else 0)
    places = [(s["document"], s["position"] // body) for s in xs["top"]]
    assert len(set(places)) == len(places)
    # equal values: the earlier token first
    assert [(s["document"], s["position"]) for s in xs["top"]] == sorted(
        (s["document"], s["position"]) for s in xs["top"]
    )


def test_frequency_counts_the_active_tokens_among_those_read(fake_harvest):
    lm = fake_lm(False)
    contexts = list(document_contexts(lm.tokenizer, DOCUMENTS, 8))
    read = [c.ids[1:] for c in contexts]  # SmolLM-like: no prefix, the first position is not read
    n = sum(len(r) for r in read)
    xs = sum(r.count(ord("x")) for r in read)
    ys = sum(r.count(ord("y")) for r in read)
    cards = feature_cards(
        lm, identity_sae(), layer=1, documents=DOCUMENTS, context=8, latents=[0, 1], tokens=10_000
    )
    assert cards[0]["frequency"] == pytest.approx(xs / n, rel=1e-3)
    # latent 1 fires on "y" (2.0) and, as the second of k = 2, on "x" (0.5)
    assert cards[1]["frequency"] == pytest.approx((xs + ys) / n, rel=1e-3)
    assert cards[1]["mean_when_active"] == pytest.approx((2.0 * ys + 0.5 * xs) / (xs + ys), rel=1e-3)


def test_the_harvest_stops_at_the_token_budget(fake_harvest):
    lm = fake_lm(True)
    meter = activations.HarvestMeter()
    cards = feature_cards(
        lm, identity_sae(), layer=1, documents=DOCUMENTS, context=8, latents=[2], tokens=10, meter=meter
    )
    assert meter.tokens == 10
    # the first 10 read positions: "ab x cd" (7 read of context 1) and " 1 " of context 2
    assert [s["value"] for s in cards[0]["top"]] == [1.0]
    assert cards[0]["frequency"] == 0.1


def test_control_characters_are_made_printable():
    assert printable("a\nb\tc\r\x00d\x1b[2Je\u202ef") == "a b cd[2Jef"
    assert printable("  kept  ") == "  kept  "


def random_blocks(seed: int, contexts: int, length: int, skip: int, d: int, per_block: int):
    g = torch.Generator().manual_seed(seed)
    ctxs = [
        Context(
            document=i // 3,
            start=(i % 3) * length,
            ids=tuple(range(100 + i * length, 100 + (i + 1) * length)),
        )
        for i in range(contexts)
    ]
    x = torch.randn(contexts * (length - skip), d, generator=g)
    x[x.abs() < 0.3] = 0
    reads = length - skip
    blocks = []
    for start in range(0, contexts, per_block):
        batch = ctxs[start : start + per_block]
        blocks.append((batch, x[start * reads : (start + len(batch)) * reads]))
    return ctxs, x, blocks


def brute_force(sae: TopKSae, x: torch.Tensor, reads: int, latent: int, top: int):
    z = sae.encode(x)[:, latent].numpy()
    best: dict[int, tuple[float, int]] = {}
    for position, value in enumerate(z.tolist()):
        if value > 0:
            c = position // reads
            if c not in best or value > best[c][0]:
                best[c] = (value, position)
    ranked = sorted(best.values(), key=lambda vp: (-vp[0], vp[1]))
    return int((z > 0).sum()), ranked[:top]


def test_the_cards_match_a_dense_brute_force_whatever_the_blocks():
    d, width, k, length, skip, top = 6, 12, 3, 10, 1, 4
    sae = TopKSae.initial(d, width, k, generator=torch.Generator().manual_seed(3))
    sae.b_enc = torch.linspace(-0.2, 0.2, width)
    results = []
    for per_block in (1, 3, 40):
        ctxs, x, blocks = random_blocks(7, 40, length, skip, d, per_block)
        results.append(
            cards_from_blocks(
                sae,
                blocks,
                skip=skip,
                prefix=0,
                decode=lambda ids: "".join(f"<{i}>" for i in ids),
                latents=None,
                top=top,
                window=(2, 1),
            )
        )
    assert results[0] == results[1] == results[2]
    cards = results[0]
    assert [c["latent"] for c in cards] == list(range(width))
    reads = length - skip
    for card in cards:
        active, ranked = brute_force(sae, x, reads, card["latent"], top)
        assert card["frequency"] == pytest.approx(active / x.shape[0], rel=1e-3)
        assert [s["value"] for s in card["top"]] == pytest.approx([v for v, _ in ranked], rel=1e-3)
        for s, (_, position) in zip(card["top"], ranked, strict=True):
            ctx = ctxs[position // reads]
            at = skip + position % reads
            assert (s["document"], s["position"]) == (ctx.document, ctx.start + at)
            assert s["token"] == f"<{ctx.ids[at]}>"
            assert s["text_before"] == "".join(f"<{i}>" for i in ctx.ids[max(0, at - 2) : at])
            assert s["text_after"] == "".join(f"<{i}>" for i in ctx.ids[at + 1 : at + 2])
        assert card["max"] == (card["top"][0]["value"] if card["top"] else 0.0)


def test_the_requested_latents_are_checked_and_an_empty_harvest_refused():
    sae = identity_sae()
    block = ([Context(0, 0, (5, 6, 7))], torch.ones(2, 4))
    common: dict[str, Any] = dict(skip=1, prefix=0, decode=lambda ids: "")
    with pytest.raises(EvaluatorError, match="out of range"):
        cards_from_blocks(sae, [block], latents=[4], **common)
    assert cards_from_blocks(sae, [block], latents=[], **common) == []
    with pytest.raises(EvaluatorError, match="no held-out tokens"):
        cards_from_blocks(sae, [], latents=[0], **common)
    short = ([Context(0, 0, (5, 6, 7))], torch.ones(1, 4))
    with pytest.raises(EvaluatorError, match="each but the last"):
        cards_from_blocks(sae, [short, block], latents=[0], **common)


def test_a_token_that_decodes_only_with_its_neighbours_falls_back_to_piece_by_piece():
    text = "café x"
    ids = tuple(text.encode("utf-8"))  # "é" is two tokens
    sae = identity_sae(width=2, k=1)
    x = torch.zeros(len(ids) - 1, 2)
    x[4 - 1, 0] = 1.0  # position 4, the second byte of "é" (position 0 is not read)

    def decode(pieces):
        return bytes(pieces).decode("utf-8", errors="replace")

    cards = cards_from_blocks(
        sae, [([Context(0, 0, ids)], x)], skip=1, prefix=0, decode=decode, latents=[0], window=(3, 2)
    )
    (s,) = cards[0]["top"]
    assert (s["text_before"], s["token"], s["text_after"], s["position"]) == ("af\ufffd", "\ufffd", " x", 4)


# --------------------------------------------------------------------------- the command


def test_sae_features_prints_the_cards(fake_harvest, monkeypatch, capsys):
    lm = fake_lm(True)
    split = SimpleNamespace(heldout=tuple(DOCUMENTS), corpus=SimpleNamespace(id="tiny-corpus"))
    cfg = {
        "model_name": "fake",
        "hook_name": "blocks.0.hook_resid_post",
        "context_size": 8,
        "probebench": {"layer": 1, "weights_sha256": "0" * 64},
    }
    monkeypatch.setattr(sae_cli, "_setup", lambda args: (None, None, None))
    monkeypatch.setattr(sae_cli, "_resolve_sae", lambda *a: (identity_sae(), cfg, "dir", split))
    monkeypatch.setattr(sae_cli, "_load", lambda *a: lm)
    assert main(["sae-features", "--sae", "some-sae", "--latents", "0,3", "--top", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [c["latent"] for c in result["latents"]] == [0, 3]
    assert result["measured_on"]["read_from_position"] == 1
    assert result["sae"]["source"] == "some-sae"
    text = sae_cli.sae_features_summary(result)
    assert "latent 0: active on" in text and "«x»" in text
    assert "latent 3: never active" in text
    assert main(["sae-features", "--sae", "s", "--latents", "0,9", "--json"]) == 2
    assert "out of range" in capsys.readouterr().err
    assert main(["sae-features", "--sae", "s", "--latents", "a,b"]) == 2


def test_the_command_is_registered():
    args = build_parser().parse_args(["sae-features", "--sae", "d", "--latents", "3,17,42"])
    assert (args.latents, args.tokens, args.top, args.window) == ("3,17,42", 32_768, 5, "12,4")
    assert sae_cli._int_list("3,17,42", "--latents") == [3, 17, 42]


# --------------------------------------------------------------------------- the real model


@pytest.mark.model
def test_sae_features_reads_smollm_on_the_held_out_corpus(tmp_path, cache_dir, sources_dir, capsys):
    """An untrained SAE on SmolLM2's layer 3, through the command: each snippet decodes from the
    place of the held-out document it names."""
    from evaluator.core.models import load_model
    from evaluator.core.sae.model import sae_cfg, save_sae
    from evaluator.data.corpus import corpus_load
    from evaluator.data.registry.load import load_registry
    from evaluator.data.registry.saes import load_saes
    from tests.evaluator.conftest import PROJECT_ROOT, SMOLLM

    registry = load_registry(PROJECT_ROOT)
    lm = load_model(SMOLLM, registry=registry, cache_dir=cache_dir, device="cpu")
    sae = TopKSae.initial(lm.d_model, 64, 4, generator=torch.Generator().manual_seed(0))
    cfg = sae_cfg(sae, model_id=SMOLLM, layer=3, context=64, prepend_bos=False, dataset="test", provenance={})
    save_sae(sae, cfg, tmp_path / "sae")
    argv = ["sae-features", "--sae", str(tmp_path / "sae"), "--latents", "0,1,2,3", "--tokens", "600"]
    argv += ["--top", "3", "--cache-dir", str(cache_dir), "--sources", str(sources_dir), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["measured_on"]["tokens"] == 600
    split = corpus_load(
        load_saes(PROJECT_ROOT).default_corpus, root=PROJECT_ROOT, sources_dir=sources_dir, download=False
    )
    snippets = [s for card in result["latents"] for s in card["top"]]
    assert snippets
    for s in snippets:
        ids = lm.tokenizer(split.heldout[s["document"]], add_special_tokens=False)["input_ids"]
        around = lm.tokenizer.decode(
            ids[max(0, s["position"] - 12) : s["position"] + 5], clean_up_tokenization_spaces=False
        )
        assert s["text_before"] + s["token"] + s["text_after"] in printable(around)
