"""Evaluation that runs models: the whole probe, every applicable task, with the ProbeScore.

The pieces the web pipeline calls separately (the worker side; metrics from stored scores, which
need no model, live in :mod:`evaluator.metrics.measure`):

1. :func:`evaluator.axes.run.execute_run` — one probe × task × split × base model → per-example
   ids, labels, s(x), p(x), the verified split hash, the activation-cache key, timings.
2. :func:`evaluator.metrics.measure.task_metrics` — pure: stored per-example results → per-task metrics.
3. :func:`evaluator.axes.latency.measure_latency` — probe-only latency (+ model forward, not scored).
4. :func:`evaluator.axes.baselines.baselines` — random direction and diff-of-means at the same layer (lift).
5. :func:`evaluator.axes.transfer.cross_model_transfer` — per-target Pearson of ablation effects.
6. :func:`evaluator.axes.reproduction.reproduction_check` — rerun the recipe: cosine of directions,
   AUROC difference.
7. :func:`evaluate_probe` (this module) — all of the above for the CLI, with the ProbeScore.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluator import CODE_VERSION
from evaluator.axes.baselines import BaselineResult
from evaluator.axes.latency import measure_latency
from evaluator.axes.reproduction import ReproductionResult, reproduction_check
from evaluator.axes.run import (
    MeasureSetup,
    RunResult,
    as_probe,
    as_registry,
    harvest_config_default,
    measure_split,
    median_length_prompt,
)
from evaluator.axes.transfer import cross_model_transfer
from evaluator.core.applicability import ProbeReads, applicability, applicable_tasks
from evaluator.core.harvest import HarvestConfig
from evaluator.core.probes import Probe
from evaluator.core.recipes import transfer_refusal
from evaluator.data.registry.load import Registry
from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.errors import EvaluatorError, InfrastructureError, RegistryError
from evaluator.metrics.measure import TaskMetrics, aggregate_measurements, declared_gaps, task_metrics
from evaluator.metrics.results import Progress, fields_dict, jsonable, no_progress, sub_progress
from evaluator.metrics.scoring import probe_score

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.axes.latency import LatencyResult
    from evaluator.axes.transfer import TransferResult
    from evaluator.core.activations import SplitActivations
    from evaluator.core.models import LoadedModel

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- the whole probe


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
            ref, task_id, "test", lm, sub_progress(progress, 1 - 1 / steps, 1, f"{task_id}/test reference ")
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
    refusal = transfer_refusal(str((probe.metadata.recipe or {}).get("method", "")))
    if refusal is not None:
        notes.append(f"cross-model transfer not applicable: {refusal}")
        return None
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
