"""The behavioural readout of direction utility (evaluator.axes.steer) and its replays.

r(x) = log P(positive openings) − log P(negative openings) of the next token, read from the LM
head on the final hidden state. One unsteered pass (:func:`readout_prefix`) records the residual
stream at the probe's layer and the later blocks' arguments; an intervention (an :data:`Edit` of
that stream: :func:`_addition`, :func:`_ablation`) then replays only the blocks after the layer
(:func:`readouts`), its copies of each batch stacked along the batch dimension
(:func:`readouts_batched`). :func:`intervention_work` counts that work before it starts. The
readout rows of a split are a seeded, balanced subset (:func:`steer_subset`, :func:`_readout_rows`).

Pure: no Django; torch is imported inside functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.axes.transfer import transfer_subset
from evaluator.core import hooks
from evaluator.core.activations import SplitRows, read_split
from evaluator.core.harvest import HarvestConfig, _token_batches, render
from evaluator.core.hooks import Edit
from evaluator.core.models import output_embedding
from evaluator.errors import EvaluatorError
from evaluator.metrics.results import Progress, no_progress

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.load import Registry
    from evaluator.data.registry.tasks import TaskSpec


#: padded tokens per batched replay of the upper blocks (several interventions stacked): a
#: speed and memory setting only, every row's readout is the same as when replayed alone
REPLAY_TOKENS = 32768


@dataclass(frozen=True)
class ReadoutTokens:
    positive: list[int]
    negative: list[int]

    def to_dict(self) -> dict[str, list[int]]:
        return {"positive": self.positive, "negative": self.negative}


def readout_tokens(lm: LoadedModel, *, positive: Sequence[str], negative: Sequence[str]) -> ReadoutTokens:
    """The first token of each opening, de-duplicated; an opening shared by both sides is an error."""

    def first(openings: Sequence[str]) -> list[int]:
        ids: list[int] = []
        for text in openings:
            tokens = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
            if not tokens:
                raise EvaluatorError(f"readout opening {text!r} tokenizes to nothing on {lm.id}")
            if tokens[0] not in ids:
                ids.append(int(tokens[0]))
        return ids

    pos, neg = first(positive), first(negative)
    if set(pos) & set(neg):
        raise EvaluatorError(f"{lm.id}: a positive and a negative readout opening share their first token")
    return ReadoutTokens(positive=pos, negative=neg)


def _output_embedding(lm: LoadedModel) -> Any:
    """The LM head's matrix (the tied input embedding, or the head kept at conversion)."""

    return output_embedding(lm)


@dataclass
class _Encoded:
    ids: list[list[int]]
    lengths: np.ndarray
    batches: list[np.ndarray]


def _encode(lm: LoadedModel, prompts: Sequence[str], config: HarvestConfig) -> _Encoded:

    sides = (lm.tokenizer.truncation_side, lm.tokenizer.padding_side)
    if sides != (config.truncation_side, config.padding_side):
        raise EvaluatorError(f"{lm.id}: the tokenizer's sides {sides} are not the protocol's")
    encoded = lm.tokenizer(
        list(prompts),
        truncation=True,
        max_length=min(config.max_length, lm.max_length),
        return_attention_mask=False,
    )
    ids = encoded["input_ids"]
    lengths = np.array([len(x) for x in ids])
    if (lengths == 0).any():
        raise EvaluatorError("a readout prompt tokenized to zero tokens")
    return _Encoded(ids=ids, lengths=lengths, batches=_token_batches(lengths, config))


@dataclass
class _Batch:
    """One batch of the unsteered pass, kept to replay the blocks after the probe's layer."""

    rows: np.ndarray
    hidden: Any  # "b t d": the residual stream at the probe's layer
    last: Any  # "b": index of each row's last real token
    calls: list[tuple[tuple, dict]]  # (args after hidden_states, kwargs) of each later block


@dataclass
class Prefix:
    """The unsteered pass at one layer: r(x), the real tokens' residual norms, and the batches."""

    layer: int
    base: np.ndarray  # r(x) "n"
    norms: np.ndarray  # residual norms of every real token at ``layer``
    batches: list[_Batch]

    @property
    def tokens(self) -> int:
        """The real (unpadded) tokens of the rows: one norm each."""
        return int(self.norms.size)


def _readout_of(lm: LoadedModel, hidden: Any, last: Any, tokens: ReadoutTokens) -> np.ndarray:
    import torch

    weight = _output_embedding(lm)
    h_last = hidden[torch.arange(hidden.shape[0], device=hidden.device), last].float()
    lp = torch.logsumexp(h_last @ weight[tokens.positive].float().T, dim=1)
    ln = torch.logsumexp(h_last @ weight[tokens.negative].float().T, dim=1)
    return (lp - ln).double().cpu().numpy()


def readout_prefix(lm: LoadedModel, encoded: _Encoded, *, layer: int, tokens: ReadoutTokens) -> Prefix:
    """Run the model once (unsteered): r(x), and what is needed to replay the blocks after
    ``layer`` with an edited residual stream (the stream at ``layer`` and each later block's
    arguments: masks, position embeddings), so an intervention costs only the later blocks."""
    import torch

    hooks.module_at(lm, layer)  # an out-of-range layer is refused before the lock is taken
    pad_id = lm.tokenizer.pad_token_id
    base = np.empty(len(encoded.ids), dtype=np.float64)
    norms: list[np.ndarray] = []
    batches: list[_Batch] = []
    state: dict[str, Any] = {}

    def keep(at: int, h: Any) -> None:  # noqa: ARG001 - the one layer captured
        state["hidden"] = h.detach().clone()
        norms.append(h.float().norm(dim=-1)[state["mask"].bool()].cpu().numpy().astype(np.float64))

    with (
        lm.lock,
        hooks.capture(lm, [layer], consume=keep),
        hooks.block_calls(lm, layer, lambda args, kwargs: state["calls"].append((args, kwargs))),
        torch.inference_mode(),
    ):
        for rows in encoded.batches:
            width = int(encoded.lengths[rows].max())
            input_ids = torch.full((rows.size, width), pad_id, dtype=torch.long)
            mask = torch.zeros((rows.size, width), dtype=torch.long)
            for b, i in enumerate(rows):
                length = int(encoded.lengths[i])
                input_ids[b, :length] = torch.tensor(encoded.ids[i])
                mask[b, :length] = 1
            state["mask"], state["calls"] = mask.to(lm.device), []
            hidden = lm.model(
                input_ids=input_ids.to(lm.device), attention_mask=state["mask"], use_cache=False
            ).last_hidden_state
            last = torch.as_tensor(encoded.lengths[rows] - 1, device=lm.device)
            base[rows] = _readout_of(lm, hidden, last, tokens)
            batches.append(_Batch(rows=rows, hidden=state["hidden"], last=last, calls=state["calls"]))
    return Prefix(layer=layer, base=base, norms=np.concatenate(norms), batches=batches)


def readouts(
    lm: LoadedModel, prefix: Prefix, *, tokens: ReadoutTokens, edit: Edit | None = None
) -> np.ndarray:
    """r(x) "n" (float64) with ``edit`` applied to the residual stream at the prefix's layer
    (every position): the blocks after it are replayed with their recorded arguments."""
    import torch

    later = lm.blocks[prefix.layer :]
    out = np.empty(prefix.base.shape, dtype=np.float64)
    with lm.lock, torch.inference_mode():
        for batch in prefix.batches:
            h = batch.hidden if edit is None else edit(batch.hidden)
            for block, (args, kwargs) in zip(later, batch.calls, strict=True):
                h = block(h, *args, **kwargs)
                h = h[0] if isinstance(h, tuple) else h
            out[batch.rows] = _readout_of(lm, lm.model.norm(h), batch.last, tokens)
    return out


def _tiled(value: Any, rows: int, times: int) -> Any:
    """A recorded block argument for ``times`` stacked copies of a batch of ``rows`` rows: every
    tensor whose first dimension is the batch's (masks, per-row positions) is repeated along it;
    the others (shared position tables, flags) broadcast as they are."""
    import torch

    if torch.is_tensor(value):
        if value.ndim >= 2 and value.shape[0] == rows:
            return value.repeat(times, *([1] * (value.ndim - 1)))
        return value
    if isinstance(value, tuple):
        return tuple(_tiled(v, rows, times) for v in value)
    if isinstance(value, list):
        return [_tiled(v, rows, times) for v in value]
    if isinstance(value, dict):
        return {k: _tiled(v, rows, times) for k, v in value.items()}
    return value


def readouts_batched(
    lm: LoadedModel,
    prefix: Prefix,
    *,
    tokens: ReadoutTokens,
    edits: Sequence[Edit],
    replay_tokens: int = REPLAY_TOKENS,
    progress: Progress | None = None,
) -> np.ndarray:
    """r(x) under each of ``edits``: "e n" (float64), as :func:`readouts` once per edit, but the
    edited copies of a batch are stacked along the batch dimension and replayed together (as
    many as fit ``replay_tokens`` padded tokens per pass): fewer, larger passes through the
    blocks after the prefix's layer. Each row attends only to its own tokens, so a row's
    readout does not depend on what it is stacked with."""
    import torch

    progress = progress or no_progress
    later = lm.blocks[prefix.layer :]
    out = np.empty((len(edits), prefix.base.size), dtype=np.float64)
    done, total = 0, len(edits) * len(prefix.batches)
    with lm.lock, torch.inference_mode():
        for batch in prefix.batches:
            rows, width = batch.hidden.shape[0], batch.hidden.shape[1]
            per_pass = max(1, replay_tokens // max(rows * width, 1))
            for first in range(0, len(edits), per_pass):
                group = edits[first : first + per_pass]
                h = torch.cat([edit(batch.hidden) for edit in group])
                for block, (args, kwargs) in zip(later, batch.calls, strict=True):
                    h = block(h, *_tiled(args, rows, len(group)), **_tiled(kwargs, rows, len(group)))
                    h = h[0] if isinstance(h, tuple) else h
                r = _readout_of(lm, lm.model.norm(h), batch.last.repeat(len(group)), tokens)
                out[first : first + len(group), batch.rows] = r.reshape(len(group), rows)
                done += len(group)
                progress(done / total, "steer interventions")
    return out


def replayed_parameters(lm: LoadedModel, layer: int) -> int:
    """The weights of the blocks after ``layer``: what one token of a replay multiplies through."""
    return int(sum(p.numel() for block in lm.blocks[layer:] for p in block.parameters()))


def intervention_work(lm: LoadedModel, prefix: Prefix, *, interventions: int) -> float:
    """The work of ``interventions`` replays of ``prefix``'s rows, in 10^12 multiply-accumulates of
    the replayed blocks' weights (real tokens × parameters; attention scores, the padding and the
    readout are left out). A count of the artifact's layer, the data and the protocol only, so
    the same on every machine."""
    return interventions * prefix.tokens * replayed_parameters(lm, prefix.layer) / 1e12


def _addition(vector: Any) -> Edit:
    return lambda h: h + vector.to(h.dtype)


def _ablation(unit: Any) -> Edit:
    def edit(h):
        u = unit.to(h.dtype)
        return h - (h @ u).unsqueeze(-1) * u

    return edit


def steer_subset(labels: np.ndarray, ids: Sequence[str], *, task_id: str, n: int, seed: int) -> list[int]:
    """The seeded, balanced subset of rows (the transfer subset's rule: ranked by SHA-256)."""

    rows = SplitRows(
        task_id=task_id, split="test", sha256="", ids=list(ids), groups=list(ids), labels=labels, texts=[]
    )
    return transfer_subset(rows, n, seed)


@dataclass
class _Readout:
    """The readout prompts of a balanced subset of one split, and the unsteered pass over them."""

    chosen: list[int]
    labels: np.ndarray
    texts: list[str]
    prompts: list[str]
    ids: list[str]
    prefix: Prefix


def _readout_rows(
    lm: LoadedModel,
    task: TaskSpec,
    *,
    registry: Registry,
    split: str,
    n: int,
    seed: int,
    template: str,
    tokens: ReadoutTokens,
    layer: int,
    config: HarvestConfig,
) -> _Readout:

    rows = read_split(registry, task.id, split, model=lm.id if task.on_policy else None)
    chosen = steer_subset(rows.labels, rows.ids, task_id=task.id, n=n, seed=seed)
    labels = rows.labels[chosen]
    if labels.min() == labels.max():
        raise EvaluatorError(f"{task.id}: the steering subset of {split} needs both classes")
    texts = [rows.texts[i] for i in chosen]
    prompts = [render(template, t) for t in texts]
    prefix = readout_prefix(lm, _encode(lm, prompts, config), layer=layer, tokens=tokens)
    return _Readout(chosen, labels, texts, prompts, [rows.ids[i] for i in chosen], prefix)
