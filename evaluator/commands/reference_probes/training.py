"""Training a reference probe: the layer sweep, the recipe fitted on the whole train split at the
chosen layer (or the selection-trained eval-awareness probe), and its submission metadata."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.axes.ea_selection import format_folds, split_formats
from evaluator.axes.ea_selection import select as select_by_format
from evaluator.commands.reference_probes.manifest import ReferenceEntry
from evaluator.commands.reference_probes.sweep import (
    SweepResult,
    layer_sweep,
    score_tensors,
    train_activations,
)
from evaluator.core.activations import ActivationCache
from evaluator.core.probes import probe_from_tensors
from evaluator.core.recipes import Recipe, fit_recipe, recipe_fit
from evaluator.errors import EvaluatorError
from evaluator.metrics.metrics import auroc

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.axes.ea_selection import SelectionResult
    from evaluator.core.harvest import HarvestConfig, Progress
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.load import Registry

log = logging.getLogger(__name__)

LICENSE = "Apache-2.0"
AUTHORS = ("ProbeBench maintainers",)


@dataclass
class TrainedReference:
    """A reference probe fitted at its swept layer, not yet written."""

    entry: ReferenceEntry
    recipe: Recipe
    sweep: SweepResult | SelectionResult  # SelectionResult for a held-out-format selection entry
    tensors: dict[str, np.ndarray]
    metadata: dict[str, Any]
    train_auroc: float
    #: the safetensors header's ``__metadata__`` (an SAE recipe's ``sae_weights_sha256``)
    artifact_metadata: dict[str, str] = field(default_factory=dict)


def layer_sentence(entry: ReferenceEntry, sweep: SweepResult) -> str:
    """How the layer was chosen, for the probe's description (deterministic text)."""
    if sweep.layers == [sweep.chosen_layer] and sweep.method == "sae_topk_meandiff":
        return (
            f"It reads layer {sweep.chosen_layer}, the layer of its SAE. On the {entry.task} train split"
            f" alone, {sweep.folds}-fold grouped, stratified cross-validation (seed {sweep.seed}) of this"
            f" recipe gives a mean held-out AUROC of {sweep.best:.3f}. Test, distshift and holdout"
            " splits were not used to choose."
        )
    return (
        f"Layer {sweep.chosen_layer} was chosen by a layer sweep on the {entry.task} train split only:"
        f" {sweep.folds}-fold grouped, stratified cross-validation (seed {sweep.seed}) of this recipe at"
        f" every layer {sweep.layers[0]}..{sweep.layers[-1]}, highest mean held-out AUROC"
        f" ({sweep.best:.3f}; ties broken by held-out log-loss, then the lower layer). Test, distshift"
        " and holdout splits were not used to choose."
    )


def build_metadata(
    entry: ReferenceEntry,
    recipe: Recipe,
    sweep: SweepResult | SelectionResult,
    registry: Registry,
    declared: dict[str, float] | None = None,
) -> dict[str, Any]:
    """probe.json: exactly the submission metadata (docs/ARCHITECTURE.md)."""
    task = registry.task(entry.task)
    how = layer_sentence(entry, sweep) if isinstance(sweep, SweepResult) else sweep.sentence(entry.task)
    description = " ".join(x for x in (entry.description, how) if x)
    return {
        "name": entry.name,
        "category": task.category,
        "base_model": entry.base_model,
        "layer": recipe.layer,
        "position": recipe.position,
        "input": recipe.input,
        "output": "logit",
        "license": LICENSE,
        "authors": list(AUTHORS),
        "paper_url": "",
        "description": description,
        "training_data": {"tasks": [entry.task], "external": ""},
        "declared_metrics": dict(declared or {}),
        "recipe": recipe.to_dict(),
    }


def train_reference(
    entry: ReferenceEntry,
    lm: LoadedModel,
    registry: Registry,
    *,
    cache: ActivationCache | None,
    config: HarvestConfig | None = None,
    progress: Progress | None = None,
) -> TrainedReference:
    """Sweep the layers on train, fit the recipe at the chosen layer on the whole train split.
    An entry with a ``selection`` is chosen by evaluator.axes.ea_selection instead."""

    if entry.candidates:
        return train_selected(entry, lm, registry, cache=cache, config=config, progress=progress)
    if lm.id != entry.base_model:
        raise EvaluatorError(f"{entry.slug} reads {entry.base_model}, not {lm.id}")
    layers = entry.candidate_layers(lm.n_layers)
    # an SAE recipe is valid at its SAE's layer only: its manifest entry lists that one layer
    base = entry.recipe_at(layers[0], registry)
    acts = train_activations(lm, registry, base, layers, cache=cache, config=config, progress=progress)
    sweep = layer_sweep(base, acts, folds=entry.folds, registry=registry)
    recipe = entry.recipe_at(sweep.chosen_layer, registry)
    train = acts[recipe.layer]
    fitted = recipe_fit(recipe, train.X, train.labels, registry=registry)
    tensors = fitted.tensors
    metadata = build_metadata(entry, recipe, sweep, registry)
    probe = probe_from_tensors(
        tensors, metadata, registry=registry, artifact_metadata=fitted.artifact_metadata
    )  # validates
    train_auroc = auroc(probe.score(train.X), train.labels)
    log.info(
        "%s: %s on %s, layer %d (cv %.3f), train auroc %.3f",
        entry.slug,
        recipe.method,
        recipe.task,
        recipe.layer,
        sweep.best,
        train_auroc,
    )
    return TrainedReference(entry, recipe, sweep, tensors, metadata, train_auroc, fitted.artifact_metadata)


@dataclass
class _SelectionTrain:
    ids: list[str]
    groups: list[str]
    labels: np.ndarray
    X: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)


def fit_and_score(recipe: Recipe, X_fit: np.ndarray, y_fit: np.ndarray, X_held: np.ndarray) -> np.ndarray:
    """s(x) of ``X_held`` under ``recipe`` fitted on (X_fit, y_fit)."""

    return score_tensors(recipe, fit_recipe(recipe, X_fit, y_fit), X_held)


def train_selected(
    entry: ReferenceEntry,
    lm: LoadedModel,
    registry: Registry,
    *,
    cache: ActivationCache | None,
    config: HarvestConfig | None = None,
    progress: Progress | None = None,
) -> TrainedReference:
    """Select the recipe by evaluator.axes.ea_selection's rule on train (held-out formats), fit it
    on the whole train split."""

    if lm.id != entry.base_model:
        raise EvaluatorError(f"{entry.slug} reads {entry.base_model}, not {lm.id}")
    if not entry.candidates:
        raise EvaluatorError(f"{entry.slug}: no selection candidates")
    layers = entry.candidate_layers(lm.n_layers)
    data: _SelectionTrain | None = None
    for position in sorted({c.position for c in entry.candidates}):
        base = entry.recipe_at(0, registry, next(c for c in entry.candidates if c.position == position))
        acts = train_activations(lm, registry, base, layers, cache=cache, config=config, progress=progress)
        first = acts[layers[0]]
        if data is None:
            data = _SelectionTrain(first.ids, first.groups, first.labels)
        if any(a.ids != data.ids for a in acts.values()):
            raise EvaluatorError("selection: the positions/layers hold different rows")
        for layer, a in acts.items():
            data.X[(position, layer)] = a.X
    assert data is not None
    formats = split_formats(registry, entry.task, "train", data.ids, model=lm.id)
    folds = format_folds(data.labels, data.groups, formats)
    seed = int(entry.recipe.get("seed", 0))
    selection = select_by_format(
        entry.candidates,
        lambda cand, layer: entry.recipe_at(layer, registry, cand),
        lambda position, layer: data.X[(position, layer)],
        data.labels,
        folds,
        layers,
        fit_score=fit_and_score,
        task_id=entry.task,
        seed=seed,
    )
    chosen = entry.candidates[int(selection.chosen["candidate"])]
    recipe = entry.recipe_at(selection.chosen_layer, registry, chosen)
    X = data.X[(chosen.position, recipe.layer)]
    tensors = fit_recipe(recipe, X, data.labels)
    metadata = build_metadata(entry, recipe, selection, registry)
    probe = probe_from_tensors(tensors, metadata, registry=registry)  # validates
    train_auroc = auroc(probe.score(X), data.labels)
    log.info(
        "%s: %s, layer %d (worst-fold %.3f), train auroc %.3f",
        entry.slug,
        chosen.label(),
        recipe.layer,
        selection.best,
        train_auroc,
    )
    return TrainedReference(entry, recipe, selection, tensors, metadata, train_auroc)
