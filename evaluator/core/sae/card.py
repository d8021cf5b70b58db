"""An SAE's card: how well it reads its layer, measured on held-out corpus text only.

- **L0**: the mean number of active (non-zero) latents per token (at most k).
- **FVE**, the fraction of variance explained: 1 − Σ‖x − x̂‖² / Σ‖x − x̄‖², x̄ the mean activation
  of the held-out tokens.
- **Dead latents**: latents never active on the held-out tokens; ``alive`` is the rest.
- **Loss recovered**: the language model's next-token loss with the SAE's reconstruction in place
  of the residual stream at its layer, between the loss with that stream zeroed (0) and the clean
  loss (1): (L_zero − L_reconstruction) / (L_zero − L_clean). It takes three full passes (every
  block, the final norm and the LM head) over ``loss_contexts`` held-out contexts; the positions the
  SAE does not read (the first of each context, the tokenizer's prefix) keep their clean activations
  in all three, and the loss counts the predictions made from the positions it does read.

Tokens and contexts are cut as for training (:mod:`evaluator.core.sae.activations`), from the
held-out documents in file order, so a card is the same every time it is measured on one machine.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from evaluator.core import hooks
from evaluator.core.models import output_embedding
from evaluator.core.sae.activations import (
    HarvestMeter,
    batched,
    contexts,
    first_read_position,
    special_prefix,
    token_activations,
)
from evaluator.core.sae.model import TopKSae
from evaluator.errors import EvaluatorError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel


@dataclass(frozen=True)
class CardConfig:
    """How much held-out text a card reads."""

    tokens: int = 32_768  # tokens for L0, FVE and the dead latents
    loss_contexts: int = 32  # contexts for the loss recovered (three full passes each)
    contexts_per_batch: int = 16

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def sae_statistics(sae: TopKSae, blocks: Iterable[Any]) -> dict[str, Any]:
    """L0, FVE, the mean squared error per token and the dead latents of ``sae`` on activation
    blocks "n d_model" (raw, float32). Needs no model: a test feeds it synthetic activations."""
    import torch

    n = 0
    total = torch.zeros(sae.d_model, dtype=torch.float64)
    square = err = active = 0.0
    fired = torch.zeros(sae.width, dtype=torch.long)
    with torch.no_grad():
        for block in blocks:
            x = block.to(torch.float32)
            values, indices = sae.encode_topk(x)
            error = x - sae.decode_topk(values, indices)
            on = values > 0
            fired += torch.bincount(indices[on], minlength=sae.width)
            n += int(x.shape[0])
            total += x.double().sum(dim=0)
            square += float(x.double().pow(2).sum())
            err += float(error.double().pow(2).sum())
            active += float(on.sum())
    if n == 0:
        raise EvaluatorError("no held-out tokens to measure the SAE on")
    variance = square - float(total.pow(2).sum()) / n
    dead = int((fired == 0).sum())
    return {
        "tokens": n,
        "l0": active / n,
        "fve": 1.0 - err / variance if variance > 0 else None,
        "mse": err / n,
        "dead_latents": dead,
        "alive_latents": sae.width - dead,
        "dead_fraction": dead / sae.width,
    }


def _replace_read_positions(sae: TopKSae | None, skip: int):
    """An edit of the stream "b t d": from position ``skip`` on, the SAE's reconstruction, or zeros
    when ``sae`` is None; the earlier positions are left as they are."""

    def edit(hidden: Any) -> Any:
        out = hidden.clone()
        if sae is None:
            out[:, skip:] = 0
            return out
        b, t, d = hidden.shape
        x = hidden[:, skip:].float().reshape(-1, d)
        out[:, skip:] = sae.reconstruct(x).reshape(b, t - skip, d).to(hidden.dtype)
        return out

    return edit


def lm_losses(
    lm: LoadedModel, sae: TopKSae, batches: Iterable[list[list[int]]], *, layer: int, skip: int
) -> dict[str, Any]:
    """The mean next-token loss (nats) of the full model on equal-length contexts: clean, with the
    SAE's reconstruction at ``layer`` and with that stream zeroed; and the loss recovered."""
    import torch

    weight = output_embedding(lm).float()
    sums = {"clean": 0.0, "reconstruction": 0.0, "zero_ablation": 0.0}
    edits = {
        "clean": None,
        "reconstruction": _replace_read_positions(sae, skip),
        "zero_ablation": _replace_read_positions(None, skip),
    }
    count = 0
    for batch in batches:
        ids = torch.tensor(batch, dtype=torch.long, device=lm.device)
        targets = ids[:, skip + 1 :]
        count += int(targets.numel())
        for name, edit in edits.items():
            with lm.lock, torch.inference_mode(), hooks.edit(lm, layer, edit):
                hidden = lm.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
                hidden = hidden.last_hidden_state
                for row in range(ids.shape[0]):  # one row's logits at a time: Gemma's vocabulary is 262k
                    logits = hidden[row, skip:-1].float() @ weight.T
                    nll = -torch.log_softmax(logits, dim=-1).gather(1, targets[row].unsqueeze(1))
                    sums[name] += float(nll.sum())
    if count == 0:
        raise EvaluatorError("no held-out context to measure the loss on")
    losses = {name: value / count for name, value in sums.items()}
    gap = losses["zero_ablation"] - losses["clean"]
    recovered = (losses["zero_ablation"] - losses["reconstruction"]) / gap if gap > 0 else None
    return {**losses, "loss_recovered": recovered, "predictions": count}


def sae_card(
    lm: LoadedModel,
    sae: TopKSae,
    *,
    layer: int,
    documents: Iterable[str],
    context: int,
    config: CardConfig | None = None,
) -> dict[str, Any]:
    """The card's numbers for ``sae`` at ``layer`` of ``lm``, on held-out ``documents`` (a
    sequence: read twice, for the statistics and for the loss)."""
    config = config or CardConfig()
    if sae.d_model != lm.d_model:
        raise EvaluatorError(f"the SAE reads d_model {sae.d_model}; {lm.id} has {lm.d_model}")
    if not 1 <= layer <= lm.n_layers:
        raise EvaluatorError(f"layer {layer} out of range for {lm.id}: 1..{lm.n_layers}")
    documents = list(documents)
    start = time.perf_counter()
    meter = HarvestMeter()
    blocks = token_activations(
        lm,
        documents,
        layer=layer,
        context=context,
        tokens=config.tokens,
        contexts_per_batch=config.contexts_per_batch,
        meter=meter,
    )
    stats = sae_statistics(sae, blocks)
    statistics_s = time.perf_counter() - start
    skip = first_read_position(special_prefix(lm.tokenizer))
    loss_contexts: list[list[int]] = []
    for ids in contexts(lm.tokenizer, documents, context):
        if len(loss_contexts) == config.loss_contexts:
            break
        loss_contexts.append(ids)
    start = time.perf_counter()
    losses = lm_losses(lm, sae, batched(loss_contexts, config.contexts_per_batch), layer=layer, skip=skip)
    return {
        **stats,
        "loss": losses,
        "loss_recovered": losses["loss_recovered"],
        "measured_on": {
            **config.to_dict(),
            "context": context,
            "read_from_position": skip,
            "heldout_documents": len(documents),
            "statistics_seconds": round(statistics_s, 2),
            "loss_seconds": round(time.perf_counter() - start, 2),
        },
        "environment": lm.environment(),
    }
