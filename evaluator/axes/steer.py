"""Direction utility: does a linear probe's direction steer the model, not only classify?

For a linear probe on a decoder model, the direction in residual space is the weight mapped back
through the probe's standardisation (``w / scale``, :meth:`evaluator.core.probes.Probe.direction`),
unit-normalised: û. Adding û raises the probe's score, so +û points to its positive class.

Each task declares a behavioural readout in tasks.yaml (:class:`evaluator.data.registry.tasks.ReadoutSpec`):
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
   (``max_intervention_teramacs``, counted by :func:`evaluator.axes.steer_readout.intervention_work`
   from the tokens, the replayed blocks' weights and the number of replays): a task above it is
   reported with its readout and not judged, so that a probe at an early layer with long prompts
   cannot hold a worker for hours.
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
batch stacked along the batch dimension (:func:`evaluator.axes.steer_readout.readouts_batched`).
Every row attends only to itself, so the readouts are those of one replay per intervention.

This module runs the steps; each has its own: ``steer_readout`` (the readout, its unsteered pass
and replays, the work count), ``steer_strength`` (the sweep under the fluency guard),
``steer_null`` (the random directions, p-value and z), ``steer_generation`` (perplexity,
generation, the judges, the generated-text readout).

Pure: no Django; torch is imported inside functions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.axes.steer_generation import generated_readout
from evaluator.axes.steer_null import ADDITION_SD_FLOOR, _against_random, random_directions
from evaluator.axes.steer_readout import (
    ReadoutTokens,
    _ablation,
    _addition,
    _encode,
    _Readout,
    _readout_rows,
    intervention_work,
    readout_prefix,
    readout_tokens,
    readouts_batched,
    replayed_parameters,
)
from evaluator.axes.steer_strength import choose_strength, fluency_ids
from evaluator.core import models
from evaluator.core.harvest import HarvestConfig
from evaluator.core.probes import load_probe
from evaluator.core.sae_probe import SAE_KIND
from evaluator.errors import EvaluatorError
from evaluator.metrics.metrics import auroc
from evaluator.metrics.results import Progress, jsonable, no_progress, sub_progress

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.core.probes import Probe
    from evaluator.data.registry.load import Registry
    from evaluator.data.registry.protocols import Protocol, SteeringSettings
    from evaluator.data.registry.tasks import TaskSpec

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- eligibility


def steer_ineligibility(probe: Probe, *, registry: Registry) -> str | None:
    """Why ``probe`` cannot be steered (None: it can): linear probes on decoder models only."""
    spec = registry.model(probe.base_model)
    if spec.encoder:
        return f"{spec.id} is an encoder: it has no next-token distribution to read behaviour from"
    if probe.kind == SAE_KIND:
        return (
            "not applicable to an SAE-feature probe: it reads TopK latents of an SAE, not one"
            " direction in the residual stream, so there is no direction to add or project out"
        )
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


# --------------------------------------------------------------------------- one task


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
            return models.load_model(  # looked up when called: tests replace it
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
