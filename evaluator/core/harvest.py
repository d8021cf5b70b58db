"""Harvest residual-stream activations: prompts rendered from a task's templates, one forward pass.

The harvester runs the bare base model (no LM head) on length-sorted, right-padded batches and
stops the forward pass right after the deepest requested layer (:func:`evaluator.core.hooks.capture`
with ``stop``), so the remaining blocks never run. Layer ``0`` is the embedding output; layer ``L``
is the raw output of block ``L - 1`` (for ``L = n_layers`` too: the final norm is *not* applied,
unlike ``hidden_states[-1]`` in transformers).

Positions (per prompt):

- ``last_token``: the last non-padding token.
- ``mean``: the mean over the prompt's non-padding tokens, excluding the special tokens the
  tokenizer adds itself (Gemma's ``<bos>``, BERT's ``[CLS]``/``[SEP]``): Gemma's BOS residual
  has a norm ~100× the others and would otherwise dominate every mean.
- ``max``: the per-dimension maximum over the same tokens as ``mean`` (pads and the tokenizer's
  own special tokens never win a dimension). Like ``mean``, it does not hang on one token: on a
  decoder, text added after the content changes it only where the added tokens exceed the content's
  values.

Activations are returned as float32, whatever the compute dtype. A change to the vectors this
module produces bumps ``evaluator.core.activations.HARVESTER_VERSION`` (part of every cache key).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.core import hooks
from evaluator.core.applicability import INPUTS, POOLED_POSITIONS, POSITIONS
from evaluator.errors import EvaluatorError, RegistryError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.load import Registry
    from evaluator.data.registry.protocols import Protocol
    from evaluator.data.registry.tasks import TaskSpec

#: ``progress(fraction in [0, 1], step name)``; the workers turn it into run progress.
Progress = Callable[[float, str], None]


def _no_progress(fraction: float, step: str) -> None:  # noqa: ARG001 - the default callback
    return None


@dataclass(frozen=True)
class HarvestConfig:
    """How prompts are cut and batched. ``max_length`` changes the vectors (it is in the cache
    key); the batch sizes only change speed (within the protocol's tolerance). The defaults are
    protocol p1's harvest settings (registry/protocols/p1.yaml; :meth:`from_protocol`)."""

    max_length: int = 512  # tokens kept per prompt (the end is kept: left truncation)
    batch_size: int = 32  # at most this many prompts per forward
    max_batch_tokens: int = 4096  # at most this many padded tokens per forward
    truncation_side: str = "left"  # what the tokenizer is set to (evaluator.core.models)
    padding_side: str = "right"

    @classmethod
    def from_protocol(cls, protocol: Protocol, **overrides: int) -> HarvestConfig:
        """The protocol's harvest settings (``overrides``: e.g. ``batch_size`` for a test)."""
        values: dict[str, Any] = {
            "max_length": protocol.max_length,
            "batch_size": protocol.batch_size,
            "max_batch_tokens": protocol.max_batch_tokens,
            "truncation_side": protocol.truncation_side,
            "padding_side": protocol.padding_side,
        }
        return cls(**(values | overrides))

    def to_dict(self) -> dict[str, int | str]:
        return {
            "max_length": self.max_length,
            "batch_size": self.batch_size,
            "max_batch_tokens": self.max_batch_tokens,
            "truncation_side": self.truncation_side,
            "padding_side": self.padding_side,
        }


# --------------------------------------------------------------------------- prompts


def render(template: str, text: str) -> str:
    """Apply a task template: ``{text}`` is replaced, other braces are left as they are."""
    return template.replace("{text}", text)


def render_prompts(task: TaskSpec, texts: Sequence[str], input_kind: str) -> list[str]:
    """``single``: one prompt per text. ``contrast_pair``: 2n prompts, all x⁺ then all x⁻."""
    if input_kind == "single":
        return [render(task.templates["single"], t) for t in texts]
    if input_kind == "contrast_pair":
        pair = task.templates.get("contrast_pair")
        if not pair:
            raise EvaluatorError(
                f"task {task.id} has no contrast_pair template; contrast-pair probes cannot run on it"
            )
        return [render(pair[0], t) for t in texts] + [render(pair[1], t) for t in texts]
    raise EvaluatorError(f"unknown input {input_kind!r}; accepted: {', '.join(INPUTS)}")


def run_inputs_check(
    registry: Registry,
    task_id: str,
    split: str | None,
    *,
    model_id: str,
    n_layers: int,
    layers: Sequence[int],
    position: str,
    input_kind: str,
) -> None:
    """Refuse, before any model is loaded or file read, a run that could not start: an unknown
    position or input, a task without the template the input needs, no ``split`` file for this
    model (None: a split given as a file, e.g. a holdout), a layer the model does not have.
    :func:`split_activations` calls it first; ``evaluator.core.applicability`` must agree with it."""
    _check_positions([position])
    task = registry.task(task_id)
    task.template_hash(input_kind)  # an unknown template: UnknownNameError, saying what is accepted
    render_prompts(task, [""], input_kind)
    if split is not None and task.split_spec(split, model_id) is None:
        where = f" for base model {model_id}" if task.on_policy else ""
        raise RegistryError(f"task {task_id} has no {split!r} split{where}")
    for layer in layers:
        if not 0 <= layer <= n_layers:
            raise EvaluatorError(f"layer {layer} out of range for {model_id}: 0..{n_layers}")


def _check_positions(positions: Sequence[str]) -> None:
    for p in positions:
        if p not in POSITIONS:
            raise EvaluatorError(f"unknown position {p!r}; accepted: {', '.join(POSITIONS)}")


# --------------------------------------------------------------------------- the forward pass


def forward_until(
    lm: LoadedModel,
    batch: dict[str, Any],
    layers: Sequence[int],
    *,
    consume: Callable[[int, Any], None] | None = None,
) -> dict[int, Any]:
    """Run the base model on one tokenized batch and return {layer: "b t d_model" tensor}.

    Blocks after ``max(layers)`` never run. The tensors are in the compute dtype, on the device.
    ``consume(layer, hidden)``: called as each layer is reached, instead of keeping its tensor
    (the result is then empty), so a harvest of every layer never holds all their hidden states.
    """
    import torch

    wanted = sorted(set(layers))
    for layer in wanted:
        hooks.module_at(lm, layer)  # an out-of-range layer is refused before the lock is taken
    reached: set[int] = set()

    def reach(layer: int, hidden: Any) -> None:
        reached.add(layer)
        if consume is not None:
            consume(layer, hidden)

    keep = None if consume is None else reach
    with lm.lock, hooks.capture(lm, wanted, consume=keep, stop=True) as captured, torch.inference_mode():
        lm.model(**batch, use_cache=False)
    missing = [layer for layer in wanted if layer not in captured and layer not in reached]
    if missing:  # pragma: no cover - would mean the architecture skipped a block
        raise EvaluatorError(f"{lm.id}: layers {missing} were not reached by the forward pass")
    return captured


def span_max(hidden: Any, outside: Any) -> Any:
    """The per-dimension maximum "b d" of ``hidden`` "b t d" over the positions where ``outside``
    "b t" (bool) is False: those are filled with -inf first, so a pad or a special token never wins.
    Differentiable in ``hidden`` (the gradient reaches the winning position of each dimension), as
    the attack's reading of a ``max`` probe (``evaluator.axes.attack.probe_read``) must be."""
    return hidden.masked_fill(outside[..., None], float("-inf")).amax(dim=1)


def _token_batches(lengths: np.ndarray, config: HarvestConfig) -> list[np.ndarray]:
    """Indices of prompts grouped longest-first so each batch pads little."""
    order = np.argsort(-lengths, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    while start < order.size:
        longest = int(lengths[order[start]])
        fit = max(1, min(config.batch_size, config.max_batch_tokens // max(longest, 1)))
        batches.append(order[start : start + fit])
        start += fit
    return batches


def harvest(
    lm: LoadedModel,
    prompts: Sequence[str],
    *,
    layers: Sequence[int],
    positions: Sequence[str] = ("last_token",),
    config: HarvestConfig | None = None,
    progress: Progress | None = None,
) -> dict[tuple[int, str], np.ndarray]:
    """Activations of ``prompts`` at every (layer, position): {(layer, position): "n d_model"} fp32.

    One forward per batch serves every requested layer and position; each layer is pooled as the
    forward reaches it, so asking for every layer holds one layer's hidden states at a time.
    """
    import torch

    config = config or HarvestConfig()
    progress = progress or _no_progress
    _check_positions(positions)
    n = len(prompts)
    out = {(layer, pos): np.empty((n, lm.d_model), dtype=np.float32) for layer in layers for pos in positions}
    if n == 0:
        return out
    max_length = min(config.max_length, lm.max_length)
    sides = (lm.tokenizer.truncation_side, lm.tokenizer.padding_side)
    if sides != (config.truncation_side, config.padding_side):
        raise EvaluatorError(
            f"{lm.id}: the tokenizer truncates on the {sides[0]} and pads on the {sides[1]};"
            f" the harvest settings say {config.truncation_side} / {config.padding_side}"
        )
    encoded = lm.tokenizer(
        list(prompts),
        truncation=True,
        max_length=max_length,
        return_special_tokens_mask=any(p in POOLED_POSITIONS for p in positions),
        return_attention_mask=False,
    )
    ids: list[list[int]] = encoded["input_ids"]
    special: list[list[int]] | None = encoded.get("special_tokens_mask")
    lengths = np.array([len(x) for x in ids])
    if (lengths == 0).any():
        raise EvaluatorError("a prompt tokenized to zero tokens")
    pad_id = lm.tokenizer.pad_token_id
    done = 0
    progress(0.0, "harvest")
    for rows in _token_batches(lengths, config):
        width = int(lengths[rows].max())
        input_ids = torch.full((rows.size, width), pad_id, dtype=torch.long)
        mask = torch.zeros((rows.size, width), dtype=torch.long)
        pool = torch.zeros((rows.size, width), dtype=torch.float32)  # weights of the mean (0: not pooled)
        for b, i in enumerate(rows):
            length = int(lengths[i])
            input_ids[b, :length] = torch.tensor(ids[i])
            mask[b, :length] = 1
            keep = 1 - torch.tensor(special[i], dtype=torch.float32) if special is not None else None
            pool[b, :length] = keep if keep is not None and keep.sum() > 0 else 1.0  # all-special: keep all
        batch = {"input_ids": input_ids.to(lm.device), "attention_mask": mask.to(lm.device)}
        last = torch.as_tensor(lengths[rows] - 1, device=lm.device)
        weights = (pool / pool.sum(1, keepdim=True)).to(lm.device)  # "b t", rows sum to 1
        outside = (pool <= 0).to(lm.device)  # "b t": pads and special tokens, never pooled

        def pool_layer(
            layer: int,
            h: Any,
            rows: np.ndarray = rows,
            last: Any = last,
            weights: Any = weights,
            outside: Any = outside,
        ) -> None:
            h = h.float()
            for pos in positions:
                if pos == "last_token":
                    vec = h[torch.arange(rows.size, device=lm.device), last]
                elif pos == "max":
                    vec = span_max(h, outside)
                else:
                    vec = torch.einsum("btd,bt->bd", h, weights)
                out[(layer, pos)][rows] = vec.cpu().numpy()

        forward_until(lm, batch, layers, consume=pool_layer)
        done += rows.size
        progress(done / n, "harvest")
    return out
