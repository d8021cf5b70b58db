"""Token activations for an SAE: documents cut into contexts, one layer harvested per token, and a
bounded shuffle buffer between the harvest and the trainer.

Contexts: each document is tokenized without special tokens and cut into consecutive pieces of
``context − len(prefix)`` tokens, each starting with the tokenizer's own prefix (Gemma's ``<bos>``;
SmolLM2 adds none); a last piece shorter than that is dropped, so every context has ``context``
tokens and a batch needs no padding. A context never spans two documents.

Positions read: every position from ``skip = max(1, len(prefix))`` on. The first position of a
context is never read: on these models it is an attention sink whose residual norm is ~100× the
others' (measured: about 22,700 against 160 at SmolLM2's layer 15), and the tokenizer's prefix is
not text.

The forward pass goes through :func:`evaluator.core.harvest.forward_until`, so the blocks after the
SAE's layer never run; activations are float32 on the CPU, whatever the compute dtype.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaluator.core.harvest import forward_until
from evaluator.errors import EvaluatorError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel


def special_prefix(tokenizer: Any) -> list[int]:
    """The token ids the tokenizer puts before every input (its BOS, if it adds one)."""
    ids = list(tokenizer("")["input_ids"])
    if ids != list(tokenizer("a")["input_ids"])[: len(ids)]:  # pragma: no cover - an encoder's
        raise EvaluatorError("the tokenizer does not add a plain prefix: an SAE reads a decoder model")
    return ids


def first_read_position(prefix: Sequence[int]) -> int:
    """The first position of a context the SAE reads: after the sink position and the prefix."""
    return max(1, len(prefix))


def contexts(tokenizer: Any, documents: Iterable[str], context: int) -> Iterator[list[int]]:
    """Token ids of consecutive ``context``-token pieces of each document, prefix included."""
    prefix = special_prefix(tokenizer)
    body = context - len(prefix)
    if body < 2:
        raise EvaluatorError(f"context {context} is too short for the tokenizer's prefix of {len(prefix)}")
    for text in documents:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        for start in range(0, len(ids) - body + 1, body):
            yield prefix + list(ids[start : start + body])


def batched(items: Iterable[list[int]], size: int) -> Iterator[list[list[int]]]:
    batch: list[list[int]] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def layer_hidden(lm: LoadedModel, batch: list[list[int]], layer: int) -> Any:
    """The residual stream "b t d_model" (float32, CPU) at ``layer`` for equal-length contexts."""
    import torch

    ids = torch.tensor(batch, dtype=torch.long, device=lm.device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    return forward_until(lm, inputs, [layer])[layer].float().cpu()


@dataclass
class HarvestMeter:
    """What a stream harvested: tokens read, contexts run and the seconds spent in forward passes."""

    tokens: int = 0
    contexts: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def token_activations(
    lm: LoadedModel,
    documents: Iterable[str],
    *,
    layer: int,
    context: int,
    tokens: int,
    contexts_per_batch: int = 16,
    meter: HarvestMeter | None = None,
) -> Iterator[Any]:
    """Blocks "n d_model" (float32, CPU) of the read positions' activations at ``layer``, in
    document order, until ``tokens`` tokens have been yielded (the last block cut to fit)."""
    skip = first_read_position(special_prefix(lm.tokenizer))
    meter = meter if meter is not None else HarvestMeter()
    left = tokens
    for batch in batched(contexts(lm.tokenizer, documents, context), contexts_per_batch):
        start = time.perf_counter()
        hidden = layer_hidden(lm, batch, layer)[:, skip:].reshape(-1, lm.d_model)
        meter.seconds += time.perf_counter() - start
        block = hidden[:left]
        meter.tokens += int(block.shape[0])
        meter.contexts += len(batch)
        left -= int(block.shape[0])
        yield block
        if left <= 0:
            return


def shuffled_batches(
    blocks: Iterable[Any], *, capacity: int, batch_size: int, generator: Any
) -> Iterator[Any]:
    """Batches "batch_size d" drawn from ``blocks`` through a shuffle buffer of ``capacity`` rows.

    The buffer fills; when full it is shuffled and its first half handed out in batches, the rest
    kept to mix with what comes next; at the end the rest is shuffled and handed out (the last
    batch may be smaller). Memory: the buffer and one shuffled copy of it. Deterministic for a
    ``generator`` state.
    """
    import torch

    if capacity < 2 * batch_size:
        raise EvaluatorError(f"the shuffle buffer ({capacity}) must hold at least two batches ({batch_size})")
    buffer: Any = None
    filled = 0

    def shuffle(n: int) -> None:
        buffer[:n] = buffer[:n][torch.randperm(n, generator=generator)]

    for block in blocks:
        if buffer is None:
            buffer = torch.empty(capacity, block.shape[1], dtype=torch.float32)
        while block.shape[0]:
            take = min(capacity - filled, int(block.shape[0]))
            buffer[filled : filled + take] = block[:take]
            filled += take
            block = block[take:]
            if filled == capacity:
                shuffle(filled)
                out = (filled // 2 // batch_size) * batch_size
                for start in range(0, out, batch_size):
                    yield buffer[start : start + batch_size].clone()
                buffer[: filled - out] = buffer[out:filled].clone()
                filled -= out
    if filled:
        shuffle(filled)
        for start in range(0, filled, batch_size):
            yield buffer[start : min(start + batch_size, filled)].clone()
