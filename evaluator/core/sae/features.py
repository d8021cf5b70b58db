"""Feature cards: what an SAE latent reads, shown by the held-out text that activates it most.

For each latent asked for, on the first ``tokens`` read positions of the held-out corpus documents
(cut and harvested exactly as for the SAE's card, :mod:`evaluator.core.sae.card`: documents in file
order, ``context``-token contexts, the first position and the tokenizer's prefix not read):

- **frequency**: the fraction of those tokens on which the latent is active (among the k selected
  latents, with a value above 0);
- **mean_when_active** (None when it never fires) and **max**: its value on those tokens;
- **top**: the ``top`` highest-activating tokens, at most one per context, each with the decoded
  tokens around it (``window[0]`` before, ``window[1]`` after, never past its context: the model
  saw nothing else), the index of its document among the held-out documents and its position in
  that document's tokens.

What a card does not show: the top activations say what a latent responds to most strongly, not
everything it encodes; its weaker activations, the contexts it is silent on and what its decoder
direction does downstream are not on the card. The snippets come from the held-out corpus documents
only, never from a task's splits. The corpus is news text whose copyright stays with its publishers
(``registry/saes.yaml``): a card is computed from the locally downloaded corpus for display and is
never written into the repository.

Memory stays bounded: no dense [tokens, width] matrix is built. Each block's top-k selections are
filtered to the latents asked for, counted, and merged into at most ``top`` candidates per latent
(the best token of each context); only the contexts those candidates name are kept.
"""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.core.sae.activations import (
    HarvestMeter,
    contexts,
    first_read_position,
    special_prefix,
    token_activations,
)
from evaluator.core.sae.model import TopKSae
from evaluator.errors import EvaluatorError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel

#: bidirectional embeddings, overrides and isolates: invisible, and they reorder the text around them
_BIDI_CONTROLS = frozenset(chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))


@dataclass(frozen=True)
class Context:
    """One harvested context: its token ids (the tokenizer's prefix first), the index of its
    document among the held-out documents and the offset in that document's tokens (tokenized
    without special tokens) of its first token after the prefix."""

    document: int
    start: int
    ids: tuple[int, ...]


def document_contexts(tokenizer: Any, documents: Iterable[str], context: int) -> Iterator[Context]:
    """The contexts :func:`evaluator.core.sae.activations.contexts` cuts from ``documents``, in the
    same order, each with its document and offset."""
    body = context - len(special_prefix(tokenizer))
    for number, text in enumerate(documents):
        for piece, ids in enumerate(contexts(tokenizer, [text], context)):
            yield Context(document=number, start=piece * body, ids=tuple(ids))


def _batches(items: Iterable[Context], size: int) -> Iterator[list[Context]]:
    """``items`` in lists of ``size`` (the last shorter), as ``activations.batched`` cuts contexts."""
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def printable(text: str) -> str:
    """``text`` safe to print on one line of a page: newlines and tabs become spaces, other control
    characters (and the bidirectional controls) are dropped; nothing is stripped."""
    out = []
    for char in text:
        if char in "\n\t":
            out.append(" ")
        elif unicodedata.category(char) == "Cc" or char in _BIDI_CONTROLS:
            continue
        else:
            out.append(char)
    return "".join(out)


def _round(value: float) -> float:
    """Four significant digits."""
    return float(f"{value:.4g}")


def _snippet(
    decode: Callable[[list[int]], str], ids: Sequence[int], lo: int, at: int, hi: int
) -> dict[str, str]:
    """The text of ``ids[lo:at]``, ``ids[at]`` and ``ids[at+1:hi]``. Decoded as growing prefixes of
    one span where the tokenizer allows it (a piece decoded alone can lose its leading space or half
    of a character), else piece by piece."""
    before = decode(list(ids[lo:at]))
    upto = decode(list(ids[lo : at + 1]))
    whole = decode(list(ids[lo:hi]))
    if upto.startswith(before) and whole.startswith(upto):
        token, after = upto[len(before) :], whole[len(upto) :]
    else:  # a tokenizer whose decoding of a span does not extend its prefixes'
        token, after = decode([ids[at]]), decode(list(ids[at + 1 : hi]))
    return {"text_before": printable(before), "token": printable(token), "text_after": printable(after)}


def _prune(
    latent: np.ndarray, value: np.ndarray, position: np.ndarray, reads: int, keep: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per latent, the ``keep`` highest entries from distinct contexts (the best entry of each
    context; a context is ``reads`` consecutive positions), sorted by latent, then value
    descending, then position. Ties go to the earlier position, so the result does not depend on
    how the entries were split into blocks."""
    order = np.lexsort((position, -value, latent))
    latent, value, position = latent[order], value[order], position[order]
    # the first entry of each (latent, context) in this order is that context's best
    context = position // reads
    key = latent * (int(context.max(initial=0)) + 1) + context
    _, first = np.unique(key, return_index=True)
    first.sort()
    latent, value, position = latent[first], value[first], position[first]
    rank = np.arange(latent.size) - np.searchsorted(latent, latent, side="left")
    chosen = rank < keep
    return latent[chosen], value[chosen], position[chosen]


def cards_from_blocks(
    sae: TopKSae,
    blocks: Iterable[tuple[Sequence[Context], Any]],
    *,
    skip: int,
    prefix: int,
    decode: Callable[[list[int]], str],
    latents: Sequence[int] | None,
    top: int = 5,
    window: tuple[int, int] = (12, 4),
) -> list[dict[str, Any]]:
    """The feature cards of ``latents`` (all of them when None) from harvested blocks.

    Each block is a batch of contexts of one length and the activations "n d_model" of their read
    positions (``skip`` on), context after context; every block but the last holds all of its
    contexts' read positions. ``prefix`` is the length of the tokenizer's prefix (never shown),
    ``decode`` turns token ids into text. Needs no model: a test feeds it synthetic activations.
    """
    import torch

    if top < 0 or len(window) != 2 or min(window) < 0:
        raise EvaluatorError(f"top ({top}) and the window {window} (before, after) must not be negative")
    if not 0 <= prefix <= skip:
        raise EvaluatorError(f"the prefix ({prefix} tokens) must lie before the first read position ({skip})")
    asked = list(range(sae.width)) if latents is None else [int(i) for i in latents]
    outside = sorted({i for i in asked if not 0 <= i < sae.width})
    if outside:
        raise EvaluatorError(f"latents {outside} out of range: the SAE has latents 0..{sae.width - 1}")
    if not asked:
        return []
    wanted = np.zeros(sae.width, dtype=bool)
    wanted[asked] = True
    keep = max(top, 1)  # the first candidate of each latent is its maximum

    count = np.zeros(sae.width, dtype=np.int64)
    total = np.zeros(sae.width, dtype=np.float64)
    cand = (np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.int64))
    kept: dict[int, Context] = {}  # the contexts the candidates name, by their index in the harvest
    length: int | None = None
    tokens = n_contexts = 0
    short = False
    for batch, block in blocks:
        rows = int(block.shape[0])
        if not batch:
            continue
        length = len(batch[0].ids) if length is None else length
        reads = length - skip
        if reads < 1 or any(len(c.ids) != length for c in batch):
            raise EvaluatorError(f"the contexts must all have one length ({length}), longer than {skip}")
        if short or rows > len(batch) * reads:
            raise EvaluatorError(
                f"a block of {len(batch)} contexts has {rows} rows: each but the last holds {len(batch) * reads}"
            )
        short = rows < len(batch) * reads
        with torch.inference_mode():
            values, indices = sae.encode_topk(block.to(torch.float32))
        values_np, indices_np = values.cpu().numpy(), indices.cpu().numpy()
        on = (values_np > 0) & wanted[indices_np]
        row, _ = np.nonzero(on)
        latent = indices_np[on].astype(np.int64)
        value = values_np[on].astype(np.float32)
        count += np.bincount(latent, minlength=sae.width)
        total += np.bincount(latent, weights=value, minlength=sae.width)
        cand = _prune(
            np.concatenate([cand[0], latent]),
            np.concatenate([cand[1], value]),
            np.concatenate([cand[2], tokens + row.astype(np.int64)]),
            reads,
            keep,
        )
        needed = set((cand[2] // reads).tolist())
        kept = {c: ctx for c, ctx in kept.items() if c in needed}
        kept.update({n_contexts + i: ctx for i, ctx in enumerate(batch) if n_contexts + i in needed})
        tokens += rows
        n_contexts += len(batch)
    if tokens == 0 or length is None:
        raise EvaluatorError("no held-out tokens to read the latents on")

    reads = length - skip
    found: dict[int, list[dict[str, Any]]] = {}
    for latent_i, value_f, position_i in zip(*(a.tolist() for a in cand), strict=True):
        ctx = kept[position_i // reads]
        at = skip + position_i % reads
        lo, hi = max(prefix, at - window[0]), min(length, at + 1 + window[1])
        found.setdefault(latent_i, []).append(
            {
                "value": _round(value_f),
                **_snippet(decode, ctx.ids, lo, at, hi),
                "document": ctx.document,
                "position": ctx.start + at - prefix,
            }
        )
    cards = []
    for i in asked:
        active = int(count[i])
        top_i = found.get(i, [])
        cards.append(
            {
                "latent": i,
                "frequency": _round(active / tokens),
                "mean_when_active": _round(total[i] / active) if active else None,
                "max": top_i[0]["value"] if top_i else 0.0,
                "top": top_i[:top],
            }
        )
    return cards


def feature_cards(
    lm: LoadedModel,
    sae: TopKSae,
    *,
    layer: int,
    documents: Iterable[str],
    context: int,
    latents: Sequence[int] | None,
    tokens: int = 32_768,
    top: int = 5,
    window: tuple[int, int] = (12, 4),
    contexts_per_batch: int = 16,
    meter: HarvestMeter | None = None,
) -> list[dict[str, Any]]:
    """The feature cards of ``latents`` (all of them when None, in that order) of ``sae`` at
    ``layer`` of ``lm``, on the first ``tokens`` read positions of the held-out ``documents``."""
    if sae.d_model != lm.d_model:
        raise EvaluatorError(f"the SAE reads d_model {sae.d_model}; {lm.id} has {lm.d_model}")
    if not 1 <= layer <= lm.n_layers:
        raise EvaluatorError(f"layer {layer} out of range for {lm.id}: 1..{lm.n_layers}")
    documents = list(documents)
    prefix = special_prefix(lm.tokenizer)
    activations = token_activations(
        lm,
        documents,
        layer=layer,
        context=context,
        tokens=tokens,
        contexts_per_batch=contexts_per_batch,
        meter=meter,
    )
    batches = _batches(document_contexts(lm.tokenizer, documents, context), contexts_per_batch)
    # the activations first: zip stops at their end without cutting one more batch of contexts
    blocks = ((batch, block) for block, batch in zip(activations, batches, strict=False))
    return cards_from_blocks(
        sae,
        blocks,
        skip=first_read_position(prefix),
        prefix=len(prefix),
        decode=lambda ids: lm.tokenizer.decode(ids, clean_up_tokenization_spaces=False),
        latents=latents,
        top=top,
        window=window,
    )
