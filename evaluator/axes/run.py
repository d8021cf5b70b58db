"""One evaluation run and one split's measurement, the steps a worker takes one at a time.

:func:`execute_run`: one probe × task × split × base model → per-example ids, labels, s(x), p(x),
the verified split hash, the activation-cache key, timings. :func:`measure_split`: the per-task
step both ``python -m evaluator evaluate`` and the board's workers take (the run, and on the test
split the baselines and, when asked, the latency); :class:`MeasureSetup` is what its runs share.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator import CODE_VERSION
from evaluator.axes.baselines import BaselineResult, baselines
from evaluator.axes.latency import measure_latency
from evaluator.core.activations import ActivationCache, read_split, split_activations
from evaluator.core.harvest import HarvestConfig, render_prompts
from evaluator.core.probes import Probe, load_probe
from evaluator.data.registry.load import Registry, load_registry
from evaluator.errors import EvaluatorError
from evaluator.metrics.measure import ScoredExamples
from evaluator.metrics.metrics import auroc
from evaluator.metrics.results import Progress, fields_dict, no_progress, sub_progress

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.axes.latency import LatencyResult
    from evaluator.core.activations import SplitActivations
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.protocols import Protocol


def as_registry(registry: Registry | str | Path | None) -> Registry:

    return registry if isinstance(registry, Registry) else load_registry(registry)


def as_probe(probe: Probe | str | Path, registry: Registry) -> Probe:

    return probe if isinstance(probe, Probe) else load_probe(probe, registry=registry)


@dataclass
class RunResult:
    """One evaluation run: probe version × task × split × base model."""

    task_id: str
    split: str
    model_id: str
    probe_name: str
    probe_sha256: str
    layer: int
    position: str
    input: str
    output: str
    split_sha256: str  # re-hashed from the bytes that were read; matched tasks.yaml
    cache_key: str
    cache_hit: bool
    n: int
    examples: ScoredExamples
    timings: dict[str, float]  # seconds: load_model, activations, score, total
    model: dict[str, Any]  # LoadedModel.describe(): weights/tokenizer hashes, device, dtype
    config: dict[str, Any]  # harvest config
    code_version: str = CODE_VERSION
    seed: int | None = None  # the probe recipe's seed, when it has one
    protocol: str | None = None  # the measurement protocol followed (None: exploration)
    environment: dict[str, Any] = field(default_factory=dict)  # evaluator.core.environment

    def to_dict(self, *, include_examples: bool = True) -> dict[str, Any]:
        out = fields_dict(self, skip=("examples",))
        if include_examples:
            out["examples"] = self.examples.to_records()
        return out


def protocol_followed(lm: LoadedModel, config: HarvestConfig, registry: Registry) -> str | None:
    """The protocol a run follows: the model's numerics (dtype, device) and the harvest settings
    that change vectors (max length, truncation and padding sides) must both be the protocol's."""
    if lm.protocol_id is None or lm.protocol_id not in registry.protocols:
        return None
    protocol = registry.protocol(lm.protocol_id)
    harvest = (config.max_length, config.truncation_side, config.padding_side)
    if harvest != (protocol.max_length, protocol.truncation_side, protocol.padding_side):
        return None
    return protocol.id


def harvest_config_default(registry: Registry) -> HarvestConfig:
    """The current protocol's harvest settings."""

    return HarvestConfig.from_protocol(registry.protocol())


def _score(probe: Probe, acts: SplitActivations) -> ScoredExamples:
    scores = probe.score(acts.X)
    return ScoredExamples(
        ids=list(acts.ids), labels=acts.labels.copy(), scores=scores, probs=probe.probability(scores)
    )


def _run_with_activations(
    probe: Probe,
    *,
    task_id: str,
    split: str,
    registry: Registry,
    cache_dir: str | Path,
    lm: LoadedModel | None,
    device: str | None,
    dtype: str | None,
    harvest_config: HarvestConfig | None,
    progress: Progress,
    split_file: str | Path | None = None,
    split_sha256: str | None = None,
    protocol: Protocol | None = None,
) -> tuple[RunResult, SplitActivations, LoadedModel]:
    # imported when called: tests replace evaluator.core.models.load_model (no model may load)
    from evaluator.core.models import load_model

    start = time.perf_counter()
    config = harvest_config or harvest_config_default(registry)
    progress(0.0, "load model")
    if lm is None:
        lm = load_model(
            probe.base_model,
            registry=registry,
            cache_dir=cache_dir,
            device=device,
            dtype=dtype,
            protocol=protocol,
        )
    elif lm.id != probe.base_model:
        raise EvaluatorError(f"probe {probe.metadata.name!r} reads {probe.base_model}, not {lm.id}")
    loaded = time.perf_counter()
    acts = split_activations(
        lm,
        registry,
        task_id,
        split,
        layers=[probe.layer],
        position=probe.metadata.position,
        input_kind=probe.metadata.input,
        cache=ActivationCache(cache_dir),
        config=config,
        progress=sub_progress(progress, 0.05, 0.95),
        split_file=split_file,
        split_sha256=split_sha256,
    )[probe.layer]
    harvested = time.perf_counter()
    examples = _score(probe, acts)
    done = time.perf_counter()
    progress(1.0, "scored")
    recipe = probe.metadata.recipe or {}
    result = RunResult(
        task_id=task_id,
        split=split,
        model_id=lm.id,
        probe_name=probe.metadata.name,
        probe_sha256=probe.sha256,
        layer=probe.layer,
        position=probe.metadata.position,
        input=probe.metadata.input,
        output=probe.metadata.output,
        split_sha256=acts.split_sha256,
        cache_key=acts.cache_key,
        cache_hit=acts.cache_hit,
        n=len(acts.ids),
        examples=examples,
        timings={
            "load_model": loaded - start,
            "activations": harvested - loaded,
            "score": done - harvested,
            "total": done - start,
        },
        model=lm.describe(),
        config=config.to_dict(),
        seed=recipe.get("seed"),
        protocol=protocol_followed(lm, config, registry),
        environment=lm.environment(),
    )
    result.environment["protocol"] = result.protocol
    return result, acts, lm


def execute_run(
    probe: Probe | str | Path,
    *,
    task_id: str,
    split: str,
    registry: Registry | str | Path | None,
    cache_dir: str | Path,
    model_id: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    harvest_config: HarvestConfig | None = None,
    progress: Progress | None = None,
    split_file: str | Path | None = None,
    split_sha256: str | None = None,
    lm: LoadedModel | None = None,
) -> RunResult:
    """Execute ONE evaluation run and return its per-example results.

    ``probe``: a loaded :class:`~evaluator.core.probes.Probe` (see ``probe_from_tensors``) or a probe
    directory / artifact path. ``model_id`` defaults to the probe's base model and must equal
    it. The split file is re-hashed against tasks.yaml first (SplitHashMismatch on a change).
    A split outside tasks.yaml (a quarterly holdout) is given as ``split_file`` + the
    ``split_sha256`` recorded when it was minted; ``split`` then only names it (e.g. "holdout").
    ``progress(fraction, step)`` is called as the run advances. ``lm``: an already loaded base
    model (a worker keeps models between runs); by default it is loaded (and memoized).
    """
    reg = as_registry(registry)
    p = as_probe(probe, reg)
    if model_id is not None and model_id != p.base_model:
        raise EvaluatorError(f"probe {p.metadata.name!r} reads {p.base_model}; it cannot run on {model_id}")
    result, _, _ = _run_with_activations(
        p,
        task_id=task_id,
        split=split,
        registry=reg,
        cache_dir=cache_dir,
        lm=lm,
        device=device,
        dtype=dtype,
        harvest_config=harvest_config,
        progress=progress or no_progress,
        split_file=split_file,
        split_sha256=split_sha256,
    )
    return result


@dataclass(frozen=True)
class MeasureSetup:
    """What every step of one probe's evaluation shares (the CLI builds one per probe, a worker
    one per run)."""

    registry: Registry
    cache_dir: str | Path
    device: str | None
    dtype: str | None
    config: HarvestConfig
    protocol: Protocol | None = None  # given: the protocol is enforced (a board number)

    def run(self, probe: Probe, task_id: str, split: str, lm: LoadedModel | None, progress: Progress):
        return _run_with_activations(
            probe,
            task_id=task_id,
            split=split,
            registry=self.registry,
            cache_dir=self.cache_dir,
            lm=lm,
            device=self.device,
            dtype=self.dtype,
            harvest_config=self.config,
            progress=progress,
            protocol=self.protocol,
        )


@dataclass
class SplitMeasurement:
    """One probe on one split of one task (:func:`measure_split`): the run, the activations it
    read and, on the test split with ``extras``, the baselines at the probe's layer and, when
    asked, the probe's latency."""

    run: RunResult
    activations: SplitActivations
    lm: LoadedModel
    baselines: BaselineResult | None = None
    latency: LatencyResult | None = None


def measure_split(
    probe: Probe,
    *,
    task_id: str,
    split: str,
    setup: MeasureSetup,
    lm: LoadedModel | None,
    progress: Progress,
    extras: bool = False,
    train_activations: SplitActivations | None = None,
    latency: bool = False,
    latency_reps: int | None = None,
) -> SplitMeasurement:
    """Measure one probe on one split of one task: the one per-task step that both
    ``python -m evaluator evaluate`` (:func:`evaluate_probe`, every split of a task in turn) and
    the board's workers (one run per split, ``leaderboard.runner``) take.

    ``extras`` (the test split): the random-direction and diff-of-means baselines on the same
    activations, the train split's read from ``train_activations`` when the caller holds them,
    else through the activation cache; ``latency``: the probe's latency on the model's device
    with the task's median-length test prompt (``latency_reps``: the default when None).
    """

    run, acts, lm = setup.run(probe, task_id, split, lm, sub_progress(progress, 0.0, 0.7 if extras else 1.0))
    out = SplitMeasurement(run=run, activations=acts, lm=lm)
    if extras:
        train = train_activations
        if train is None:
            train = split_activations(
                lm,
                setup.registry,
                task_id,
                "train",
                layers=[probe.layer],
                position=probe.metadata.position,
                input_kind=probe.metadata.input,
                cache=ActivationCache(setup.cache_dir),
                config=setup.config,
                progress=sub_progress(progress, 0.7, 0.85, "baseline train "),
            )[probe.layer]
        probe_auroc = auroc(run.examples.scores, run.examples.labels)
        out.baselines = baselines(train, acts, probe_auroc=probe_auroc)
        if latency:
            progress(0.9, "latency")
            prompt = median_length_prompt(
                setup.registry, task_id, probe.metadata.input, model=probe.base_model
            )
            reps = {} if latency_reps is None else {"reps": latency_reps}
            out.latency = measure_latency(probe, lm, prompt=prompt, **reps)
        progress(1.0, "scored")
    return out


def median_length_prompt(
    registry: Registry, task_id: str, input_kind: str, *, model: str | None = None
) -> str:
    """A representative prompt (median text length of the test split) for the forward timing.
    ``model``: whose own test split, for an on-policy task."""

    rows = read_split(registry, task_id, "test", model=model)
    order = np.argsort([len(t) for t in rows.texts], kind="stable")
    text = rows.texts[int(order[len(order) // 2])]
    return render_prompts(registry.task(task_id), [text], input_kind)[0]
