"""Evaluation that runs models: one run, baselines, reproduction, and the whole probe.

The pieces the web pipeline calls separately (the worker side; metrics from stored scores, which
need no model, live in :mod:`evaluator.metrics.measure`):

1. :func:`execute_run` — one probe × task × split × base model → per-example ids, labels,
   s(x), p(x), the verified split hash, the activation-cache key, timings.
2. :func:`evaluator.metrics.measure.task_metrics` — pure: stored per-example results → per-task metrics.
3. :func:`evaluator.axes.latency.measure_latency` — probe-only latency (+ model forward, not scored).
4. :func:`baselines` — random direction and diff-of-means at the same layer (lift).
5. :func:`evaluator.axes.transfer.cross_model_transfer` — per-target Pearson of ablation effects.
6. :func:`reproduction_check` — rerun the recipe: cosine of directions, AUROC difference.
7. :func:`evaluate_probe` — all of the above for the CLI, with the ProbeScore.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator import CODE_VERSION
from evaluator.axes.latency import measure_latency
from evaluator.axes.transfer import cross_model_transfer
from evaluator.core.activations import (
    ActivationCache,
    HarvestConfig,
    read_split,
    render_prompts,
    split_activations,
)
from evaluator.core.applicability import ProbeReads, applicability, applicable_tasks
from evaluator.core.probes import Probe, load_probe, probe_from_tensors
from evaluator.core.recipes import Recipe, fit_recipe, train_recipe
from evaluator.data.registry import EVAL_AWARENESS, Registry, load_registry
from evaluator.errors import EvaluatorError, InfrastructureError, RegistryError
from evaluator.metrics.measure import (
    ScoredExamples,
    TaskMetrics,
    aggregate_measurements,
    declared_gaps,
    task_metrics,
)
from evaluator.metrics.metrics import auroc, pearson
from evaluator.metrics.results import Progress, fields_dict, jsonable, no_progress, sub_progress
from evaluator.metrics.scoring import probe_score

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.axes.latency import LatencyResult
    from evaluator.axes.transfer import TransferResult
    from evaluator.core.activations import SplitActivations
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry import Protocol, ProtocolTolerances

log = logging.getLogger(__name__)

RANDOM_BASELINE_DIRECTIONS = 10
BASELINE_SEED = 0
#: The reproduced mark is judged by the measurement protocol's tolerances (registry/protocols/,
#: ``tolerances.reproduction``): the re-fit's scores on the test rows, not its weight vector.


# --------------------------------------------------------------------------- inputs


def as_registry(registry: Registry | str | Path | None) -> Registry:

    return registry if isinstance(registry, Registry) else load_registry(registry)


def as_probe(probe: Probe | str | Path, registry: Registry) -> Probe:

    return probe if isinstance(probe, Probe) else load_probe(probe, registry=registry)


# --------------------------------------------------------------------------- 1. one run


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


# --------------------------------------------------------------------------- 2. metrics (pure)


# --------------------------------------------------------------------------- 4. baselines


@dataclass(frozen=True)
class BaselineResult:
    """Automatic baselines at the probe's layer/position/input, on the same test split."""

    random_direction_auroc: float  # mean over RANDOM_BASELINE_DIRECTIONS seeded directions
    random_direction_aurocs: list[float]
    diff_of_means_auroc: float  # diff-of-means fit on the train split
    probe_auroc: float
    lift_over_random: float
    lift_over_diff_of_means: float
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return fields_dict(self)


def baselines(
    train: SplitActivations,
    test: SplitActivations,
    *,
    probe_auroc: float,
    seed: int = BASELINE_SEED,
    n_random: int = RANDOM_BASELINE_DIRECTIONS,
) -> BaselineResult:
    """Random directions and diff-of-means on the same activations as the probe."""

    rng = np.random.default_rng(seed)
    directions = rng.standard_normal((n_random, test.X.shape[1]))
    random_aurocs = [auroc(test.X @ d, test.labels) for d in directions]
    recipe = Recipe(
        method="diff_of_means",
        task=train.task_id,
        layer=train.layer,
        position=train.position,
        input=train.input_kind,
        template=train.input_kind,
        seed=seed,
    )
    t = fit_recipe(recipe, train.X, train.labels)
    dom = auroc(test.X @ t["weight"].astype(np.float64), test.labels)
    rand = float(np.mean(random_aurocs))
    return BaselineResult(
        random_direction_auroc=rand,
        random_direction_aurocs=random_aurocs,
        diff_of_means_auroc=dom,
        probe_auroc=probe_auroc,
        lift_over_random=probe_auroc - rand,
        lift_over_diff_of_means=probe_auroc - dom,
        seed=seed,
    )


# --------------------------------------------------------------------------- 6. reproduction


@dataclass(frozen=True)
class ReproductionResult:
    task_id: str
    method: str
    cosine: float | None  # of the raw-space directions (None for MLP probes): information only
    auroc_submitted: float  # on the recipe task's test split
    auroc_refit: float
    auroc_diff: float  # submitted − refit
    score_pearson: float  # of s(x) on the test split, submitted vs refit
    score_spearman: float
    reproduced: bool
    criteria: str  # the rule in words (shown on the probe page)
    protocol: str | None  # the protocol whose tolerances judged it
    train_cache_key: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return fields_dict(self)


@dataclass(frozen=True)
class ReproductionVerdict:
    """The judgement of a re-fit by its scores on the same test rows as the artifact's."""

    reproduced: bool
    score_pearson: float
    score_spearman: float
    auroc_submitted: float
    auroc_refit: float
    auroc_diff: float  # submitted − refit
    criteria: str


def _correlation(a: np.ndarray, b: np.ndarray, *, ranks: bool) -> float:
    from scipy.stats import rankdata

    if np.array_equal(a, b):  # identical scores (constant ones included) reproduce themselves
        return 1.0
    return pearson(rankdata(a), rankdata(b)) if ranks else pearson(a, b)


def reproduction_verdict(
    *, submitted_scores, refit_scores, labels, tolerances: ProtocolTolerances
) -> ReproductionVerdict:
    """Reproduced when the re-fit scores the test rows like the artifact: Pearson and Spearman
    correlation of s(x) ≥ ``repro_min_score_correlation`` and |ΔAUROC| ≤ ``repro_max_auroc_diff``.

    Pure. The weight vectors are not compared: an ill-conditioned fit can rotate its direction
    (cosine 0.77) while every score stays the same, and that is a reproduction."""

    s_sub = np.asarray(submitted_scores, dtype=np.float64).reshape(-1)
    s_ref = np.asarray(refit_scores, dtype=np.float64).reshape(-1)
    r_p, r_s = _correlation(s_sub, s_ref, ranks=False), _correlation(s_sub, s_ref, ranks=True)
    a_sub, a_ref = auroc(s_sub, labels), auroc(s_ref, labels)
    ok = (
        r_p >= tolerances.repro_min_score_correlation
        and r_s >= tolerances.repro_min_score_correlation
        and abs(a_sub - a_ref) <= tolerances.repro_max_auroc_diff
    )
    return ReproductionVerdict(
        reproduced=bool(ok),
        score_pearson=r_p,
        score_spearman=r_s,
        auroc_submitted=a_sub,
        auroc_refit=a_ref,
        auroc_diff=a_sub - a_ref,
        criteria=tolerances.reproduction_criterion,
    )


def reproduction_check(
    probe: Probe | str | Path,
    *,
    registry: Registry | str | Path | None,
    cache_dir: str | Path,
    device: str | None = None,
    dtype: str | None = None,
    harvest_config: HarvestConfig | None = None,
    progress: Progress | None = None,
    lm: LoadedModel | None = None,
    protocol: Protocol | None = None,
) -> ReproductionResult:
    """Rerun the probe's recipe on its base model and compare with the uploaded artifact.

    The comparison is on the recipe task's test split, by :func:`reproduction_verdict` under
    ``protocol``'s tolerances (default: the registry's current protocol); the cosine of the
    raw-space directions (linear probes) is reported as information.
    """
    # imported when called: tests replace evaluator.core.models.load_model (no model may load)
    from evaluator.core.models import load_model

    start = time.perf_counter()
    progress = progress or no_progress
    reg = as_registry(registry)
    p = as_probe(probe, reg)
    protocol = protocol or reg.protocol()
    if p.metadata.recipe is None:
        raise EvaluatorError("the probe has no recipe: nothing to reproduce")
    recipe = Recipe.from_dict(p.metadata.recipe, probe=p.metadata, registry=reg)
    if lm is None:
        lm = load_model(p.base_model, registry=reg, cache_dir=cache_dir, device=device, dtype=dtype)
    elif lm.id != p.base_model:
        raise EvaluatorError(f"probe {p.metadata.name!r} reads {p.base_model}, not {lm.id}")
    cache = ActivationCache(cache_dir)
    trained = train_recipe(
        recipe,
        lm,
        registry=reg,
        cache=cache,
        config=harvest_config,
        progress=sub_progress(progress, 0.0, 0.5, "reproduce train "),
    )
    refit = probe_from_tensors(trained.tensors, p.metadata, registry=reg)
    test = split_activations(
        lm,
        reg,
        recipe.task,
        "test",
        layers=[p.layer],
        position=p.metadata.position,
        input_kind=p.metadata.input,
        cache=cache,
        config=harvest_config,
        progress=sub_progress(progress, 0.5, 1.0, "reproduce test "),
    )[p.layer]
    verdict = reproduction_verdict(
        submitted_scores=p.score(test.X),
        refit_scores=refit.score(test.X),
        labels=test.labels,
        tolerances=protocol.tolerances,
    )
    d_sub, d_ref = p.direction(), refit.direction()
    cosine = None
    if d_sub is not None and d_ref is not None:
        cosine = float(d_sub @ d_ref / (np.linalg.norm(d_sub) * np.linalg.norm(d_ref) or 1.0))
    return ReproductionResult(
        task_id=recipe.task,
        method=recipe.method,
        cosine=cosine,
        auroc_submitted=verdict.auroc_submitted,
        auroc_refit=verdict.auroc_refit,
        auroc_diff=verdict.auroc_diff,
        score_pearson=verdict.score_pearson,
        score_spearman=verdict.score_spearman,
        reproduced=verdict.reproduced,
        criteria=verdict.criteria,
        protocol=lm.protocol_id,
        train_cache_key=trained.train.cache_key,
        seconds=time.perf_counter() - start,
    )


# --------------------------------------------------------------------------- 7. the whole probe


@dataclass
class TaskEvaluation:
    """Everything measured for one task: the runs (per-example scores), metrics, baselines."""

    task_id: str
    metrics: TaskMetrics
    baselines: BaselineResult
    runs: dict[str, RunResult]  # by split: train, test, distshift (when present)

    def to_dict(self, *, include_examples: bool = False) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "metrics": self.metrics.to_dict(),
            "baselines": self.baselines.to_dict(),
            "runs": {k: r.to_dict(include_examples=include_examples) for k, r in self.runs.items()},
        }


@dataclass
class ProbeEvaluation:
    """The result of :func:`evaluate_probe`."""

    probe: dict[str, Any]  # metadata
    probe_sha256: str
    model: dict[str, Any]
    tasks: dict[str, TaskEvaluation]
    aggregate: dict[str, Any]  # the Measurements fed to probe_score, plus brier, recall, n
    imputed: dict[str, str]  # component → why it was imputed (empty when all measured)
    latency: LatencyResult
    transfer: list[TransferResult]
    reproduction: ReproductionResult | None
    probe_score: dict[str, Any]  # evaluator.metrics.scoring.ProbeScore.to_dict()
    declared_gaps: dict[str, dict[str, Any]]  # declared vs measured, flagged when > 5 points
    notes: list[str]
    timings: dict[str, float]
    config: dict[str, Any]
    code_version: str = CODE_VERSION
    #: the measurement protocol every run followed; None: exploration (e.g. --dtype bfloat16),
    #: whose numbers are not comparable with the board's
    protocol: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)  # evaluator.core.environment

    def to_dict(self, *, include_examples: bool = False) -> dict[str, Any]:
        out = fields_dict(self, skip=("tasks",))
        out["tasks"] = {k: t.to_dict(include_examples=include_examples) for k, t in self.tasks.items()}
        return jsonable(out)


def _tasks_for(
    probe: Probe, registry: Registry, task_ids: Sequence[str] | None
) -> tuple[list[str], dict[str, str]]:
    """The tasks to evaluate the probe on, and {task: why not} for the category's active tasks it
    cannot read (``evaluator.core.applicability``: the board's planner uses the same rule)."""

    category = probe.metadata.category
    reads, model = ProbeReads.of(probe.metadata), registry.model(probe.base_model)
    if task_ids:
        for task_id in task_ids:
            task = registry.task(task_id)
            if task.category != category:
                raise EvaluatorError(
                    f"task {task_id} is in category {task.category}; the probe is {category}"
                )
            ok, why = applicability(reads, task, model)
            if not ok:
                raise EvaluatorError(f"task {task_id} is not applicable to this probe: {why}")
        return list(task_ids), {}
    applicable, not_applicable = applicable_tasks(
        reads, [t for t in registry.tasks.values() if t.category == category and t.is_active], model
    )
    if not applicable:
        raise EvaluatorError(
            f"no active task in category {category} that this probe can read: nothing to evaluate"
            + "".join(f"; {t}: {why}" for t, why in not_applicable.items())
        )
    return [t.id for t in applicable], not_applicable


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


def evaluate_probe(
    probe: Probe | str | Path,
    *,
    registry: Registry | str | Path | None,
    cache_dir: str | Path,
    tasks: Sequence[str] | None = None,
    reference_probe: Probe | str | Path | None = None,
    spec_version: str | None = None,
    transfer_targets: Sequence[str] | None = None,
    compute_transfer: bool = True,
    compute_reproduction: bool = True,
    latency_reps: int = 200,
    device: str | None = None,
    dtype: str | None = None,
    harvest_config: HarvestConfig | None = None,
    progress: Progress | None = None,
    protocol: str | None = None,
) -> ProbeEvaluation:
    """Evaluate one probe version on its category's active tasks (or ``tasks``) on its base model.

    ``reference_probe``: the eval-awareness reference probe for the same base model (None:
    auroc_ea imputed, flagged). ``transfer_targets``: base models to re-fit on for ρ_CE
    (default: every other model in the registry). Returns per-task results (with per-example
    scores), the aggregate Measurements and the ProbeScore under ``spec_version`` (default:
    the latest spec). Numerics: the registry's current measurement protocol (float32, its
    harvest settings) unless ``dtype``/``harvest_config`` say otherwise (then ``protocol`` is
    None in the result: exploration, not a board number). ``protocol``: a protocol id to
    enforce (a dtype it does not allow raises ProtocolViolation).
    """

    start = time.perf_counter()
    progress = progress or no_progress
    reg = as_registry(registry)
    enforced = reg.protocol(protocol) if protocol else None
    config = harvest_config
    if config is None:
        config = harvest_config_default(reg) if enforced is None else HarvestConfig.from_protocol(enforced)
    setup = MeasureSetup(reg, cache_dir, device, dtype, config, enforced)
    p = as_probe(probe, reg)
    spec = reg.spec(spec_version)
    task_ids, not_applicable = _tasks_for(p, reg, tasks)
    ea_applicable = p.metadata.category != EVAL_AWARENESS
    ref = as_probe(reference_probe, reg) if (reference_probe is not None and ea_applicable) else None
    if ref is not None and ref.base_model != p.base_model:
        raise EvaluatorError(f"the reference probe reads {ref.base_model}, the probe reads {p.base_model}")
    has_recipe = p.metadata.recipe is not None
    do_transfer, do_repro = compute_transfer and has_recipe, compute_reproduction and has_recipe
    # Progress budget: tasks 0–0.6, reproduction 0.6–0.7, transfer 0.7–0.97, latency to 1.
    task_span = 0.6 if (do_transfer or do_repro) else 0.95
    timings: dict[str, float] = {}
    notes: list[str] = []

    # 1. every task: train/test/distshift runs, the reference probe, metrics, baselines
    per_task: dict[str, TaskEvaluation] = {}
    lm = None
    for k, task_id in enumerate(task_ids):
        report = sub_progress(progress, task_span * k / len(task_ids), task_span * (k + 1) / len(task_ids))
        per_task[task_id], lm = _evaluate_task(p, ref, task_id, setup, lm, spec.imputation, report)
    assert lm is not None  # _tasks_for returns at least one task, and each run loads the model
    timings["tasks"] = time.perf_counter() - start

    # 2. the recipe: reproduction on the base model, re-fit on the other models (rho_ce)
    reproduction = None
    if do_repro:
        t0 = time.perf_counter()
        reproduction = _unless_recipe_fails(
            lambda: reproduction_check(
                p,
                registry=reg,
                cache_dir=cache_dir,
                device=device,
                dtype=dtype,
                harvest_config=setup.config,
                lm=lm,
                progress=sub_progress(progress, 0.6, 0.7),
                protocol=enforced,
            ),
            "reproduction check",
            notes,
        )
        timings["reproduction"] = time.perf_counter() - t0
    transfer: list[TransferResult] | None = []
    if do_transfer:
        t0 = time.perf_counter()
        # by default every base model but those loaded only on request (too big to load unasked)
        candidates = (
            [m for m, spec in reg.models.items() if not spec.on_request]
            if transfer_targets is None
            else list(transfer_targets)
        )
        targets = [t for t in candidates if t != p.base_model]
        transfer = _transfer(p, targets, setup, notes, sub_progress(progress, 0.7, 0.97))
        timings["transfer"] = time.perf_counter() - t0

    # 3. latency on the worker's device, then the aggregate and the ProbeScore
    t0 = time.perf_counter()
    prompt = median_length_prompt(reg, task_ids[0], p.metadata.input, model=p.base_model)
    latency = measure_latency(p, lm, prompt=prompt, reps=latency_reps)
    timings["latency"] = time.perf_counter() - t0
    progress(1.0, "done")
    aggregate, imputed, measurements = _aggregate(
        per_task,
        p,
        latency,
        transfer or [],
        has_recipe=has_recipe and transfer is not None,
        did_transfer=do_transfer,
        ea_applicable=ea_applicable,
        has_reference=ref is not None,
        imputation=spec.imputation,
    )
    score = probe_score(measurements, spec=spec, licenses=reg.licenses)
    timings["total"] = time.perf_counter() - start
    followed = {r.protocol for t in per_task.values() for r in t.runs.values()}
    if reproduction is not None:
        followed.add(reproduction.protocol)
    protocol = followed.pop() if len(followed) == 1 else None
    return ProbeEvaluation(
        probe=p.metadata.to_dict(),
        probe_sha256=p.sha256,
        model=lm.describe(),
        tasks=per_task,
        aggregate=aggregate,
        imputed=imputed,
        latency=latency,
        transfer=transfer or [],
        reproduction=reproduction,
        probe_score=score.to_dict(),
        declared_gaps=declared_gaps(p.metadata.declared_metrics, aggregate),
        notes=notes,
        timings=timings,
        config={
            "harvest": setup.config.to_dict(),
            "spec": spec.version,
            "tasks": task_ids,
            "not_applicable": not_applicable,
            "transfer_targets": [r.target_model for r in transfer or []],
            "latency_reps": latency_reps,
            "reference_probe_sha256": ref.sha256 if ref is not None else None,
        },
        protocol=protocol,
        environment=lm.environment() | {"protocol": protocol},
    )


def _evaluate_task(
    probe: Probe,
    ref: Probe | None,
    task_id: str,
    setup: MeasureSetup,
    lm: LoadedModel | None,
    imputation: Mapping[str, float],
    progress: Progress,
) -> tuple[TaskEvaluation, LoadedModel]:
    """The probe's runs on one task's splits (and the reference probe's on test) → metrics."""
    own = setup.registry.task(task_id).splits_for(probe.base_model)
    splits = ["train", "test"] + (["distshift"] if "distshift" in own else [])
    steps = len(splits) + 1
    runs: dict[str, RunResult] = {}
    acts: dict[str, SplitActivations] = {}
    task_baselines = None
    for s, split in enumerate(splits):
        report = sub_progress(progress, s / steps, (s + 1) / steps, f"{task_id}/{split} ")
        measured = measure_split(
            probe,
            task_id=task_id,
            split=split,
            setup=setup,
            lm=lm,
            progress=report,
            extras=split == "test",
            train_activations=acts.get("train"),
        )
        runs[split], acts[split], lm = measured.run, measured.activations, measured.lm
        task_baselines = measured.baselines or task_baselines
    assert lm is not None and task_baselines is not None  # every task has a train and a test split
    ea_scores = None
    if ref is not None:
        ref_run, _, _ = setup.run(
            ref, task_id, "test", lm, sub_progress(progress, 1 - 1 / steps, 1, "reference ")
        )
        ea_scores = ref_run.examples.scores_by_id()
    train = runs["train"].examples
    metrics = task_metrics(
        task_id=task_id,
        test=runs["test"].examples,
        distshift=runs["distshift"].examples if "distshift" in runs else None,
        ea_reference=ea_scores,
        train_negative_scores=train.scores[train.labels == 0],
        ea_applicable=probe.metadata.category != EVAL_AWARENESS,
        imputation=imputation,
    )
    return TaskEvaluation(task_id=task_id, metrics=metrics, baselines=task_baselines, runs=runs), lm


def _unless_recipe_fails(step, what: str, notes: list[str]):
    """Run a recipe step; a recipe that cannot be rerun becomes a note (the component is then
    imputed or unmarked), while infrastructure and registry faults propagate (retry / stop)."""
    try:
        return step()
    except (InfrastructureError, RegistryError):
        raise
    except EvaluatorError as exc:
        notes.append(f"{what} failed: {exc}")
        return None


def _transfer(
    probe: Probe, targets: list[str], setup: MeasureSetup, notes: list[str], progress: Progress
) -> list[TransferResult] | None:
    """Per-target transfer results; None when the recipe cannot be re-fit (rho_ce imputed)."""

    if not targets:
        return []
    return _unless_recipe_fails(
        lambda: cross_model_transfer(
            probe,
            targets=targets,
            registry=setup.registry,
            cache_dir=setup.cache_dir,
            device=setup.device,
            dtype=setup.dtype,
            config=setup.config,
            progress=progress,
        ),
        "cross-model transfer",
        notes,
    )


def median_length_prompt(
    registry: Registry, task_id: str, input_kind: str, *, model: str | None = None
) -> str:
    """A representative prompt (median text length of the test split) for the forward timing.
    ``model``: whose own test split, for an on-policy task."""

    rows = read_split(registry, task_id, "test", model=model)
    order = np.argsort([len(t) for t in rows.texts], kind="stable")
    text = rows.texts[int(order[len(order) // 2])]
    return render_prompts(registry.task(task_id), [text], input_kind)[0]


def _aggregate(
    per_task: dict[str, TaskEvaluation],
    probe: Probe,
    latency: LatencyResult,
    transfer: list[TransferResult],
    *,
    has_recipe: bool,
    did_transfer: bool,
    ea_applicable: bool,
    has_reference: bool,
    imputation: Mapping[str, float],
):
    """Means over tasks → (aggregate dict, imputed reasons, scoring.Measurements)."""
    return aggregate_measurements(
        [t.metrics for t in per_task.values()],
        lifts=[t.baselines.to_dict() for t in per_task.values()],
        latency_ms=latency.probe_ms,
        license_id=probe.metadata.license,
        transfer_pearsons=[r.pearson for r in transfer] if transfer else None,
        has_recipe=has_recipe,
        did_transfer=did_transfer,
        ea_applicable=ea_applicable,
        has_reference=has_reference,
        imputation=imputation,
    )
