"""Reference probes: the maintainers' probes that ship with the board, trained reproducibly.

``registry/reference_probes/manifest.yaml`` lists every reference probe, eval-awareness reference
probes first (the substrate of every ``auroc_ea``): its slug, directory, role, a one-line *why*,
and how it is trained — base model, method, task, position, input, hyperparameters, seed and the
candidate layers. The layer is not written in the manifest: it is chosen by a **layer sweep on
the task's train split only** (:func:`layer_sweep`):

- every candidate layer's train activations (one harvest, all layers, through the shared
  activation cache);
- 5-fold grouped, stratified cross-validation on train (``StratifiedGroupKFold``, shuffled with
  the recipe seed; a row's ``group`` never straddles two folds), the recipe fitted on four folds
  and scored on the fifth;
- the chosen layer has the highest mean held-out AUROC (rounded to 3 decimals); ties, common
  where a task saturates at 1.000, are broken by the lowest mean held-out log-loss (rounded to
  4 decimals), then by the lower layer. test, distshift and holdout are never read to choose.

Then the recipe is fitted on the whole train split at that layer, written with
:func:`evaluator.core.probes.save_probe` (``probe.safetensors`` + ``probe.json``, the submission
metadata) and evaluated by :func:`evaluator.axes.evaluate.evaluate_probe` (with the same base model's
eval-awareness reference probe, without cross-model transfer, which the workers compute). The
sweep, the evaluation and the artifact hash go to a sidecar ``reference.json`` beside the probe.

    python -m evaluator reference-probes                      # retrain + evaluate + write all
    python -m evaluator reference-probes --only ea-smollm2    # one (or several, comma-separated)
    python -m evaluator reference-probes --check              # retrain in memory, compare, write nothing
    python -m evaluator reference-probes --reevaluate         # keep the artifacts, re-measure, rewrite
    python -m evaluator reference-probes --check-records      # is every reference.json current? (no model)

Everything is seeded; with the same activations (same cache entries) a rerun writes identical
artifacts. ``--check`` compares a fresh fit with the committed artifact (same chosen layer, same
tensor names/shapes, direction cosine and max abs difference within tolerance).

A record is *stale* (:func:`record_problems`) when what it was measured with has changed since: the
artifact's bytes, the eval-awareness reference probe behind its auroc_ea (another probe, or other
bytes), a split file's pinned hash, or the base model's weights; or when probe.json's declared
metrics are not the record's. ``--reevaluate`` measures the committed artifacts again (no refit)
and rewrites the records; ``--check-records`` lists what is stale, and the test suite runs it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator import CODE_VERSION
from evaluator.axes.ea_selection import format_folds, parse_selection, split_formats
from evaluator.axes.ea_selection import select as select_by_format
from evaluator.axes.evaluate import evaluate_probe
from evaluator.commands.base import default_cache_dir as cli_default
from evaluator.core.activations import ActivationCache, split_activations
from evaluator.core.probes import (
    ARTIFACT_NAME,
    METADATA_NAME,
    Probe,
    ProbeMetadata,
    load_probe,
    probe_from_tensors,
    save_probe,
)
from evaluator.core.recipes import Recipe, fit_recipe
from evaluator.data.registry import EVAL_AWARENESS, load_registry
from evaluator.errors import EvaluatorError, RegistryError, UnknownNameError
from evaluator.metrics.metrics import auroc, sigmoid
from evaluator.metrics.results import fields_dict

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.axes.ea_selection import Candidate, SelectionResult
    from evaluator.core.activations import HarvestConfig, Progress, SplitActivations
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry import Registry

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see evaluator/commands/train_cli.py

log = logging.getLogger(__name__)

MANIFEST = Path("registry") / "reference_probes" / "manifest.yaml"
SIDECAR = "reference.json"
ROLES = (EVAL_AWARENESS, "")
LICENSE = "Apache-2.0"
AUTHORS = ("ProbeBench maintainers",)
SWEEP_FOLDS = 5
SWEEP_DECIMALS = 3
LOG_LOSS_DECIMALS = 4
SWEEP_RULE = (
    f"highest mean held-out AUROC over the folds (rounded to {SWEEP_DECIMALS} decimals); ties broken by"
    f" the lowest mean held-out log-loss of sigmoid(s) (rounded to {LOG_LOSS_DECIMALS} decimals), then"
    " the lower layer"
)
#: --check: a retrained artifact matches the committed one when its direction has at least this
#: cosine with the committed one and every tensor is within atol + rtol·max|tensor|
CHECK_MIN_COSINE = 0.999
CHECK_RTOL = 1e-3
CHECK_ATOL = 1e-5
#: the per-task numbers recorded in reference.json (and re-checked by the tests)
RECORDED_TASK_METRICS = (
    "auroc",
    "auroc_ci",
    "auroc_ea",
    "auroc_ea_status",
    "auroc_ds",
    "ece",
    "brier",
    "n_test",
)
DECLARED = ("auroc", "auroc_ea", "auroc_ds", "ece", "brier")


# --------------------------------------------------------------------------- the manifest


@dataclass(frozen=True)
class ReferenceEntry:
    """One manifest entry: what the probe is and how it is trained (the layer comes from the sweep)."""

    slug: str
    path: str  # relative to the registry root
    role: str  # "eval_awareness" | ""
    why: str
    name: str
    description: str
    base_model: str
    recipe: dict[str, Any]  # method, task, position, input, hyperparameters, seed (no layer)
    layers: tuple[int, ...] | None = None  # sweep candidates; None = every layer 0..n_layers
    folds: int = SWEEP_FOLDS
    #: the slug of the eval-awareness reference probe this one replaces (kept as a record)
    replaces: str = ""
    #: held-out-format selection (evaluator.axes.ea_selection): the method/position candidates; the
    #: recipe then names only task, input and seed
    candidates: tuple[Candidate, ...] | None = None

    @property
    def task(self) -> str:
        return str(self.recipe["task"])

    @property
    def method(self) -> str:
        return str(self.recipe.get("method") or "selected")

    def directory(self, root: Path) -> Path:
        return root / self.path

    def candidate_layers(self, n_layers: int) -> list[int]:
        return list(self.layers) if self.layers is not None else list(range(n_layers + 1))

    def recipe_at(self, layer: int, registry: Registry, candidate: Candidate | None = None) -> Recipe:
        """The validated recipe at ``layer`` (with a selection candidate's method, hyperparameters
        and position)."""

        chosen = candidate.to_dict() if candidate is not None else {}
        return Recipe.from_dict({**self.recipe, **chosen, "layer": layer}, registry=registry)

    def candidate_of(self, recipe: dict[str, Any]) -> Candidate | None:
        """The selection candidate a recorded recipe is (None for a layer-sweep entry)."""
        for c in self.candidates or ():
            if (c.method, c.position) == (recipe.get("method"), recipe.get("position")) and all(
                recipe.get("hyperparameters", {}).get(k) == v for k, v in c.hyperparameters.items()
            ):
                return c
        return None


_ENTRY_KEYS = {
    "slug",
    "path",
    "role",
    "why",
    "name",
    "description",
    "base_model",
    "recipe",
    "layers",
    "folds",
    "replaces",
    "selection",
}
_RECIPE_KEYS = {"method", "task", "position", "input", "hyperparameters", "seed"}


def manifest_path(root: Path) -> Path:
    """Where the manifest lives under a registry root."""
    return Path(root) / MANIFEST


def load_manifest(registry: Registry, path: str | Path | None = None) -> list[ReferenceEntry]:
    """Read and validate the manifest against the registry.

    Checks: known keys, unique slugs, roles, base models and tasks known, recipe valid at every
    candidate layer's range, each eval_awareness entry trains on an eval_awareness task, and the
    eval-awareness entries come first with exactly one per base model that has any entry.
    """
    import yaml

    path = Path(path) if path is not None else manifest_path(registry.root)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RegistryError(f"{path}: reference-probe manifest not found") from None
    if not isinstance(data, dict) or not isinstance(data.get("probes"), list):
        raise RegistryError(f"{path}: expected a mapping with a 'probes' list")
    entries: list[ReferenceEntry] = []
    seen: set[str] = set()
    for k, raw in enumerate(data["probes"]):
        where = f"{path}: probes[{k}]"
        if not isinstance(raw, dict):
            raise RegistryError(f"{where}: expected a mapping")
        unknown = sorted(set(raw) - _ENTRY_KEYS)
        if unknown:
            raise RegistryError(f"{where}: unknown key(s) {', '.join(unknown)}")
        missing = [key for key in ("slug", "path", "why", "name", "base_model", "recipe") if not raw.get(key)]
        if missing:
            raise RegistryError(f"{where}: missing {', '.join(missing)}")
        slug = str(raw["slug"])
        if slug in seen:
            raise RegistryError(f"{where}: duplicate slug {slug}")
        seen.add(slug)
        role = str(raw.get("role") or "")
        if role not in ROLES:
            raise RegistryError(f"{where}: role {role!r} is not one of {ROLES}")
        recipe = dict(raw["recipe"])
        bad = sorted(set(recipe) - _RECIPE_KEYS)
        if bad:
            raise RegistryError(
                f"{where}: recipe key(s) {', '.join(bad)} not allowed (the sweep sets the layer)"
            )
        candidates = None
        if raw.get("selection") is not None:
            candidates = parse_selection(raw["selection"], where)
            chosen_by_rule = sorted(set(recipe) & {"method", "position", "hyperparameters"})
            if chosen_by_rule:
                raise RegistryError(
                    f"{where}: recipe key(s) {', '.join(chosen_by_rule)} are set by the selection"
                )
        model = registry.model(str(raw["base_model"]))
        layers = raw.get("layers")
        if layers in (None, "all"):
            layer_tuple = None
        elif isinstance(layers, list) and layers and all(isinstance(x, int) for x in layers):
            layer_tuple = tuple(sorted(set(layers)))
            if not all(0 <= x <= model.n_layers for x in layer_tuple):
                raise RegistryError(f"{where}: layers out of range 0..{model.n_layers}")
        else:
            raise RegistryError(f"{where}: layers must be 'all' or a list of integers")
        entry = ReferenceEntry(
            slug=slug,
            path=str(raw["path"]),
            role=role,
            why=str(raw["why"]).strip(),
            name=str(raw["name"]).strip(),
            description=str(raw.get("description") or "").strip(),
            base_model=model.id,
            recipe=recipe,
            layers=layer_tuple,
            folds=int(raw.get("folds") or SWEEP_FOLDS),
            replaces=str(raw.get("replaces") or ""),
            candidates=candidates,
        )
        for candidate in candidates or (None,):
            entry.recipe_at(0, registry, candidate)  # method, task, template, hyperparameters valid
        if entry.replaces:
            old = next((e for e in entries if e.slug == entry.replaces), None)
            if old is None or old.role != EVAL_AWARENESS or role != EVAL_AWARENESS:
                raise RegistryError(f"{where}: replaces {entry.replaces}, no earlier eval_awareness entry")
            if old.base_model != entry.base_model:
                raise RegistryError(f"{where}: replaces {entry.replaces} of another base model")
        category = registry.task(entry.task).category
        if (role == EVAL_AWARENESS) != (category == EVAL_AWARENESS):
            raise RegistryError(f"{where}: role {role!r} but task {entry.task} is in category {category}")
        entries.append(entry)
    ea = [e for e in entries if e.role == EVAL_AWARENESS]
    if entries[: len(ea)] != ea:
        raise RegistryError(f"{path}: the eval_awareness reference probes must come first")
    replaced = [e.replaces for e in ea if e.replaces]
    if len(set(replaced)) != len(replaced):
        raise RegistryError(f"{path}: an eval_awareness reference probe is replaced twice")
    ea_models = [e.base_model for e in ea if e.slug not in replaced]
    if len(set(ea_models)) != len(ea_models):
        raise RegistryError(f"{path}: more than one current eval_awareness reference probe for a base model")
    lacking = sorted({e.base_model for e in entries} - set(ea_models))
    if lacking:
        raise RegistryError(f"{path}: no eval_awareness reference probe for {', '.join(lacking)}")
    return entries


def ea_reference_for(entries: Sequence[ReferenceEntry], base_model: str) -> ReferenceEntry | None:
    """The current eval-awareness reference entry of ``base_model``: the one no later entry
    ``replaces`` (a replaced one stays in the manifest as a record)."""
    replaced = {e.replaces for e in entries if e.replaces}
    return next(
        (
            e
            for e in entries
            if e.role == EVAL_AWARENESS and e.base_model == base_model and e.slug not in replaced
        ),
        None,
    )


def ea_reference_probe_dir(registry: Registry, base_model: str) -> Path | None:
    """The registry's eval-awareness reference probe for ``base_model`` (the one the board uses
    for auroc_ea: registry/reference_probes/ea-<model>, from the manifest), or None when the
    registry ships none (then auroc_ea is imputed, flagged)."""
    if not manifest_path(registry.root).is_file():
        return None
    entry = ea_reference_for(load_manifest(registry), base_model)
    if entry is None:
        return None
    directory = entry.directory(registry.root)
    return directory if directory.is_dir() else None


# --------------------------------------------------------------------------- the layer sweep


@dataclass(frozen=True)
class CVScore:
    """Held-out numbers of one recipe at one layer, over the folds."""

    auroc: float  # mean fold AUROC
    auroc_std: float
    log_loss: float  # mean fold cross-entropy of p = sigmoid(s)


@dataclass
class SweepResult:
    """Grouped cross-validation on the train split at every candidate layer."""

    task_id: str
    method: str
    layers: list[int]
    cv_auroc: list[float]  # mean over folds
    cv_auroc_std: list[float]
    cv_log_loss: list[float]
    folds: int
    seed: int
    n_train: int
    n_groups: int
    chosen_layer: int
    rule: str = SWEEP_RULE

    def to_dict(self) -> dict[str, Any]:

        return fields_dict(self)

    @property
    def best(self) -> float:
        return self.cv_auroc[self.layers.index(self.chosen_layer)]


def grouped_folds(
    labels: np.ndarray, groups: Sequence[str], n_folds: int, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(fit rows, held-out rows) per fold: stratified on the label, whole groups per fold,
    shuffled with ``seed`` (deterministic)."""
    from sklearn.model_selection import StratifiedGroupKFold

    y = np.asarray(labels)
    n_groups = len(set(groups))
    if n_groups < n_folds:
        raise EvaluatorError(f"layer sweep: {n_groups} groups cannot fill {n_folds} folds")
    splitter = StratifiedGroupKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return [(fit, held) for fit, held in splitter.split(np.zeros(y.size), y, groups=list(groups))]


def score_tensors(recipe: Recipe, tensors: dict[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    """s(x) of freshly fitted recipe tensors, exactly as :class:`evaluator.core.probes.Probe` scores."""

    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in tensors.items()}
    kind = "mlp" if "w1" in arrays else "linear"
    meta = ProbeMetadata(
        "cv", "eval_awareness", "-", recipe.layer, recipe.position, recipe.input, "logit", "-"
    )
    return Probe(metadata=meta, tensors=arrays, kind=kind).score(X)


def cv_score(
    recipe: Recipe, X: np.ndarray, y: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]]
) -> CVScore:
    """The recipe fitted on each fold's fit rows and scored on its held-out rows."""

    aurocs, losses = [], []
    for fit, held in folds:
        s = score_tensors(recipe, fit_recipe(recipe, X[fit], y[fit]), X[held])
        p = np.clip(sigmoid(s), 1e-12, 1 - 1e-12)
        t = y[held]
        aurocs.append(auroc(s, t))
        losses.append(float(-np.mean(t * np.log(p) + (1 - t) * np.log(1 - p))))
    return CVScore(float(np.mean(aurocs)), float(np.std(aurocs)), float(np.mean(losses)))


def choose_layer(layers: Sequence[int], aurocs: Sequence[float], log_losses: Sequence[float]) -> int:
    """:data:`SWEEP_RULE`: highest rounded mean CV AUROC, then lowest rounded CV log-loss, then
    the lower layer."""
    keyed = [
        (-round(a, SWEEP_DECIMALS), round(loss, LOG_LOSS_DECIMALS), layer)
        for layer, a, loss in zip(layers, aurocs, log_losses, strict=True)
    ]
    return min(keyed)[2]


def layer_sweep(
    recipe: Recipe,
    train_by_layer: dict[int, SplitActivations],
    *,
    folds: int = SWEEP_FOLDS,
) -> SweepResult:
    """Cross-validate ``recipe`` at every layer of ``train_by_layer`` (train split only) and
    choose the layer (:func:`choose_layer`). The folds are the same at every layer."""
    layers = sorted(train_by_layer)
    first = train_by_layer[layers[0]]
    if first.split != "train":
        raise EvaluatorError(f"the layer sweep reads the train split only, got {first.split}")
    y = first.labels
    split_folds = grouped_folds(y, first.groups, folds, recipe.seed)
    scores: list[CVScore] = []
    for layer in layers:
        acts = train_by_layer[layer]
        if acts.ids != first.ids:
            raise EvaluatorError("layer sweep: the layers hold different rows")
        cv = cv_score(recipe.at_layer(layer), acts.X, y, split_folds)
        scores.append(cv)
        log.info(
            "sweep %s %s layer %d: cv auroc %.4f ± %.4f, log-loss %.4f",
            recipe.task,
            recipe.method,
            layer,
            cv.auroc,
            cv.auroc_std,
            cv.log_loss,
        )
    aurocs, losses = [c.auroc for c in scores], [c.log_loss for c in scores]
    return SweepResult(
        task_id=recipe.task,
        method=recipe.method,
        layers=layers,
        cv_auroc=aurocs,
        cv_auroc_std=[c.auroc_std for c in scores],
        cv_log_loss=losses,
        folds=folds,
        seed=recipe.seed,
        n_train=len(first.ids),
        n_groups=len(set(first.groups)),
        chosen_layer=choose_layer(layers, aurocs, losses),
    )


def train_activations(
    lm: LoadedModel,
    registry: Registry,
    recipe: Recipe,
    layers: Sequence[int],
    *,
    cache: ActivationCache | None,
    config: HarvestConfig | None = None,
    progress: Progress | None = None,
    split: str = "train",
) -> dict[int, SplitActivations]:
    """One split's activations at every layer in ``layers`` (one harvest pass, then the cache)."""

    return split_activations(
        lm,
        registry,
        recipe.task,
        split,
        layers=list(layers),
        position=recipe.position,
        input_kind=recipe.input,
        cache=cache,
        config=config,
        progress=progress,
    )


# --------------------------------------------------------------------------- training


@dataclass
class TrainedReference:
    """A reference probe fitted at its swept layer, not yet written."""

    entry: ReferenceEntry
    recipe: Recipe
    sweep: SweepResult | SelectionResult  # SelectionResult for a held-out-format selection entry
    tensors: dict[str, np.ndarray]
    metadata: dict[str, Any]
    train_auroc: float


def layer_sentence(entry: ReferenceEntry, sweep: SweepResult) -> str:
    """How the layer was chosen, for the probe's description (deterministic text)."""
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
    base = entry.recipe_at(0, registry)
    layers = entry.candidate_layers(lm.n_layers)
    acts = train_activations(lm, registry, base, layers, cache=cache, config=config, progress=progress)
    sweep = layer_sweep(base, acts, folds=entry.folds)
    recipe = entry.recipe_at(sweep.chosen_layer, registry)
    train = acts[recipe.layer]
    tensors = fit_recipe(recipe, train.X, train.labels)
    metadata = build_metadata(entry, recipe, sweep, registry)
    probe = probe_from_tensors(tensors, metadata, registry=registry)  # validates
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
    return TrainedReference(entry, recipe, sweep, tensors, metadata, train_auroc)


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


# --------------------------------------------------------------------------- evaluation and files


def environment() -> dict[str, Any]:
    """Library versions recorded beside the numbers."""
    import sklearn
    import torch
    import transformers

    return {
        "code_version": CODE_VERSION,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scikit_learn": sklearn.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def evaluate_reference(
    directory: Path,
    registry: Registry,
    *,
    cache_dir: str | Path,
    reference_probe: Path | None,
    device: str | None,
    dtype: str | None,
    config: HarvestConfig | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """evaluate_probe on the probe's category tasks (test, distshift, train), with the base
    model's eval-awareness reference probe, the reproduction check, no cross-model transfer."""

    result = evaluate_probe(
        directory,
        registry=registry,
        cache_dir=cache_dir,
        reference_probe=reference_probe,
        compute_transfer=False,
        compute_reproduction=True,
        latency_reps=100,
        device=device,
        dtype=dtype,
        harvest_config=config,
        progress=progress,
    ).to_dict()
    tasks = {
        task_id: {k: t["metrics"][k] for k in RECORDED_TASK_METRICS}
        | {
            "random_direction_auroc": t["baselines"]["random_direction_auroc"],
            "diff_of_means_auroc": t["baselines"]["diff_of_means_auroc"],
            "split_sha256": {s: r["split_sha256"] for s, r in t["runs"].items()},
        }
        for task_id, t in result["tasks"].items()
    }
    aggregate = {
        k: result["aggregate"][k] for k in ("auroc", "auroc_ea", "auroc_ds", "ece", "brier", "n_test")
    }
    repro = result.get("reproduction") or {}
    return {
        "tool": "evaluator.evaluate.evaluate_probe (compute_transfer=False)",
        "reference_probe": str(reference_probe.relative_to(registry.root)) if reference_probe else None,
        "reference_probe_sha256": result["config"].get("reference_probe_sha256"),
        "model": result["model"],
        "tasks": tasks,
        "aggregate": aggregate,
        "imputed": result["imputed"],
        "reproduction": {k: repro.get(k) for k in ("cosine", "auroc_diff", "reproduced")} if repro else None,
        "latency_ms": result["latency"]["probe_ms"] if isinstance(result.get("latency"), dict) else None,
    }


def declared_from(evaluation: dict[str, Any]) -> dict[str, float]:
    """declared_metrics for probe.json: the measured aggregate, rounded to 4 decimals."""
    agg = evaluation["aggregate"]
    return {k: round(float(agg[k]), 4) for k in DECLARED if agg.get(k) is not None}


def write_reference(
    trained: TrainedReference,
    registry: Registry,
    *,
    cache_dir: str | Path,
    reference_probe: Path | None,
    device: str | None,
    dtype: str | None,
    config: HarvestConfig | None = None,
) -> dict[str, Any]:
    """Write probe.safetensors + probe.json, evaluate, then add the declared metrics to
    probe.json and write reference.json. Returns the sidecar."""

    directory = trained.entry.directory(registry.root)
    save_probe(directory, trained.tensors, trained.metadata)
    load_probe(directory, registry=registry)  # validates what was written
    evaluation = evaluate_reference(
        directory,
        registry,
        cache_dir=cache_dir,
        reference_probe=reference_probe,
        device=device,
        dtype=dtype,
        config=config,
    )
    metadata = build_metadata(
        trained.entry, trained.recipe, trained.sweep, registry, declared=declared_from(evaluation)
    )
    save_probe(directory, trained.tensors, metadata)
    probe = load_probe(directory, registry=registry)
    sidecar = {
        "slug": trained.entry.slug,
        "role": trained.entry.role,
        "artifact_sha256": probe.sha256,
        ("layer_sweep" if isinstance(trained.sweep, SweepResult) else "selection"): trained.sweep.to_dict(),
        "train_auroc": trained.train_auroc,
        "evaluation": evaluation,
        "environment": environment(),
        "command": f"python -m evaluator reference-probes --only {trained.entry.slug}",
    }
    write_sidecar(directory, sidecar)
    return sidecar


def write_sidecar(directory: Path, sidecar: dict[str, Any]) -> None:
    (directory / SIDECAR).write_text(
        json.dumps(sidecar, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def read_sidecar(directory: Path) -> dict[str, Any]:
    """The recorded sweep and metrics of the probe in ``directory`` (reference.json)."""
    try:
        return json.loads((directory / SIDECAR).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvaluatorError(f"{directory / SIDECAR}: not found (train the probe first)") from None


# --------------------------------------------------------------------------- stale records


def _file_sha256(path: Path) -> str | None:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def record_problems(
    entry: ReferenceEntry, entries: Sequence[ReferenceEntry], registry: Registry
) -> list[str]:
    """Why ``entry``'s committed reference.json no longer describes what ``python -m evaluator
    evaluate`` would measure with its defaults today ([] when it is current). Reads files only."""

    directory = entry.directory(registry.root)
    try:
        sidecar = read_sidecar(directory)
    except EvaluatorError as exc:
        return [str(exc)]
    problems: list[str] = []
    artifact = _file_sha256(directory / ARTIFACT_NAME)
    if sidecar.get("artifact_sha256") != artifact:
        problems.append(f"artifact is {artifact}, the record says {sidecar.get('artifact_sha256')}")
    evaluation = sidecar.get("evaluation") or {}
    ea = ea_reference_for(entries, entry.base_model)
    want_ref = None if (ea is None or entry.role == EVAL_AWARENESS) else ea.path
    if evaluation.get("reference_probe") != want_ref:
        problems.append(
            f"auroc_ea was measured against {evaluation.get('reference_probe')}; the current"
            f" eval-awareness reference of {entry.base_model} is {want_ref}"
        )
    elif want_ref is not None:
        ref_sha = _file_sha256(registry.root / want_ref / ARTIFACT_NAME)
        if evaluation.get("reference_probe_sha256") != ref_sha:
            problems.append(f"{want_ref} has changed since auroc_ea was measured against it")
    model = registry.model(entry.base_model)
    if (evaluation.get("model") or {}).get("weights_sha256") != model.weights_sha256:
        problems.append(f"{entry.base_model}'s pinned weights have changed")
    tasks = evaluation.get("tasks") or {}
    if not tasks:
        problems.append("the record has no task measurements")
    for task_id, measured in tasks.items():
        try:
            task = registry.task(task_id)
        except RegistryError:
            problems.append(f"task {task_id} is no longer in tasks.yaml")
            continue
        pinned = task.splits_for(entry.base_model if task.on_policy else None)
        for split, sha in (measured.get("split_sha256") or {}).items():
            spec = pinned.get(split)
            if spec is None or spec.sha256 != sha:
                problems.append(f"{task_id}/{split} was measured on a split file that is no longer pinned")
    try:
        declared = json.loads((directory / METADATA_NAME).read_text(encoding="utf-8"))["declared_metrics"]
    except (FileNotFoundError, KeyError, ValueError):
        declared = None
    if evaluation.get("aggregate") and declared != declared_from(evaluation):
        problems.append("probe.json's declared_metrics are not the record's measured aggregate")
    return problems


def reevaluate(
    entry: ReferenceEntry,
    entries: Sequence[ReferenceEntry],
    registry: Registry,
    *,
    cache_dir: str | Path,
    device: str | None,
    dtype: str | None,
) -> dict[str, Any]:
    """Measure the committed artifact again (no refit) against the current eval-awareness
    reference, rewrite probe.json's declared metrics and reference.json's evaluation; the
    artifact's bytes, the layer sweep or selection and train_auroc are kept. Returns the sidecar."""

    directory = entry.directory(registry.root)
    sidecar = read_sidecar(directory)
    before = load_probe(directory, registry=registry).sha256
    ea = ea_reference_for(entries, entry.base_model)
    ref_dir = ea.directory(registry.root) if (ea is not None and entry.role != EVAL_AWARENESS) else None
    evaluation = evaluate_reference(
        directory, registry, cache_dir=cache_dir, reference_probe=ref_dir, device=device, dtype=dtype
    )
    meta_path = directory / METADATA_NAME
    metadata = json.loads(meta_path.read_text(encoding="utf-8"))
    metadata["declared_metrics"] = declared_from(evaluation)
    tmp = meta_path.with_name(f".{METADATA_NAME}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, meta_path)
    after = load_probe(directory, registry=registry)  # validates what was written
    if after.sha256 != before:
        raise EvaluatorError(f"{entry.slug}: the artifact changed while it was re-measured")
    sidecar |= {
        "artifact_sha256": after.sha256,
        "evaluation": evaluation,
        "environment": environment(),
        "command": f"python -m evaluator reference-probes --reevaluate --only {entry.slug}",
    }
    write_sidecar(directory, sidecar)
    return sidecar


# --------------------------------------------------------------------------- --check


@dataclass
class CheckResult:
    slug: str
    ok: bool
    committed_layer: int | None
    retrained_layer: int
    cosine: float | None
    max_abs_diff: float | None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:

        return fields_dict(self)


def compare_artifacts(
    slug: str, committed: dict[str, np.ndarray], committed_meta: dict[str, Any], trained: TrainedReference
) -> CheckResult:
    """Compare a retrained probe with the committed one (layer, recipe, tensors)."""

    problems: list[str] = []
    layer = committed_meta.get("layer")
    if layer != trained.recipe.layer:
        problems.append(f"layer: committed {layer}, the sweep now chooses {trained.recipe.layer}")
    if committed_meta.get("recipe") != trained.recipe.to_dict():
        problems.append("recipe in probe.json differs from the manifest's recipe at the chosen layer")
    if sorted(committed) != sorted(trained.tensors):
        problems.append(f"tensor names: committed {sorted(committed)}, retrained {sorted(trained.tensors)}")
    cosine = max_abs = None
    if not problems:
        diffs = []
        for name, new in trained.tensors.items():
            old = np.asarray(committed[name], dtype=np.float64)
            new = np.asarray(new, dtype=np.float64)
            if old.size == new.size == 1:  # a scalar bias is stored as shape [1] by save_probe
                old, new = old.reshape(1), new.reshape(1)
            if old.shape != new.shape:
                problems.append(f"tensor {name}: shape {old.shape} vs {new.shape}")
                continue
            diff = float(np.abs(old - new).max()) if old.size else 0.0
            diffs.append(diff)
            bound = CHECK_ATOL + CHECK_RTOL * float(np.abs(old).max() if old.size else 0.0)
            if diff > bound:
                problems.append(f"tensor {name}: max abs diff {diff:.3g} > {bound:.3g}")
        max_abs = max(diffs) if diffs else 0.0
        meta = ProbeMetadata.from_dict(committed_meta)

        def direction(tensors: dict[str, np.ndarray]) -> np.ndarray | None:
            arrays = {k: np.asarray(v, dtype=np.float64) for k, v in tensors.items()}
            kind = "mlp" if "w1" in arrays else "linear"
            return Probe(metadata=meta, tensors=arrays, kind=kind).direction()

        a, b = direction(committed), direction(trained.tensors)
        if a is not None and b is not None:
            cosine = float(a @ b / ((np.linalg.norm(a) * np.linalg.norm(b)) or 1.0))
            if cosine < CHECK_MIN_COSINE:
                problems.append(f"direction cosine {cosine:.5f} < {CHECK_MIN_COSINE}")
    return CheckResult(slug, not problems, layer, trained.recipe.layer, cosine, max_abs, problems)


# --------------------------------------------------------------------------- the command


def reference_probes_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", default=None, help="comma-separated slugs (default: every manifest entry)")
    p.add_argument("--check", action="store_true", help="retrain in memory and compare; write nothing")
    p.add_argument("--no-evaluate", action="store_true", help="write the artifacts, skip evaluate_probe")
    p.add_argument(
        "--reevaluate",
        action="store_true",
        help="keep the committed artifacts; measure them again and rewrite reference.json (no refit)",
    )
    p.add_argument(
        "--check-records",
        action="store_true",
        help="list every reference.json that is stale (no model is loaded); exit 1 if any",
    )
    p.add_argument(
        "--manifest", type=Path, default=None, help="default registry/reference_probes/manifest.yaml"
    )
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="model + activation cache (default $PROBEBENCH_CACHE_DIR, $PROBEBENCH_DATA_DIR/cache or ./var/cache)",
    )
    p.add_argument("--device", default="cpu", help="default cpu: the committed artifacts were made there")
    p.add_argument("--dtype", default="float32", choices=["auto", "float32", "bfloat16"])


def default_cache_dir() -> Path:
    """$PROBEBENCH_CACHE_DIR, else the CLI's default ($PROBEBENCH_DATA_DIR/cache or ./var/cache)."""
    env = os.environ.get("PROBEBENCH_CACHE_DIR")
    return Path(env) if env else cli_default()


def select(entries: list[ReferenceEntry], only: str | None) -> list[ReferenceEntry]:
    """The entries named in ``only`` (comma-separated slugs), in manifest order; all when empty."""
    if not only:
        return entries
    wanted = [s.strip() for s in only.split(",") if s.strip()]
    slugs = [e.slug for e in entries]
    for s in wanted:
        if s not in slugs:
            raise UnknownNameError("reference probe", s, slugs)
    return [e for e in entries if e.slug in wanted]


def run_reference_probes(args: argparse.Namespace) -> dict[str, Any]:
    """Retrain (and evaluate and write, or --check) the manifest's reference probes."""
    # imported when called: tests replace evaluator.core.models.load_model (no model may load)
    from evaluator.core.models import load_model

    reg = load_registry(args.registry)
    entries = load_manifest(reg, args.manifest)
    chosen = select(entries, args.only)
    cache_dir = args.cache_dir or default_cache_dir()
    if args.check_records:
        stale = {e.slug: p for e in chosen if (p := record_problems(e, entries, reg))}
        if stale:
            raise EvaluatorError(
                "stale reference records (python -m evaluator reference-probes --reevaluate --only SLUG):\n"
                + "\n".join(f"{slug}: {'; '.join(p)}" for slug, p in stale.items())
            )
        return {"check_records": True, "current": [e.slug for e in chosen]}
    if args.reevaluate:
        out = []
        for entry in chosen:
            start = time.perf_counter()
            sidecar = reevaluate(
                entry, entries, reg, cache_dir=cache_dir, device=args.device, dtype=args.dtype
            )
            out.append(
                {
                    "slug": entry.slug,
                    "aggregate": sidecar["evaluation"]["aggregate"],
                    "seconds": time.perf_counter() - start,
                }
            )
        return {"reevaluate": True, "probes": out}
    cache = ActivationCache(cache_dir)
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    for entry in chosen:
        start = time.perf_counter()
        lm = load_model(
            entry.base_model, registry=reg, cache_dir=cache_dir, device=args.device, dtype=args.dtype
        )
        trained = train_reference(entry, lm, reg, cache=cache)
        directory = entry.directory(reg.root)
        if args.check:
            committed = load_probe(directory, registry=reg)
            check = compare_artifacts(entry.slug, committed.tensors, committed.metadata.to_dict(), trained)
            if not check.ok:
                failures.append(f"{entry.slug}: {'; '.join(check.problems)}")
            results.append(check.to_dict())
            continue
        ea = ea_reference_for(entries, entry.base_model)
        ref_dir = ea.directory(reg.root) if (ea is not None and entry.role != EVAL_AWARENESS) else None
        if args.no_evaluate:
            save_probe(directory, trained.tensors, trained.metadata)
            results.append(
                {"slug": entry.slug, "layer": trained.recipe.layer, "cv_auroc": trained.sweep.best}
            )
            continue
        sidecar = write_reference(
            trained, reg, cache_dir=cache_dir, reference_probe=ref_dir, device=args.device, dtype=args.dtype
        )
        results.append(
            {
                "slug": entry.slug,
                "base_model": entry.base_model,
                "task": entry.task,
                "method": trained.recipe.method,
                "layer": trained.recipe.layer,
                "cv_auroc": trained.sweep.best,
                "test_auroc": sidecar["evaluation"]["tasks"][entry.task]["auroc"],
                "aggregate": sidecar["evaluation"]["aggregate"],
                "seconds": time.perf_counter() - start,
            }
        )
    if failures:
        raise EvaluatorError("reference probes differ from the committed artifacts:\n" + "\n".join(failures))
    return {"check": bool(args.check), "probes": results}
