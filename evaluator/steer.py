"""Direction utility: does a linear probe's direction steer the model, not only classify?

For a linear probe on a decoder model, the direction in residual space is the weight mapped back
through the probe's standardisation (``w / scale``, :meth:`evaluator.probes.Probe.direction`),
unit-normalised: û. Adding û raises the probe's score, so +û points to its positive class.

Each task declares a behavioural readout in tasks.yaml (:class:`evaluator.registry.ReadoutSpec`):
the model reads the readout prompt and r(x) = log P(positive openings) − log P(negative openings)
of its next token (the first token of each opening; logits from the tied embedding matrix on the
final hidden state). Its AUROC against the labels is the model's behavioural baseline.

On a seeded, balanced subset of the task's test rows, at the probe's layer (a forward hook on the
decoder block's output; layer 0: the embedding output), at every position:

- *addition*: h ← h + α·û with α = ``alpha_multiple`` × the median residual norm of the real
  tokens at that layer (unsteered); effect = mean of r_steered(x) − r(x) (positive: towards the
  positive behaviour);
- *ablation*: h ← h − (h·û)û; effect = AUROC(r) − AUROC(r_ablated), the drop of the readout's
  AUROC.

Both are repeated along K seeded random unit directions (the same α): ``utility_z`` =
(effect − random mean) / random sd (the sd floored at 1e-9 for addition and at one AUROC step,
1/(n_pos·n_neg), for ablation, so that K identical random effects give a finite z). A task's
``utility_z`` is the mean of the two, or the addition's alone where the unsteered readout's AUROC is
below the protocol's ``ablation_min_readout_auroc`` (a readout at chance cannot drop; ablation is
then reported with ``judged: false`` and no ``utility_z``); ``direction_utility`` is the mean over the tasks with a
readout. Tasks without one are n/a, never imputed. The settings are the protocol's ``steering``
section (registry/protocols/p1.yaml); the numerics are the protocol's (float32).

Cost: one unsteered pass of the whole model records the residual stream at the probe's layer and
the later blocks' arguments; the 2 + 2K interventions then replay only the blocks after that layer,
their edited copies of each batch stacked along the batch dimension (:func:`readouts_batched`), so
the upper blocks run a few large passes instead of 2 + 2K small ones. Every row attends only to
itself, so the readouts are those of one replay per intervention.

Pure: no Django; torch is imported inside functions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.errors import EvaluatorError
from evaluator.results import Progress, jsonable, no_progress, sub_progress

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.activations import HarvestConfig
    from evaluator.models import LoadedModel
    from evaluator.probes import Probe
    from evaluator.registry import Protocol, Registry, SteeringSettings, TaskSpec

log = logging.getLogger(__name__)

#: the floor of the random sd of the addition effect (readout units)
ADDITION_SD_FLOOR = 1e-9
#: padded tokens per batched replay of the upper blocks (several interventions stacked): a
#: speed and memory setting only, every row's readout is the same as when replayed alone
REPLAY_TOKENS = 32768


# --------------------------------------------------------------------------- eligibility


def steer_ineligibility(probe: Probe, *, registry: Registry) -> str | None:
    """Why ``probe`` cannot be steered (None: it can): linear probes on decoder models only."""
    spec = registry.model(probe.base_model)
    if spec.encoder:
        return f"{spec.id} is an encoder: it has no next-token distribution to read behaviour from"
    direction = probe.direction()
    if direction is None:
        return "only a linear probe (one direction in residual space) can be steered"
    if not np.all(np.isfinite(direction)) or float(np.linalg.norm(direction)) == 0.0:
        return "the probe's direction is zero or not finite"
    return None


def unit_direction(probe: Probe) -> np.ndarray:
    """û: the probe's residual-space direction ``w / scale``, unit norm (float64)."""
    direction = probe.direction()
    if direction is None:
        raise EvaluatorError("only a linear probe has a direction")
    return direction / np.linalg.norm(direction)


def random_directions(d_model: int, *, k: int, seed: int) -> np.ndarray:
    """K seeded random unit directions "k d_model" (float64)."""
    rng = np.random.default_rng(seed)
    out = rng.standard_normal((k, d_model))
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def steer_plan(*, registry: Registry, base_model: str, probe_kind: str, task_ids: Sequence[str]) -> list[str]:
    """The tasks a probe's steer runs measure (the board plans one run each): none unless it is a
    linear probe on a decoder model; then those of ``task_ids`` whose readout has a template for
    the model's family (the others are n/a)."""
    spec = registry.model(base_model)
    if probe_kind != "linear" or spec.encoder:
        return []
    out = []
    for task_id in task_ids:
        readout = registry.tasks[task_id].readout if task_id in registry.tasks else None
        if readout is not None and readout.template_for(spec.family) is not None:
            out.append(task_id)
    return out


# --------------------------------------------------------------------------- the readout


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
    from evaluator.models import output_embedding

    return output_embedding(lm)


Edit = Callable[[Any], Any]  # "b t d" hidden states → edited hidden states


@dataclass
class _Encoded:
    ids: list[list[int]]
    lengths: np.ndarray
    batches: list[np.ndarray]


def _encode(lm: LoadedModel, prompts: Sequence[str], config: HarvestConfig) -> _Encoded:
    from evaluator.activations import _token_batches

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

    if not 0 <= layer <= lm.n_layers:
        raise EvaluatorError(f"layer {layer} out of range for {lm.id}: 0..{lm.n_layers}")
    module = lm.embeddings if layer == 0 else lm.blocks[layer - 1]
    later = lm.blocks[layer:]
    pad_id = lm.tokenizer.pad_token_id
    base = np.empty(len(encoded.ids), dtype=np.float64)
    norms: list[np.ndarray] = []
    batches: list[_Batch] = []
    state: dict[str, Any] = {}

    def capture(mod, args, output):  # noqa: ARG001 - the hook signature
        h = output[0] if isinstance(output, tuple) else output
        state["hidden"] = h.detach().clone()
        norms.append(h.float().norm(dim=-1)[state["mask"].bool()].cpu().numpy().astype(np.float64))

    def call_capture(mod, args, kwargs):  # noqa: ARG001 - the hook signature
        state["calls"].append((tuple(args[1:]), dict(kwargs)))

    with lm.lock:
        handles = [module.register_forward_hook(capture)]
        handles += [b.register_forward_pre_hook(call_capture, with_kwargs=True) for b in later]
        try:
            with torch.inference_mode():
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
        finally:
            for handle in handles:
                handle.remove()
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


def _addition(vector: Any) -> Edit:
    return lambda h: h + vector.to(h.dtype)


def _ablation(unit: Any) -> Edit:
    def edit(h):
        u = unit.to(h.dtype)
        return h - (h @ u).unsqueeze(-1) * u

    return edit


# --------------------------------------------------------------------------- one task


def _zscore(effect: float, randoms: np.ndarray, floor: float) -> dict[str, Any]:
    mean, sd = float(randoms.mean()), float(randoms.std(ddof=1))
    return {
        "effect": float(effect),
        "random_mean": mean,
        "random_sd": sd,
        "sd_floor": floor,
        "utility_z": (float(effect) - mean) / max(sd, floor),
        "random_effects": [float(x) for x in randoms],
    }


def steer_subset(labels: np.ndarray, ids: Sequence[str], *, task_id: str, n: int, seed: int) -> list[int]:
    """The seeded, balanced subset of rows (the transfer subset's rule: ranked by SHA-256)."""
    from evaluator.activations import SplitRows
    from evaluator.transfer import transfer_subset

    rows = SplitRows(
        task_id=task_id, split="test", sha256="", ids=list(ids), groups=list(ids), labels=labels, texts=[]
    )
    return transfer_subset(rows, n, seed)


def steer_task(
    probe: Probe,
    lm: LoadedModel,
    task: TaskSpec,
    *,
    registry: Registry,
    settings: SteeringSettings,
    config: HarvestConfig,
    n: int | None = None,
    progress: Progress | None = None,
    batched: bool = True,
) -> dict[str, Any]:
    """The readout, addition and ablation of ``probe``'s direction on one task (a JSON dict).
    A task without a readout (for this model's family) gives ``readout: None`` and the reason.
    ``batched``: the interventions are replayed stacked (:func:`readouts_batched`); False: one
    replay each (the same numbers, slower)."""
    import torch

    from evaluator.activations import read_split, render
    from evaluator.metrics import auroc

    progress = progress or no_progress
    start = time.perf_counter()
    family = registry.model(lm.id).family
    if task.readout is None:
        reason = task.readout_reason or "tasks.yaml declares no readout for this task"
        return {"task": task.id, "readout": None, "reason": reason, "utility_z": None}
    template = task.readout.template_for(family)
    if template is None:
        reason = f"the task's readout has no template for the {family} model family"
        return {"task": task.id, "readout": None, "reason": reason, "utility_z": None}
    rows = read_split(registry, task.id, "test")
    chosen = steer_subset(
        rows.labels, rows.ids, task_id=task.id, n=n or settings.examples, seed=settings.seed
    )
    labels = rows.labels[chosen]
    n_pos, n_neg = int(labels.sum()), int((labels == 0).sum())
    if n_pos == 0 or n_neg == 0:
        raise EvaluatorError(f"{task.id}: the steering subset needs both classes")
    encoded = _encode(lm, [render(template, rows.texts[i]) for i in chosen], config)
    tokens = readout_tokens(lm, positive=task.readout.positive, negative=task.readout.negative)
    layer, k = probe.layer, settings.random_directions
    steps = 3 + 2 * k

    prefix = readout_prefix(lm, encoded, layer=layer, tokens=tokens)
    base = prefix.base
    base_auroc = auroc(base, labels)
    median_norm = float(np.median(prefix.norms))
    alpha = settings.alpha_multiple * median_norm
    progress(1 / steps, "steer readout")

    as_t = lambda v: torch.as_tensor(v, dtype=torch.float32, device=lm.device)  # noqa: E731
    u = unit_direction(probe)
    randoms = random_directions(lm.d_model, k=k, seed=settings.seed)

    def add_effect(direction: np.ndarray) -> float:
        r = readouts(lm, prefix, tokens=tokens, edit=_addition(as_t(alpha * direction)))
        return float(np.mean(r - base))

    def ablate_effect(direction: np.ndarray) -> tuple[float, float]:
        r = readouts(lm, prefix, tokens=tokens, edit=_ablation(as_t(direction)))
        after = auroc(r, labels)
        return base_auroc - after, after

    if batched:  # the 2 + 2K interventions, stacked into as few replays as fit
        directions = [u, *randoms]
        edits = [_addition(as_t(alpha * d)) for d in directions] + [_ablation(as_t(d)) for d in directions]
        r = readouts_batched(
            lm, prefix, tokens=tokens, edits=edits, progress=sub_progress(progress, 1 / steps, 1.0)
        )
        adds = (r[: k + 1] - base).mean(axis=1)
        after = np.array([auroc(row, labels) for row in r[k + 1 :]])
        add, add_random = float(adds[0]), adds[1:]
        drop, auroc_after = float(base_auroc - after[0]), float(after[0])
        drop_random = base_auroc - after[1:]
    else:  # one replay per intervention (the path before batching, kept to compare with)
        add = add_effect(u)
        drop, auroc_after = ablate_effect(u)
        add_random, drop_random = np.empty(k), np.empty(k)
        for i, direction in enumerate(randoms):
            add_random[i] = add_effect(direction)
            drop_random[i] = ablate_effect(direction)[0]
            progress((3 + 2 * i) / steps, "steer random directions")
    addition = _zscore(add, add_random, ADDITION_SD_FLOOR) | {
        "alpha": alpha,
        "alpha_multiple": settings.alpha_multiple,
        "median_norm": median_norm,
    }
    ablation = _zscore(drop, drop_random, 1.0 / (n_pos * n_neg)) | {
        "auroc_before": base_auroc,
        "auroc_after": auroc_after,
        "judged": base_auroc >= settings.ablation_min_readout_auroc,
    }
    if not ablation["judged"]:
        ablation["reason"] = (
            f"readout AUROC {base_auroc:.3f} below {settings.ablation_min_readout_auroc:g}: nothing to drop"
        )
        ablation["utility_z"] = None
    judged = [z for z in (addition["utility_z"], ablation["utility_z"]) if z is not None]
    progress(1.0, "steer")
    return {
        "task": task.id,
        "readout": {
            "auroc": base_auroc,
            "mean": float(base.mean()),
            "template_family": family,
            "tokens": tokens.to_dict(),
            "n": len(chosen),
            "n_pos": n_pos,
            "n_neg": n_neg,
        },
        "addition": addition,
        "ablation": ablation,
        "utility_z": sum(judged) / len(judged),
        "layer": layer,
        "example_ids": [rows.ids[i] for i in chosen],
        "seconds": time.perf_counter() - start,
    }


# --------------------------------------------------------------------------- one probe


def direction_utility(task_results: Sequence[dict[str, Any]]) -> float | None:
    """The mean task ``utility_z`` over the tasks with a readout; None when no task has one."""
    zs = [r["utility_z"] for r in task_results if r.get("utility_z") is not None]
    return float(np.mean(zs)) if zs else None


def steer_probe(
    probe: Probe | str | Path,
    *,
    registry: Registry,
    cache_dir: str | Path,
    tasks: Sequence[str] | None = None,
    n: int | None = None,
    device: str | None = None,
    protocol: Protocol | None = None,
    load: Callable[[str], LoadedModel] | None = None,
    progress: Progress | None = None,
    batched: bool = True,
) -> dict[str, Any]:
    """Direction utility of one probe on its category's active tasks (or ``tasks``), as JSON.

    Measured under ``protocol`` (default: the registry's current one; its ``steering`` section
    and its float32 numerics). An ineligible probe (MLP, encoder) gives ``eligible: False`` and the
    reason, with no per-task numbers. ``load(model_id)``: a worker's keeper of loaded models.
    ``batched``: see :func:`steer_task`.
    """
    from evaluator.activations import HarvestConfig
    from evaluator.models import load_model
    from evaluator.probes import load_probe

    progress = progress or no_progress
    start = time.perf_counter()
    if isinstance(probe, (str, Path)):
        probe = load_probe(probe, registry=registry)
    protocol = protocol or registry.protocol()
    if protocol.steering is None:
        raise EvaluatorError(
            f"protocol {protocol.id} has no steering section; direction utility is not measured"
        )
    settings = protocol.steering
    task_ids = list(tasks) if tasks else [t.id for t in registry.active_tasks(probe.metadata.category)]
    head = {
        "probe": {"name": probe.metadata.name, "base_model": probe.base_model, "layer": probe.layer},
        "protocol": protocol.id,
        "settings": {
            "alpha_multiple": settings.alpha_multiple,
            "random_directions": settings.random_directions,
            "examples": n or settings.examples,
            "seed": settings.seed,
        },
    }
    reason = steer_ineligibility(probe, registry=registry)
    if reason is not None:
        return head | {"eligible": False, "reason": reason, "tasks": {}, "direction_utility": None}
    if load is None:

        def load(model_id: str) -> LoadedModel:
            return load_model(
                model_id, registry=registry, cache_dir=cache_dir, device=device, protocol=protocol
            )

    lm = load(probe.base_model)
    config = HarvestConfig.from_protocol(protocol)
    results = []
    for i, task_id in enumerate(task_ids):
        results.append(
            steer_task(
                probe,
                lm,
                registry.task(task_id),
                registry=registry,
                settings=settings,
                config=config,
                n=n,
                progress=sub_progress(progress, i / len(task_ids), (i + 1) / len(task_ids), f"{task_id} "),
                batched=batched,
            )
        )
    return jsonable(
        head
        | {
            "eligible": True,
            "model": lm.describe(),
            "tasks": {r["task"]: r for r in results},
            "direction_utility": direction_utility(results),
            "seconds": time.perf_counter() - start,
        }
    )
