"""Direction utility: does a linear probe's direction steer the model, not only classify?

For a linear probe on a decoder model, the direction in residual space is the weight mapped back
through the probe's standardisation (``w / scale``, :meth:`evaluator.core.probes.Probe.direction`),
unit-normalised: û. Adding û raises the probe's score, so +û points to its positive class.

Each task declares a behavioural readout in tasks.yaml (:class:`evaluator.data.registry.ReadoutSpec`):
the model reads the readout prompt and r(x) = log P(positive openings) − log P(negative openings)
of its next token (the first token of each opening; logits from the LM head on the final hidden
state). Interventions act at the probe's layer (a forward hook on the decoder block's output;
layer 0: the embedding output), at every position. Per task (the protocol's ``steering``
section; docs/METHODOLOGY.md gives the reasons):

1. **The readout is validated first.** On a seeded, balanced subset of the test rows, the
   unsteered readout's AUROC against the labels must reach ``min_readout_auroc``; a readout below
   it is reported with ``judged: false`` and nothing else is run (a readout at chance cannot
   show steering, and a z against it is noise).
2. **The strength is chosen on train.** Addition h ← h + α·û with α = m × the median residual
   norm of the real tokens at the layer, for each m of ``strengths``, on a balanced train subset;
   the fluency guard measures the steered model's perplexity on plain text (train texts of the
   ``fluency_task``). The chosen m moves the readout most among those whose perplexity stays
   within ``max_perplexity_ratio`` × the unsteered one; if none does, the task is not judged.
3. **Measured on test against random directions.** Addition at the chosen strength (effect: mean
   of r_steered − r) and ablation h ← h − (h·û)û (effect: AUROC(r) − AUROC(r_ablated)) are
   repeated along K seeded random unit directions for each seed of ``random_seeds``. The
   empirical one-sided p-value is (1 + #random effects ≥ the probe's) / (1 + n_random) over all
   of them; z = (effect − random mean) / random sd (the sd floored at 1e-9 for addition and at
   one AUROC step for ablation), with its value per seed as the spread. A task's ``utility_z``
   and ``p_value`` are the addition's (the steering claim). The ablation's are reported beside
   them, not averaged in: projecting out a random direction changes almost nothing, so its
   random sd is tiny and the ablation's z is large whenever the direction matters at all (its
   p-value is the honest measure). These test interventions have a work limit
   (``max_intervention_teramacs``, counted by :func:`intervention_work` from the tokens, the
   replayed blocks' weights and the number of replays): a task above it is reported with its
   readout and not judged, so that a probe at an early layer with long prompts cannot hold a
   worker for hours.
4. **The prompting baseline.** The task's instruction (an instruction that asks for the positive
   behaviour) inserted into the readout prompts, the model unsteered: its mean readout change is
   what asking achieves, beside what the direction achieves.
5. **The generated-text readout** (tasks whose readout names a judge, such as refusal): a few
   rows per class are continued greedily, unsteered, with the direction ablated (label-1 rows:
   does the behaviour go away?) and added at the chosen strength (label-0 rows: does it appear?),
   and the same along a few random directions; the judge reads each continuation.

``direction_utility`` is the mean task ``utility_z`` over the judged tasks; tasks without a
readout, or not judged, are n/a, never imputed. The numerics are the protocol's (float32).

Cost: one unsteered pass records the residual stream at the probe's layer and the later blocks'
arguments; the interventions replay only the blocks after that layer, their edited copies of each
batch stacked along the batch dimension (:func:`readouts_batched`). Every row attends only to
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

from evaluator.axes.transfer import transfer_subset
from evaluator.core.activations import HarvestConfig, SplitRows, _token_batches, read_split, render
from evaluator.core.models import output_embedding
from evaluator.core.probes import load_probe
from evaluator.data.builders.onpolicy_refusal import MAX_NEW_TOKENS, refused
from evaluator.errors import EvaluatorError
from evaluator.metrics.metrics import auroc
from evaluator.metrics.results import Progress, jsonable, no_progress, sub_progress

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.core.probes import Probe
    from evaluator.data.registry import Protocol, Registry, SteeringSettings, TaskSpec

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
        task = registry.tasks.get(task_id)
        if task is None or not task.measured_on(base_model) or task.readout is None:
            continue
        if task.readout.template_for(spec.family) is not None:
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

    return output_embedding(lm)


Edit = Callable[[Any], Any]  # "b t d" hidden states → edited hidden states


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


# --------------------------------------------------------------------------- edits in a full pass


class _EditAt:
    """A forward hook applying ``edit`` to the residual stream at ``layer`` for full passes
    (perplexity, generation), where the replay from the layer does not apply."""

    def __init__(self, lm: LoadedModel, layer: int, edit: Edit | None):
        self.module = lm.embeddings if layer == 0 else lm.blocks[layer - 1]
        self.edit = edit
        self.handle: Any = None

    def __enter__(self) -> _EditAt:
        if self.edit is not None:
            edit = self.edit

            def hook(mod, args, output):  # noqa: ARG001 - the hook signature
                if isinstance(output, tuple):
                    return (edit(output[0]), *output[1:])
                return edit(output)

            self.handle = self.module.register_forward_hook(hook)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.handle is not None:
            self.handle.remove()


def perplexity(
    lm: LoadedModel, ids: Sequence[Sequence[int]], *, layer: int, edit: Edit | None = None
) -> float:
    """exp of the mean next-token negative log-likelihood over the tokens of ``ids`` (one text
    at a time, no padding), with ``edit`` applied at ``layer``: the fluency guard."""
    import torch

    weight = _output_embedding(lm)
    total, count = 0.0, 0
    with lm.lock, torch.inference_mode(), _EditAt(lm, layer, edit):
        for row in ids:
            x = torch.as_tensor([list(row)], device=lm.device)
            hidden = lm.model(input_ids=x, use_cache=False).last_hidden_state[0, :-1].float()
            logp = torch.log_softmax(hidden @ weight.float().T, dim=-1)
            total -= float(logp.gather(1, x[0, 1:].unsqueeze(1)).sum())
            count += x.shape[1] - 1
    return float(np.exp(total / max(count, 1)))


def generate(
    lm: LoadedModel, prompts: Sequence[str], *, layer: int, edit: Edit | None, max_new_tokens: int
) -> list[str]:
    """Greedy continuations (decoded, special tokens dropped) of each prompt, one at a time with the
    key-value cache, ``edit`` applied at ``layer`` to every position, the new tokens included."""
    import torch

    weight = _output_embedding(lm)
    eos = lm.tokenizer.eos_token_id
    out = []
    with lm.lock, torch.inference_mode(), _EditAt(lm, layer, edit):
        for prompt in prompts:
            x = torch.as_tensor(
                [lm.tokenizer(prompt, add_special_tokens=False)["input_ids"]], device=lm.device
            )
            new: list[int] = []
            past = None
            for _ in range(max_new_tokens):
                result = lm.model(input_ids=x, past_key_values=past, use_cache=True)
                past = result.past_key_values
                token = int(torch.argmax(result.last_hidden_state[0, -1].float() @ weight.float().T))
                if token == eos:
                    break
                new.append(token)
                x = torch.as_tensor([[token]], device=lm.device)
            out.append(str(lm.tokenizer.decode(new, skip_special_tokens=True)))
    return out


@dataclass(frozen=True)
class Judge:
    """A judge of generated text: ``judge(continuation)`` over ``max_new_tokens`` greedy tokens."""

    judge: Callable[[str], bool]
    max_new_tokens: int


def _refusal_judge() -> Judge:

    return Judge(refused, MAX_NEW_TOKENS)


#: the judges a readout may name (``generated:`` in tasks.yaml; evaluator.data.registry.READOUT_JUDGES),
#: the same judge and length that label the on-policy refusal task
JUDGES: dict[str, Callable[[], Judge]] = {"refusal": _refusal_judge}


# --------------------------------------------------------------------------- one task


def empirical_p(effect: float, randoms: np.ndarray) -> float:
    """One-sided: (1 + #random effects ≥ effect) / (1 + #random), never 0."""
    return float((1 + int(np.sum(randoms >= effect))) / (1 + randoms.size))


def _against_random(effect: float, pools: Sequence[np.ndarray], floor: float) -> dict[str, Any]:
    """The probe's effect against the random directions: pooled z and p-value, and z per seed."""
    randoms = np.concatenate(pools)
    mean, sd = float(randoms.mean()), float(randoms.std(ddof=1))
    per_seed = [(float(effect) - float(p.mean())) / max(float(p.std(ddof=1)), floor) for p in pools]
    return {
        "effect": float(effect),
        "random_mean": mean,
        "random_sd": sd,
        "sd_floor": floor,
        "n_random": int(randoms.size),
        "p_value": empirical_p(effect, randoms),
        "utility_z": (float(effect) - mean) / max(sd, floor),
        "z_by_seed": per_seed,
        "z_spread": float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else 0.0,
        "random_effects": [float(x) for x in randoms],
    }


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


def fluency_ids(lm: LoadedModel, registry: Registry, settings: SteeringSettings) -> list[list[int]]:
    """The fluency text: ``fluency_examples`` train texts of ``fluency_task`` (the first by the
    seeded SHA-256 ranking), as plain text, each cut to ``fluency_tokens`` tokens."""

    rows = read_split(registry, settings.fluency_task, "train")
    chosen = steer_subset(
        rows.labels, rows.ids, task_id=settings.fluency_task, n=settings.fluency_examples, seed=settings.seed
    )
    ids = [
        lm.tokenizer(rows.texts[i], add_special_tokens=False)["input_ids"][: settings.fluency_tokens]
        for i in chosen
    ]
    return [x for x in ids if len(x) >= 2]


def choose_strength(
    lm: LoadedModel,
    sweep: _Readout,
    *,
    u: np.ndarray,
    layer: int,
    tokens: ReadoutTokens,
    settings: SteeringSettings,
    fluency: Sequence[Sequence[int]],
) -> dict[str, Any]:
    """The strength sweep on train with the fluency guard: per multiple m, the readout's mean
    change and the perplexity ratio; ``chosen``: the m that moves the readout most among those
    within the guard (None when every m breaks the model)."""
    import torch

    median_norm = float(np.median(sweep.prefix.norms))
    as_t = lambda v: torch.as_tensor(v, dtype=torch.float32, device=lm.device)  # noqa: E731
    edits = [_addition(as_t(m * median_norm * u)) for m in settings.strengths]
    r = readouts_batched(lm, sweep.prefix, tokens=tokens, edits=edits)
    effects = (r - sweep.prefix.base).mean(axis=1)
    base_ppl = perplexity(lm, fluency, layer=layer)
    rows = []
    for m, effect, edit in zip(settings.strengths, effects, edits, strict=True):
        ppl = perplexity(lm, fluency, layer=layer, edit=edit)
        ratio = ppl / base_ppl
        rows.append(
            {
                "multiple": m,
                "effect": float(effect),
                "perplexity": ppl,
                "perplexity_ratio": ratio,
                "fluent": bool(ratio <= settings.max_perplexity_ratio),
            }
        )
    fluent = [row for row in rows if row["fluent"]]
    chosen = max(fluent, key=lambda row: row["effect"]) if fluent else None
    return {
        "split": "train",
        "n": int(sweep.labels.size),
        "median_norm": median_norm,
        "perplexity_base": base_ppl,
        "max_perplexity_ratio": settings.max_perplexity_ratio,
        "sweep": rows,
        "chosen": chosen,
    }


def prompt_baseline(
    lm: LoadedModel, readout: _Readout, task: TaskSpec, *, tokens: ReadoutTokens, config: HarvestConfig
) -> dict[str, Any] | None:
    """The readout's mean change when the task's instruction is inserted (unsteered), or None when
    the task declares no instruction."""
    spec = task.readout
    if spec is None or not spec.instruction:
        return None
    try:
        prompts = [spec.prompted(p, t) for p, t in zip(readout.prompts, readout.texts, strict=True)]
    except ValueError as exc:
        raise EvaluatorError(f"{task.id}: readout.instruction: {exc}") from exc
    # at the last layer: nothing after it is recorded for replay (the readout is the same at any layer)
    prompted = readout_prefix(lm, _encode(lm, prompts, config), layer=lm.n_layers, tokens=tokens).base
    return {
        "instruction": spec.instruction,
        "effect": float(np.mean(prompted - readout.prefix.base)),
    }


def generated_readout(
    lm: LoadedModel,
    readout: _Readout,
    task: TaskSpec,
    *,
    u: np.ndarray,
    alpha: float,
    layer: int,
    settings: SteeringSettings,
    randoms: np.ndarray,
) -> dict[str, Any] | None:
    """The judge of the generated text on ``generation_examples`` rows per class (the first of the
    test subset): the rate among label-1 rows unsteered and with the direction ablated, among
    label-0 rows unsteered and with it added at ``alpha``; the same interventions along the first
    ``generation_random`` random directions. None when the readout names no judge."""
    import torch

    spec = task.readout
    if spec is None or not spec.generated:
        return None
    judge = JUDGES[spec.generated]()
    max_new = judge.max_new_tokens
    k = settings.generation_examples
    pos = [p for p, y in zip(readout.prompts, readout.labels, strict=True) if y == 1][:k]
    neg = [p for p, y in zip(readout.prompts, readout.labels, strict=True) if y == 0][:k]
    as_t = lambda v: torch.as_tensor(v, dtype=torch.float32, device=lm.device)  # noqa: E731

    def rate(prompts: list[str], edit: Edit | None) -> tuple[float, list[str]]:
        texts = generate(lm, prompts, layer=layer, edit=edit, max_new_tokens=max_new)
        return float(np.mean([judge.judge(t) for t in texts])), texts

    base_pos, base_pos_texts = rate(pos, None)
    base_neg, _ = rate(neg, None)
    ablated, ablated_texts = rate(pos, _ablation(as_t(u)))
    added, added_texts = rate(neg, _addition(as_t(alpha * u)))
    random_ablated = [rate(pos, _ablation(as_t(d)))[0] for d in randoms]
    random_added = [rate(neg, _addition(as_t(alpha * d)))[0] for d in randoms]
    return {
        "judge": spec.generated,
        "max_new_tokens": max_new,
        "n_positive": len(pos),
        "n_negative": len(neg),
        "positive_rate": base_pos,
        "positive_rate_ablated": ablated,
        "random_ablated": random_ablated,
        "negative_rate": base_neg,
        "negative_rate_added": added,
        "random_added": random_added,
        "examples": {
            "unsteered": base_pos_texts[:3],
            "ablated": ablated_texts[:3],
            "added": added_texts[:3],
        },
    }


def _not_judged(task: TaskSpec, reason: str, **extra: Any) -> dict[str, Any]:
    return {
        "task": task.id,
        "judged": False,
        "reason": reason,
        "utility_z": None,
        "p_value": None,
        "n_random": 0,
    } | extra


def steer_task(
    probe: Probe,
    lm: LoadedModel,
    task: TaskSpec,
    *,
    registry: Registry,
    settings: SteeringSettings,
    config: HarvestConfig,
    n: int | None = None,
    ignore_work_limit: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Direction utility of ``probe`` on one task (a JSON dict; see the module docstring). A task
    without a readout for this model's family gives ``readout: None`` and the reason; a readout
    that fails its validation, test interventions above the protocol's work limit (unless
    ``ignore_work_limit``), or a direction that breaks fluency at every strength, give
    ``judged: False`` and the reason."""
    import torch

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
    tokens = readout_tokens(lm, positive=task.readout.positive, negative=task.readout.negative)
    layer = probe.layer
    common = {"template_family": family, "tokens": tokens.to_dict(), "layer": layer}

    test = _readout_rows(
        lm,
        task,
        registry=registry,
        split="test",
        n=n or settings.examples,
        seed=settings.seed,
        template=template,
        tokens=tokens,
        layer=layer,
        config=config,
    )
    base_auroc = auroc(test.prefix.base, test.labels)
    readout = {
        "auroc": base_auroc,
        "mean": float(test.prefix.base.mean()),
        "n": int(test.labels.size),
        "n_pos": int(test.labels.sum()),
        "n_neg": int((test.labels == 0).sum()),
        "min_auroc": settings.min_readout_auroc,
        "valid": bool(base_auroc >= settings.min_readout_auroc),
    } | common
    timings = {"readout": time.perf_counter() - start}
    head = {"readout": readout, "readout_auroc": base_auroc, "example_ids": test.ids, "timings": timings}
    progress(0.1, "steer readout")
    if not readout["valid"]:
        reason = (
            f"the readout's AUROC against the labels is {base_auroc:.3f}, below {settings.min_readout_auroc:g}:"
            " it does not read the behaviour, so no steering is judged against it"
        )
        return _not_judged(task, reason, **head, seconds=time.perf_counter() - start)

    interventions = 2 + 2 * settings.random_directions * len(settings.random_seeds)
    work = intervention_work(lm, test.prefix, interventions=interventions)
    head["work"] = {
        "interventions": interventions,
        "tokens": test.prefix.tokens,
        "replayed_parameters": replayed_parameters(lm, layer),
        "teramacs": work,
        "limit_teramacs": settings.max_intervention_teramacs,
        "limit_ignored": bool(ignore_work_limit),
    }
    if work > settings.max_intervention_teramacs and not ignore_work_limit:
        reason = (
            f"the {interventions} test interventions would replay {work:.0f} × 10^12 multiply-accumulates"
            f" ({test.prefix.tokens} tokens through the {lm.n_layers - layer} blocks after layer {layer}),"
            f" above the protocol's limit of {settings.max_intervention_teramacs:g} × 10^12: not measured"
        )
        return _not_judged(task, reason, **head, seconds=time.perf_counter() - start)

    u = unit_direction(probe)
    sweep_rows = _readout_rows(
        lm,
        task,
        registry=registry,
        split="train",
        n=settings.sweep_examples,
        seed=settings.seed,
        template=template,
        tokens=tokens,
        layer=layer,
        config=config,
    )
    strength = choose_strength(
        lm,
        sweep_rows,
        u=u,
        layer=layer,
        tokens=tokens,
        settings=settings,
        fluency=fluency_ids(lm, registry, settings),
    )
    timings["sweep"] = time.perf_counter() - start - sum(timings.values())
    progress(0.3, "steer strength sweep")
    baseline = prompt_baseline(lm, test, task, tokens=tokens, config=config)
    timings["prompt_baseline"] = time.perf_counter() - start - sum(timings.values())
    chosen = strength["chosen"]
    head |= {
        "sweep": strength,
        "strength": None if chosen is None else chosen["multiple"],
        "fluency": {
            "perplexity_base": strength["perplexity_base"],
            "perplexity_steered": None if chosen is None else chosen["perplexity"],
            "ratio": None if chosen is None else chosen["perplexity_ratio"],
            "max_ratio": settings.max_perplexity_ratio,
        },
        "prompt_baseline": baseline,
    }
    if chosen is None:
        reason = (
            f"every swept strength raises the perplexity on the fluency text above"
            f" {settings.max_perplexity_ratio:g}× the unsteered one: the push breaks the model"
        )
        return _not_judged(task, reason, **head, seconds=time.perf_counter() - start)

    multiple = chosen["multiple"]
    median_norm = float(np.median(test.prefix.norms))
    alpha = multiple * median_norm
    as_t = lambda v: torch.as_tensor(v, dtype=torch.float32, device=lm.device)  # noqa: E731
    pools = [
        random_directions(lm.d_model, k=settings.random_directions, seed=s) for s in settings.random_seeds
    ]
    directions = [u, *np.concatenate(pools)]
    edits = [_addition(as_t(alpha * d)) for d in directions] + [_ablation(as_t(d)) for d in directions]
    r = readouts_batched(
        lm, test.prefix, tokens=tokens, edits=edits, progress=sub_progress(progress, 0.3, 0.85)
    )
    k_all = len(directions)
    adds = (r[:k_all] - test.prefix.base).mean(axis=1)
    after = np.array([auroc(row, test.labels) for row in r[k_all:]])
    drops = base_auroc - after
    split = lambda values: np.split(values, len(pools))  # noqa: E731
    addition = _against_random(float(adds[0]), split(adds[1:]), ADDITION_SD_FLOOR) | {
        "alpha": alpha,
        "multiple": multiple,
        "median_norm": median_norm,
    }
    timings["interventions"] = time.perf_counter() - start - sum(timings.values())
    n_pos, n_neg = int(test.labels.sum()), int((test.labels == 0).sum())
    step = 1.0 / (n_pos * n_neg)
    ablation = _against_random(float(drops[0]), split(drops[1:]), step) | {
        "auroc_before": base_auroc,
        "auroc_after": float(after[0]),
    }
    generated = generated_readout(
        lm,
        test,
        task,
        u=u,
        alpha=alpha,
        layer=layer,
        settings=settings,
        randoms=pools[0][: settings.generation_random],
    )
    timings["generated"] = time.perf_counter() - start - sum(timings.values())
    if baseline is not None:
        baseline["direction_over_prompt"] = (
            addition["effect"] / baseline["effect"] if baseline["effect"] > 0 else None
        )
    progress(1.0, "steer")
    return {
        "task": task.id,
        "judged": True,
        **head,
        "addition": addition,
        "ablation": ablation,
        "generated": generated,
        "utility_z": addition["utility_z"],
        "p_value": addition["p_value"],
        "n_random": addition["n_random"],
        "layer": layer,
        "seconds": time.perf_counter() - start,
    }


# --------------------------------------------------------------------------- one probe


def direction_utility(task_results: Sequence[dict[str, Any]]) -> float | None:
    """The mean task ``utility_z`` over the judged tasks; None when no task is judged."""
    zs = [r["utility_z"] for r in task_results if r.get("utility_z") is not None]
    return float(np.mean(zs)) if zs else None


def settings_dict(settings: SteeringSettings, n: int | None = None) -> dict[str, Any]:
    """The steering settings a result was measured under (stored beside it)."""
    from dataclasses import asdict

    return asdict(settings) | {"examples": n or settings.examples}


def steer_probe(
    probe: Probe | str | Path,
    *,
    registry: Registry,
    cache_dir: str | Path,
    tasks: Sequence[str] | None = None,
    n: int | None = None,
    device: str | None = None,
    protocol: Protocol | None = None,
    ignore_work_limit: bool = False,
    load: Callable[[str], LoadedModel] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Direction utility of one probe on its category's active tasks measured on its base model
    (or ``tasks``), as JSON.

    Measured under ``protocol`` (default: the registry's current one; its ``steering`` section
    and its float32 numerics). An ineligible probe (MLP, encoder) gives ``eligible: False`` and the
    reason, with no per-task numbers. ``load(model_id)``: a worker's keeper of loaded models.
    ``ignore_work_limit`` measures a task above the protocol's work limit all the same (the
    command line's exploration): the result then names no protocol, as it is not a board number.
    """
    # imported when called: tests replace evaluator.core.models.load_model (no model may load)
    from evaluator.core.models import load_model

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
    task_ids = (
        list(tasks)
        if tasks
        else [t.id for t in registry.active_tasks(probe.metadata.category) if t.measured_on(probe.base_model)]
    )
    head: dict[str, Any] = {
        "probe": {"name": probe.metadata.name, "base_model": probe.base_model, "layer": probe.layer},
        "protocol": protocol.id,
        "settings": settings_dict(settings, n),
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
                ignore_work_limit=ignore_work_limit,
                progress=sub_progress(progress, i / len(task_ids), (i + 1) / len(task_ids), f"{task_id} "),
            )
        )
    over = [r for r in results if r.get("work", {}).get("teramacs", 0) > settings.max_intervention_teramacs]
    if ignore_work_limit and over:
        head["protocol"] = None  # measured past the protocol's work limit: not a board number
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
