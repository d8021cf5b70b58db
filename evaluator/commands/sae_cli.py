"""The ``train-sae``, ``sae-card`` and ``sae-features`` commands: a TopK SAE of one layer of a
decoder base model, trained on the generic-text corpus of ``registry/saes.yaml``, its card on
held-out text, and what some of its latents read.

    python -m evaluator train-sae --model MODEL --layer L --width W --k K --tokens N --seed S --out DIR
    python -m evaluator sae-card --sae DIR_OR_REGISTERED_ID [--write]
    python -m evaluator sae-features --sae DIR_OR_REGISTERED_ID --latents 3,17,42 [--tokens N] [--top M]

``train-sae`` writes DIR in the SAELens layout (``cfg.json``, ``sae_weights.safetensors``) with
``card.json`` beside them, prints a progress line on stderr (tokens, loss, FVE, dead latents,
harvest and training throughput, peak memory at the end) and, on stdout, the JSON result: the
training's numbers, the card and the entry to add to ``registry/saes.yaml`` once the SAE is kept.
``sae-card`` recomputes the card of a directory (its weights checked against the hash its
``cfg.json`` records) or of a registered SAE (against ``registry/saes.yaml``). ``sae-features``
prints each latent's feature card (:mod:`evaluator.core.sae.features`): its frequency and the
held-out snippets that activate it most, read from the locally downloaded corpus and written
nowhere (the corpus's text is not ours to redistribute).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from evaluator.commands.base import cache_registry_json_args, default_cache_dir
from evaluator.core.models import LoadedModel, load_model
from evaluator.core.sae.activations import HarvestMeter, first_read_position, special_prefix
from evaluator.core.sae.card import CardConfig, sae_card
from evaluator.core.sae.features import feature_cards
from evaluator.core.sae.model import (
    CARD_NAME,
    STORAGE_DTYPES,
    TopKSae,
    load_sae,
    sae_cfg,
    sae_from_registry,
    save_sae,
)
from evaluator.core.sae.train import TrainConfig, TrainProgress, peak_rss_mb, train_sae
from evaluator.data.builders.sources import DEFAULT_SOURCES_DIR
from evaluator.data.corpus import CorpusSplit, corpus_load
from evaluator.data.registry.files import default_root
from evaluator.data.registry.load import Registry, load_registry
from evaluator.data.registry.saes import SaeRegistry, hook_name, load_saes
from evaluator.errors import EvaluatorError

# Passive OpenMP waiting on a small shared machine (see evaluator/commands/train_cli.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class SaeProgress:
    """The trainer's progress on stderr: one line rewritten in place on a terminal, else a line
    every ``every_s`` seconds and at the end."""

    def __init__(self, stream: Any = None, every_s: float | None = None):
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.every_s = every_s if every_s is not None else (0.5 if self.tty else 15.0)
        self.last = -1e9

    def __call__(self, p: TrainProgress) -> None:
        now = time.monotonic()
        if p.step < p.steps and now - self.last < self.every_s:
            return
        self.last = now
        left = max(0, p.tokens_total - p.tokens) / p.train_tokens_per_s if p.train_tokens_per_s else 0.0
        if p.harvest_tokens_per_s:
            left += max(0, p.tokens_total - p.harvested) / p.harvest_tokens_per_s
        line = (
            f"train-sae  harvested {p.harvested:,}, trained {p.tokens:,} of {p.tokens_total:,} tokens"
            f"  step {p.step}/{p.steps}"
            f"  mse {p.mse:.4g}  FVE {p.fve:.3f}  dead {p.dead}  harvest {p.harvest_tokens_per_s:,.0f} tok/s"
            f"  train {p.train_tokens_per_s:,.0f} tok/s  elapsed {p.elapsed_s:,.0f} s  left ~{left:,.0f} s"
        )
        end = "\n" if not self.tty or p.step >= p.steps else ""
        self.stream.write(("\r\x1b[2K" if self.tty else "") + line + end)
        self.stream.flush()


def _common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sources", type=Path, default=None, help="downloaded archives (default var/sources)")
    p.add_argument(
        "--card-tokens", type=int, default=CardConfig.tokens, help="held-out tokens for L0/FVE/dead"
    )
    p.add_argument(
        "--loss-contexts",
        type=int,
        default=CardConfig.loss_contexts,
        help="held-out contexts for the loss recovered (three full passes each)",
    )
    p.add_argument("--device", default="cpu", help="cpu | cuda (default cpu)")
    cache_registry_json_args(p)


def train_sae_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a decoder base model of registry/models.yaml")
    p.add_argument("--layer", required=True, type=int, help="the residual stream after block L (1..n_layers)")
    p.add_argument("--width", required=True, type=int, help="latents")
    p.add_argument("--k", required=True, type=int, help="active latents per token")
    p.add_argument("--tokens", required=True, type=int, help="training tokens")
    p.add_argument("--seed", required=True, type=int)
    p.add_argument("--out", required=True, type=Path, help="the SAE directory to write")
    p.add_argument("--corpus", default=None, help="corpus id of registry/saes.yaml (default: the first)")
    p.add_argument("--context", type=int, default=TrainConfig.context, help="tokens per context")
    p.add_argument("--batch-size", type=int, default=TrainConfig.batch_size, help="tokens per Adam step")
    p.add_argument("--lr", type=float, default=None, help="Adam's learning rate (default: by width)")
    p.add_argument(
        "--buffer-tokens", type=int, default=TrainConfig.buffer_tokens, help="rows of the shuffle buffer"
    )
    p.add_argument(
        "--dtype",
        choices=sorted(STORAGE_DTYPES),
        default="float32",
        help="how the weights are stored (float16 halves the file; the card is measured on them)",
    )
    p.add_argument("--no-card", action="store_true", help="skip the card (held-out measurement)")
    _common_args(p)


def sae_card_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sae", required=True, help="an SAE directory, or the id of a registered SAE")
    p.add_argument("--write", action="store_true", help="write the card to the directory's card.json")
    _common_args(p)


def _int_list(text: str, name: str, *, count: int | None = None) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise EvaluatorError(f"{name} {text}: expected comma-separated integers") from None
    if not values or (count is not None and len(values) != count):
        raise EvaluatorError(f"{name} {text}: expected {count or 'some'} comma-separated integers")
    return values


def sae_features_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sae", required=True, help="an SAE directory, or the id of a registered SAE")
    p.add_argument("--latents", required=True, help="comma-separated latent indices, e.g. 3,17,42")
    p.add_argument(
        "--tokens", type=int, default=CardConfig.tokens, help="held-out tokens to read (as for the card)"
    )
    p.add_argument("--top", type=int, default=5, help="snippets per latent (one per context)")
    p.add_argument(
        "--window", default="12,4", help="tokens shown before and after the activating one (default 12,4)"
    )
    p.add_argument("--sources", type=Path, default=None, help="downloaded archives (default var/sources)")
    p.add_argument("--device", default="cpu", help="cpu | cuda (default cpu)")
    cache_registry_json_args(p)


def _setup(args: argparse.Namespace) -> tuple[Path, Registry, SaeRegistry]:
    root = (args.registry or default_root()).resolve()
    registry = load_registry(root)
    return root, registry, load_saes(root, registry.models)


def _decoder(registry: Registry, model_id: str, layer: int) -> None:
    spec = registry.model(model_id)
    if spec.encoder:
        raise EvaluatorError(f"{model_id} is an encoder: an SAE here reads a decoder's residual stream")
    if not 1 <= layer <= spec.n_layers:
        raise EvaluatorError(f"layer {layer} out of range for {model_id}: 1..{spec.n_layers}")


def _load(args: argparse.Namespace, registry: Registry, model_id: str) -> LoadedModel:
    return load_model(
        model_id, registry=registry, cache_dir=args.cache_dir or default_cache_dir(), device=args.device
    )


def card_document(
    lm: LoadedModel,
    sae: TopKSae,
    cfg: dict[str, Any],
    split: CorpusSplit,
    config: CardConfig,
) -> dict[str, Any]:
    """``card.json``: what the SAE is, its corpus and held-out split, and the measured numbers."""
    ours = cfg.get("probebench") or {}
    layer = int(ours["layer"])
    card = sae_card(
        lm, sae, layer=layer, documents=split.heldout, context=int(cfg["context_size"]), config=config
    )
    return {
        "sae": {
            "model": cfg["model_name"],
            "layer": layer,
            "hook": cfg["hook_name"],
            "architecture": cfg["architecture"],
            "width": sae.width,
            "k": sae.k,
            "weights_sha256": ours.get("weights_sha256"),
            "seed": (ours.get("training") or {}).get("seed"),
            "training_tokens": (ours.get("stats") or {}).get("tokens"),
        },
        "corpus": split.describe(),
        **card,
    }


def run_train_sae(args: argparse.Namespace) -> dict[str, Any]:
    """Train, write the SAELens directory, measure the card on held-out text."""
    root, registry, saes = _setup(args)
    _decoder(registry, args.model, args.layer)
    corpus = saes.corpus(args.corpus) if args.corpus else saes.default_corpus
    config = TrainConfig(
        width=args.width,
        k=args.k,
        tokens=args.tokens,
        seed=args.seed,
        context=args.context,
        batch_size=args.batch_size,
        lr=args.lr,
        buffer_tokens=args.buffer_tokens,
    )
    config.check()
    split = corpus_load(corpus, root=root, sources_dir=args.sources or root / DEFAULT_SOURCES_DIR)
    lm = _load(args, registry, args.model)
    trained = train_sae(lm, split.train, layer=args.layer, config=config, progress=SaeProgress())
    sae = trained.sae.rounded(args.dtype)
    stats = {key: value for key, value in trained.stats.items() if key != "curve"}
    provenance = {
        "corpus": split.describe(),
        "training": trained.config.to_dict(),
        "scale_folded": trained.scale,
        "stats": stats,
        "curve": trained.stats["curve"],
        "model": lm.describe(),
    }
    cfg = sae_cfg(
        sae,
        model_id=lm.id,
        layer=args.layer,
        context=config.context,
        prepend_bos=bool(special_prefix(lm.tokenizer)),
        dataset=f"{corpus.package}=={corpus.version}:{corpus.member}",
        provenance=provenance,
        dtype=args.dtype,
    )
    digest = save_sae(sae, cfg, args.out)
    cfg["probebench"]["weights_sha256"] = digest
    sys.stderr.write(f"train-sae: wrote {args.out}; peak memory {peak_rss_mb():,.0f} MiB\n")
    card = None
    if not args.no_card:
        card = card_document(lm, sae, cfg, split, CardConfig(args.card_tokens, args.loss_contexts))
        (args.out / CARD_NAME).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    sae_id = f"{lm.id}-l{args.layer}-topk-w{args.width}-k{args.k}-s{args.seed}"
    entry = {
        "id": sae_id,
        "model": lm.id,
        "layer": args.layer,
        "hook": hook_name(args.layer),
        "architecture": "topk",
        "d_model": lm.d_model,
        "width": args.width,
        "k": args.k,
        "corpus": corpus.pin(),
        "tokens": stats["tokens"],
        "context": config.context,
        "seed": args.seed,
        "license": registry.model(lm.id).license,
        "path": f"registry/saes/{sae_id}",
        "weights_sha256": digest,
    }
    return {
        "out": str(args.out),
        "weights_sha256": digest,
        "training": stats | {"peak_rss_mb": round(peak_rss_mb(), 1)},
        "card": card,
        "registry_entry": entry,
    }


def _resolve_sae(
    args: argparse.Namespace, root: Path, registry: Registry, saes: SaeRegistry
) -> tuple[TopKSae, dict[str, Any], Path, CorpusSplit]:
    """``--sae``: a directory (its weights checked against its ``cfg.json``) or a registered SAE
    (against ``registry/saes.yaml``); its cfg, directory and the corpus it was trained on, split."""
    directory = Path(args.sae)
    if directory.is_dir():
        sae, cfg = load_sae(directory)
    elif args.sae in saes.saes:
        sae, cfg, spec = sae_from_registry(args.sae, root=root, saes=saes)
        directory = spec.directory(root)
    else:
        raise EvaluatorError(
            f"--sae {args.sae}: neither a directory nor a registered SAE;"
            f" registered: {', '.join(sorted(saes.saes)) or 'none'}"
        )
    ours = cfg.get("probebench") or {}
    model_id, layer = cfg.get("model_name"), ours.get("layer")
    if not isinstance(model_id, str) or not isinstance(layer, int):
        raise EvaluatorError(f"{directory}: cfg.json names no model_name and probebench.layer")
    _decoder(registry, model_id, layer)
    corpus_id = (ours.get("corpus") or {}).get("id")
    corpus = saes.corpus(corpus_id) if corpus_id else saes.default_corpus
    split = corpus_load(corpus, root=root, sources_dir=args.sources or root / DEFAULT_SOURCES_DIR)
    return sae, cfg, directory, split


def run_sae_card(args: argparse.Namespace) -> dict[str, Any]:
    """Recompute the card of an SAE directory or a registered SAE."""
    root, registry, saes = _setup(args)
    sae, cfg, directory, split = _resolve_sae(args, root, registry, saes)
    lm = _load(args, registry, cfg["model_name"])
    card = card_document(lm, sae, cfg, split, CardConfig(args.card_tokens, args.loss_contexts))
    if args.write:
        (directory / CARD_NAME).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    return card


def run_sae_features(args: argparse.Namespace) -> dict[str, Any]:
    """The feature cards of some latents of an SAE directory or a registered SAE, on the held-out
    documents of its corpus. The snippets are printed, never written to a file."""
    latents = _int_list(args.latents, "--latents")
    before, after = _int_list(args.window, "--window", count=2)
    if args.tokens < 1 or args.top < 0 or before < 0 or after < 0:
        raise EvaluatorError("--tokens must be positive; --top and --window must not be negative")
    root, registry, saes = _setup(args)
    sae, cfg, directory, split = _resolve_sae(args, root, registry, saes)
    outside = sorted({i for i in latents if not 0 <= i < sae.width})
    if outside:
        raise EvaluatorError(f"--latents {outside} out of range: the SAE has latents 0..{sae.width - 1}")
    lm = _load(args, registry, cfg["model_name"])
    layer, context = int(cfg["probebench"]["layer"]), int(cfg["context_size"])
    meter = HarvestMeter()
    cards = feature_cards(
        lm,
        sae,
        layer=layer,
        documents=split.heldout,
        context=context,
        latents=latents,
        tokens=args.tokens,
        top=args.top,
        window=(before, after),
        meter=meter,
    )
    return {
        "sae": {
            "source": args.sae if not Path(args.sae).is_dir() else str(directory),
            "model": cfg["model_name"],
            "layer": layer,
            "hook": cfg["hook_name"],
            "width": sae.width,
            "k": sae.k,
            "weights_sha256": (cfg.get("probebench") or {}).get("weights_sha256"),
        },
        "corpus": {"id": split.corpus.id, "heldout_documents": len(split.heldout)},
        "measured_on": {
            "tokens": meter.tokens,
            "contexts": meter.contexts,
            "context": context,
            "read_from_position": first_read_position(special_prefix(lm.tokenizer)),
            "top": args.top,
            "window": [before, after],
        },
        "latents": cards,
    }


def sae_features_summary(result: object) -> str:
    if not isinstance(result, dict):
        return f"{result}\n"
    sae, on = result["sae"], result["measured_on"]
    lines = [
        f"{sae['model']} layer {sae['layer']}: TopK SAE, width {sae['width']}, k {sae['k']};"
        f" {on['tokens']:,} held-out tokens of {result['corpus']['id']}",
    ]
    for card in result["latents"]:
        lines.append("")
        if card["mean_when_active"] is None:
            lines.append(f"latent {card['latent']}: never active on these tokens")
            continue
        lines.append(
            f"latent {card['latent']}: active on {card['frequency']:.3%} of the tokens,"
            f" mean {card['mean_when_active']:.4g} when active, max {card['max']:.4g}"
        )
        for s in card["top"]:
            lines.append(
                f"  {s['value']:>9.4g}  …{s['text_before']}«{s['token']}»{s['text_after']}…"
                f"  (document {s['document']}, token {s['position']})"
            )
    return "\n".join(lines) + "\n"


def sae_card_summary(result: object) -> str:
    if not isinstance(result, dict):
        return f"{result}\n"
    sae, loss = result["sae"], result["loss"]
    recovered = "n/a" if loss["loss_recovered"] is None else f"{loss['loss_recovered']:.3f}"
    return (
        f"{sae['model']} layer {sae['layer']}: TopK SAE, width {sae['width']}, k {sae['k']}\n"
        f"held-out tokens {result['tokens']:,}: L0 {result['l0']:.2f}, FVE {result['fve']:.3f},"
        f" dead {result['dead_latents']} (alive {result['alive_latents']})\n"
        f"loss (nats, {loss['predictions']:,} predictions): clean {loss['clean']:.3f},"
        f" reconstruction {loss['reconstruction']:.3f}, zero ablation {loss['zero_ablation']:.3f};"
        f" loss recovered {recovered}\n"
    )


def train_sae_summary(result: object) -> str:
    if not isinstance(result, dict):
        return f"{result}\n"
    t = result["training"]
    head = (
        f"wrote {result['out']} (weights {result['weights_sha256'][:12]}…): {t['tokens']:,} tokens,"
        f" harvest {t.get('harvest_tokens_per_s')} tok/s, train {t.get('train_tokens_per_s')} tok/s,"
        f" peak memory {t['peak_rss_mb']:,.0f} MiB\n"
    )
    return head + (sae_card_summary(result["card"]) if result.get("card") else "")
