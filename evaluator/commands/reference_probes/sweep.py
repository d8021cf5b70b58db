"""The layer sweep: a reference probe's layer chosen on the task's train split only (grouped,
stratified cross-validation; the highest mean held-out AUROC, ties by log-loss, then the lower layer)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.core.activations import ActivationCache, split_activations
from evaluator.core.probes import Probe, ProbeMetadata, tensors_kind
from evaluator.core.recipes import Recipe, fit_recipe
from evaluator.core.sae_probe import SAE_KIND, sae_encoder
from evaluator.errors import EvaluatorError
from evaluator.metrics.metrics import auroc, sigmoid
from evaluator.metrics.results import fields_dict

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.activations import SplitActivations
    from evaluator.core.harvest import HarvestConfig, Progress
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.load import Registry

log = logging.getLogger(__name__)

SWEEP_FOLDS = 5
SWEEP_DECIMALS = 3
LOG_LOSS_DECIMALS = 4
SWEEP_RULE = (
    f"highest mean held-out AUROC over the folds (rounded to {SWEEP_DECIMALS} decimals); ties broken by"
    f" the lowest mean held-out log-loss of sigmoid(s) (rounded to {LOG_LOSS_DECIMALS} decimals), then"
    " the lower layer"
)


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


def score_tensors(
    recipe: Recipe, tensors: dict[str, np.ndarray], X: np.ndarray, registry: Registry | None = None
) -> np.ndarray:
    """s(x) of freshly fitted recipe tensors, exactly as :class:`evaluator.core.probes.Probe` scores
    (an SAE recipe's through its SAE, which ``registry`` resolves)."""

    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in tensors.items()}
    kind = tensors_kind(arrays)
    sae = None
    if kind == SAE_KIND:
        if registry is None:
            raise EvaluatorError("an SAE recipe's probe reads its SAE: scoring it needs the registry")
        sae = sae_encoder(registry.root, registry.saes.sae(recipe.params["sae"]))
    meta = ProbeMetadata(
        "cv", "eval_awareness", "-", recipe.layer, recipe.position, recipe.input, "logit", "-"
    )
    return Probe(metadata=meta, tensors=arrays, kind=kind, sae=sae).score(X)


def cv_score(
    recipe: Recipe,
    X: np.ndarray,
    y: np.ndarray,
    folds: Sequence[tuple[np.ndarray, np.ndarray]],
    registry: Registry | None = None,
) -> CVScore:
    """The recipe fitted on each fold's fit rows and scored on its held-out rows (``registry``:
    where an SAE recipe finds its SAE)."""

    aurocs, losses = [], []
    for fit, held in folds:
        tensors = fit_recipe(recipe, X[fit], y[fit], registry=registry)
        s = score_tensors(recipe, tensors, X[held], registry)
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
    registry: Registry | None = None,
) -> SweepResult:
    """Cross-validate ``recipe`` at every layer of ``train_by_layer`` (train split only) and
    choose the layer (:func:`choose_layer`). The folds are the same at every layer. An SAE recipe
    reads its SAE's one layer (``registry`` resolves the SAE)."""
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
        cv = cv_score(recipe.at_layer(layer), acts.X, y, split_folds, registry)
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
