"""Train a TopK SAE on one layer of a base model, seeded and in plain torch.

The steps (:func:`train_sae`): the training documents in an order drawn from the seed; their
activations at the layer harvested a batch of contexts at a time
(:func:`evaluator.core.sae.activations.token_activations`); the first ``init_tokens`` of them fix
the scale (activations are multiplied by ``scale`` so that their mean squared norm is ``d_model``:
Gemma's residual norms reach ~2e4) and ``b_dec`` (the geometric median of that sample); then every
activation passes once through the shuffle buffer into Adam steps of ``batch_size`` tokens.

One step (:func:`_step`, looped by :func:`train_on_activations`): the reconstruction loss ‖x − x̂‖²
(summed over d_model, averaged over the batch) plus ``aux_coef`` times the auxiliary loss of the
dead latents (those not active in the last ``dead_window`` tokens): the ``aux_k`` dead latents with
the largest pre-activations reconstruct the main reconstruction's error, which pulls them back
towards the data.
Before Adam steps, each decoder row's gradient loses its component along the row; after, the rows
are renormalised to unit norm. The learning rate warms up linearly over the first
``warmup_fraction`` of the steps and decays linearly to 0 over the last ``decay_fraction``.

The scale is folded into the biases at the end (:meth:`TopKSae.folded`), so the trained SAE reads
raw activations. Given the seed, the result is the same bit for bit on one machine (the same torch
build and thread count); the seed draws the document order, the initial decoder and the shuffles.
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from evaluator.core.sae.activations import HarvestMeter, shuffled_batches, token_activations
from evaluator.core.sae.model import TopKSae, default_lr
from evaluator.errors import EvaluatorError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel


@dataclass(frozen=True)
class TrainConfig:
    """What an SAE's training depends on; None fields take the default for the shape."""

    width: int
    k: int
    tokens: int
    seed: int = 0
    context: int = 128  # tokens per context (the first position is not read)
    batch_size: int = 1024  # tokens per Adam step
    lr: float | None = None  # default: default_lr(width)
    aux_k: int | None = None  # default: d_model // 2, at most width
    aux_coef: float = 1 / 32
    dead_window: int | None = None  # tokens without firing before a latent counts as dead
    buffer_tokens: int = 1 << 18  # rows of the shuffle buffer
    contexts_per_batch: int = 16  # contexts per forward pass
    init_tokens: int = 4096  # the sample that fixes the scale and b_dec
    warmup_fraction: float = 0.05
    decay_fraction: float = 0.2

    def check(self) -> None:
        if not 1 <= self.k <= self.width:
            raise EvaluatorError(f"k must be in 1..width ({self.width}), got {self.k}")
        if self.tokens < self.batch_size:
            raise EvaluatorError(f"--tokens {self.tokens} is less than one batch ({self.batch_size})")
        if self.buffer_tokens < 2 * self.batch_size:
            raise EvaluatorError("the shuffle buffer must hold at least two batches")
        if self.seed < 0:
            raise EvaluatorError("the seed must be non-negative")

    def resolved(self, d_model: int) -> TrainConfig:
        """This config with every default filled in for ``d_model`` (what the card records)."""
        return TrainConfig(
            **{
                **asdict(self),
                "lr": self.lr if self.lr is not None else default_lr(self.width),
                "aux_k": self.aux_k if self.aux_k is not None else min(self.width, max(self.k, d_model // 2)),
                "dead_window": self.dead_window
                if self.dead_window is not None
                else min(200_000, max(self.batch_size, self.tokens // 4)),
            }
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TrainProgress:
    """One step's state, handed to the progress callback."""

    step: int
    steps: int
    tokens: int  # trained on so far
    tokens_total: int  # asked for
    harvested: int  # harvested so far (the shuffle buffer runs ahead of the training)
    mse: float  # this batch's ‖x − x̂‖² per token (scaled activations)
    fve: float  # running fraction of variance explained (scaled activations)
    dead: int  # latents not active in the last dead_window tokens
    harvest_tokens_per_s: float
    train_tokens_per_s: float
    elapsed_s: float


@dataclass
class TrainedSae:
    """The trained SAE (reading raw activations), the scale it was trained at and what it cost."""

    sae: TopKSae
    scale: float
    config: TrainConfig
    stats: dict[str, Any] = field(default_factory=dict)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def geometric_median(points: Any, iterations: int = 64) -> Any:
    """The geometric median "d" of ``points`` "n d" (Weiszfeld's iteration, in float64)."""
    x = points.double()
    y = x.mean(dim=0)
    for _ in range(iterations):
        weights = 1.0 / (x - y).norm(dim=1).clamp_min(1e-9)
        nxt = (weights[:, None] * x).sum(dim=0) / weights.sum()
        if float((nxt - y).norm()) <= 1e-7 * max(float(y.norm()), 1.0):
            return nxt.float()
        y = nxt
    return y.float()


def lr_factor(step: int, steps: int, config: TrainConfig) -> float:
    """The schedule: linear warm-up, constant, linear decay to 0 over the last steps."""
    warm = max(1, int(steps * config.warmup_fraction))
    decay = max(1, int(steps * config.decay_fraction))
    if step < warm:
        return (step + 1) / warm
    return min(1.0, (steps - step) / decay)


def _take_initial(blocks: Iterator[Any], tokens: int) -> tuple[list[Any], Any]:
    """The first blocks, until ``tokens`` rows are in hand, and their rows joined."""
    import torch

    taken: list[Any] = []
    rows = 0
    for block in blocks:
        taken.append(block)
        rows += int(block.shape[0])
        if rows >= tokens:
            break
    if not taken:
        raise EvaluatorError("no activations: the corpus gave no context of the requested length")
    return taken, torch.cat(taken)[:tokens]


def _chain(first: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
    yield from first
    yield from rest


@dataclass
class _Run:
    """A training run's counters, and the progress it reports."""

    config: TrainConfig
    steps: int
    meter: HarvestMeter | None
    progress: Callable[[TrainProgress], None] | None
    start: float = field(default_factory=time.perf_counter)
    step: int = 0
    tokens: int = 0
    train_s: float = 0.0
    mse: float = 0.0
    dead: int = 0
    err_sum: float = 0.0  # decayed sums of ‖x − x̂‖² and ‖x − batch mean‖²: the running FVE
    var_sum: float = 0.0
    curve: list[dict[str, float]] = field(default_factory=list)

    @property
    def fve(self) -> float:
        return 1.0 - self.err_sum / self.var_sum if self.var_sum > 0 else 0.0

    def report(self) -> None:
        if self.progress is None:
            return
        self.progress(
            TrainProgress(
                step=self.step,
                steps=self.steps,
                tokens=self.tokens,
                tokens_total=self.config.tokens,
                harvested=self.meter.tokens if self.meter is not None else self.tokens,
                mse=self.mse,
                fve=self.fve,
                dead=self.dead,
                harvest_tokens_per_s=self.meter.tokens_per_s if self.meter is not None else 0.0,
                train_tokens_per_s=self.tokens / self.train_s if self.train_s > 0 else 0.0,
                elapsed_s=time.perf_counter() - self.start,
            )
        )

    def reporting(self, blocks: Iterator[Any]) -> Iterator[Any]:
        """``blocks``, reporting after each: the harvest fills the buffer before the first step."""
        for block in blocks:
            yield block
            self.report()


def _step(sae: TopKSae, optimiser: Any, x: Any, since_fired: Any, config: TrainConfig, run: _Run) -> None:
    """One Adam step on the scaled batch ``x``; the dead-latent counters and ``run`` updated."""
    import torch
    import torch.nn.functional as F

    assert config.aux_k is not None and config.dead_window is not None
    tick = time.perf_counter()
    pre = sae.pre_activations(x)
    values, indices = pre.topk(config.k, dim=-1)
    values = torch.relu(values)
    error = x - sae.decode_topk(values, indices)
    mse = error.pow(2).sum(dim=-1).mean()
    loss = mse
    dead = since_fired >= config.dead_window
    run.dead = int(dead.sum())
    if run.dead and config.aux_coef > 0:
        aux_values, aux_indices = pre.masked_fill(~dead, float("-inf")).topk(
            min(config.aux_k, run.dead), dim=-1
        )
        aux_hat = F.embedding_bag(
            aux_indices, sae.W_dec, per_sample_weights=torch.relu(aux_values), mode="sum"
        )
        loss = loss + config.aux_coef * (error.detach() - aux_hat).pow(2).sum(dim=-1).mean()
    optimiser.zero_grad(set_to_none=True)
    loss.backward()
    sae.remove_parallel_grad_()
    optimiser.step()
    sae.normalize_decoder_()
    with torch.no_grad():
        fired = torch.zeros(config.width, dtype=torch.bool)
        fired[indices[values > 0]] = True
        since_fired += x.shape[0]
        since_fired[fired] = 0
        run.err_sum = 0.99 * run.err_sum + float(error.pow(2).sum())
        run.var_sum = 0.99 * run.var_sum + float((x - x.mean(dim=0)).pow(2).sum())
    run.mse = float(mse.detach())
    run.train_s += time.perf_counter() - tick
    run.step += 1
    run.tokens += int(x.shape[0])
    if run.step % max(1, run.steps // 50) == 1 or run.tokens >= config.tokens:
        run.curve.append({"tokens": run.tokens, "mse": run.mse, "fve": run.fve})


def train_on_activations(
    blocks: Iterable[Any],
    *,
    d_model: int,
    config: TrainConfig,
    progress: Callable[[TrainProgress], None] | None = None,
    meter: HarvestMeter | None = None,
) -> TrainedSae:
    """Train on activation blocks "n d_model" (raw, float32): the trainer without the model, so a
    test can feed it synthetic activations. ``meter``: the harvest's, for the progress line."""
    import torch

    config.check()
    config = config.resolved(d_model)
    assert config.lr is not None
    run = _Run(
        config=config, steps=math.ceil(config.tokens / config.batch_size), meter=meter, progress=progress
    )
    generator = torch.Generator().manual_seed(config.seed)
    stream = iter(blocks)
    first, sample = _take_initial(stream, config.init_tokens)
    scale = math.sqrt(d_model / float(sample.double().pow(2).sum(dim=1).mean()))
    sae = TopKSae.initial(
        d_model, config.width, config.k, generator=generator, b_dec=geometric_median(sample * scale)
    ).requires_grad_()
    optimiser = torch.optim.Adam(sae.parameters(), lr=config.lr)
    since_fired = torch.zeros(config.width, dtype=torch.long)
    batches = shuffled_batches(
        run.reporting(_chain(first, stream)),
        capacity=config.buffer_tokens,
        batch_size=config.batch_size,
        generator=generator,
    )
    for raw in batches:
        for group in optimiser.param_groups:
            group["lr"] = config.lr * lr_factor(min(run.step, run.steps - 1), run.steps, config)
        _step(sae, optimiser, raw * scale, since_fired, config, run)
        run.report()
    assert config.dead_window is not None
    stats: dict[str, Any] = {
        "tokens": run.tokens,
        "steps": run.step,
        "train_seconds": round(run.train_s, 3),
        "train_tokens_per_s": round(run.tokens / run.train_s, 1) if run.train_s > 0 else None,
        "wall_seconds": round(time.perf_counter() - run.start, 3),
        "dead_at_end": int((since_fired >= config.dead_window).sum()),
        "fve_running": round(run.fve, 6),
        "curve": run.curve,
    }
    if meter is not None:
        stats |= {
            "harvest_seconds": round(meter.seconds, 3),
            "harvest_tokens_per_s": round(meter.tokens_per_s, 1),
            "harvest_contexts": meter.contexts,
        }
    stats["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return TrainedSae(sae=sae.folded(scale), scale=scale, config=config, stats=stats)


def document_order(documents: Sequence[str], seed: int) -> list[str]:
    """The training documents in the order drawn from ``seed``."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(len(documents))
    return [documents[int(i)] for i in order]


def train_sae(
    lm: LoadedModel,
    documents: Sequence[str],
    *,
    layer: int,
    config: TrainConfig,
    progress: Callable[[TrainProgress], None] | None = None,
) -> TrainedSae:
    """Harvest ``config.tokens`` activations at ``layer`` from ``documents`` (in the seed's order)
    and train on them as they stream; too few documents for the tokens asked is refused."""
    config.check()
    if not 1 <= layer <= lm.n_layers:
        raise EvaluatorError(f"layer {layer} out of range for {lm.id}: 1..{lm.n_layers}")
    meter = HarvestMeter()
    blocks = token_activations(
        lm,
        document_order(documents, config.seed),
        layer=layer,
        context=config.context,
        tokens=config.tokens,
        contexts_per_batch=config.contexts_per_batch,
        meter=meter,
    )
    trained = train_on_activations(blocks, d_model=lm.d_model, config=config, progress=progress, meter=meter)
    if meter.tokens < config.tokens:
        raise EvaluatorError(
            f"the corpus gave {meter.tokens} tokens of {config.context}-token contexts; {config.tokens} were asked"
        )
    return trained
