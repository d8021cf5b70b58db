"""What an SAE-feature probe buys over the raw residual, and what its latents read.

An ``sae_features`` probe reads k latents of one of our sparse autoencoders at its layer and the
last token. Whether the SAE helps is a question about the same budget without it, so one run
measures, beside the probe, on the same rows:

- **the same-k neuron probe**: the probe's selection rule on the raw residual (the k dimensions
  with the largest |mean difference| on the same train split, then logistic regression with C
  chosen by cross-validation on train: the ``neuron_topk_meandiff`` recipe at the probe's k);
- **the dense probe**: the same recipe with k = d_model (every dimension, C by the same
  cross-validation): what a linear probe at this layer and position reaches with no sparsity.

Both are fit on the SAE probe's own training task and scored on the test split of every task the
probe reads, the rows its score runs read, so each task's three AUROCs compare like with like
(the same rows, layer and read position), in-domain (the training task) and cross-domain (the
category's other tasks, where all three are frozen). Each AUROC has its 95% bootstrap interval and
each difference (SAE − neurons, SAE − dense) its paired bootstrap interval.

Then the feature cards of the probe's latents (:func:`evaluator.core.sae.features.feature_cards`):
the held-out corpus snippets that activate each most, so a reader sees what the probe reads. What
the run does not show: anything about latents the probe does not read, or about other k.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.core.activations import ActivationCache, split_activations
from evaluator.core.harvest import HarvestConfig
from evaluator.core.probes import Probe
from evaluator.core.recipes import fit_topk_logistic
from evaluator.errors import EvaluatorError
from evaluator.metrics.compare import paired_delta_ci
from evaluator.metrics.metrics import auroc, auroc_ci
from evaluator.metrics.results import Progress, fields_dict, no_progress, sub_progress

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.load import Registry

#: held-out corpus tokens the feature cards read, and the snippets kept per latent
FEATURE_TOKENS = 16_384
FEATURE_TOP = 5


@dataclass(frozen=True)
class TaskComparison:
    """One task's test split: the SAE probe, the same-k neuron probe and the dense probe."""

    task_id: str
    in_domain: bool
    n: int
    sae_auroc: float
    sae_ci: list[float]
    neurons_auroc: float
    neurons_ci: list[float]
    dense_auroc: float
    dense_ci: list[float]
    sae_minus_neurons: float
    sae_minus_neurons_ci: list[float]
    sae_minus_dense: float
    sae_minus_dense_ci: list[float]

    def to_dict(self) -> dict[str, Any]:
        return fields_dict(self)


@dataclass(frozen=True)
class SaeBaselineResult:
    sae_id: str
    k: int
    layer: int
    train_task: str
    neurons: dict[str, Any]  # the chosen dimensions, C and the cross-validated AUROC
    dense: dict[str, Any]  # C and the cross-validated AUROC
    tasks: list[TaskComparison]
    features: list[dict[str, Any]]
    train_cache_key: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        out = fields_dict(self)
        out["tasks"] = [t.to_dict() for t in self.tasks]
        return out


def _interval(pair: tuple[float, float]) -> list[float]:
    return [float(pair[0]), float(pair[1])]


def task_comparison(
    task_id: str,
    *,
    in_domain: bool,
    labels: np.ndarray,
    sae: np.ndarray,
    neurons: np.ndarray,
    dense: np.ndarray,
) -> TaskComparison:
    """The three probes' AUROCs on one task's rows, with their intervals and the paired ones of
    the differences. Pure."""
    a_sae, a_neurons, a_dense = auroc(sae, labels), auroc(neurons, labels), auroc(dense, labels)
    return TaskComparison(
        task_id=task_id,
        in_domain=in_domain,
        n=int(labels.size),
        sae_auroc=a_sae,
        sae_ci=_interval(auroc_ci(sae, labels)),
        neurons_auroc=a_neurons,
        neurons_ci=_interval(auroc_ci(neurons, labels)),
        dense_auroc=a_dense,
        dense_ci=_interval(auroc_ci(dense, labels)),
        sae_minus_neurons=a_sae - a_neurons,
        sae_minus_neurons_ci=_interval(paired_delta_ci(sae, neurons, labels)),
        sae_minus_dense=a_sae - a_dense,
        sae_minus_dense_ci=_interval(paired_delta_ci(sae, dense, labels)),
    )


def sae_baselines(
    probe: Probe,
    *,
    train_task: str,
    tasks: Sequence[str],
    registry: Registry,
    cache_dir: str | Path,
    lm: LoadedModel,
    documents: Sequence[str] | None,
    harvest_config: HarvestConfig | None = None,
    progress: Progress | None = None,
    seed: int = 0,
    feature_tokens: int = FEATURE_TOKENS,
) -> SaeBaselineResult:
    """The same-k neuron and dense baselines of ``probe`` (an ``sae_features`` probe) fit on
    ``train_task``'s train split and scored beside it on the test split of each of ``tasks``;
    then the feature cards of its latents on the held-out corpus ``documents`` (none without)."""
    from evaluator.core.sae.features import feature_cards

    start = time.perf_counter()
    progress = progress or no_progress
    if probe.kind != "sae_features" or probe.sae is None:
        raise EvaluatorError(
            f"probe {probe.metadata.name!r} is a {probe.kind} probe, not an sae_features one"
        )
    if lm.id != probe.base_model:
        raise EvaluatorError(f"probe {probe.metadata.name!r} reads {probe.base_model}, not {lm.id}")
    cache = ActivationCache(cache_dir)
    meta = probe.metadata

    def activations(task_id: str, split: str, lo: float, hi: float):
        return split_activations(
            lm,
            registry,
            task_id,
            split,
            layers=[meta.layer],
            position=meta.position,
            input_kind=meta.input,
            cache=cache,
            config=harvest_config,
            progress=sub_progress(progress, lo, hi, f"{task_id} {split} "),
        )[meta.layer]

    train = activations(train_task, "train", 0.0, 0.2)
    k = probe.sae_k
    neurons = fit_topk_logistic(train.X, train.labels, k=k, seed=seed)
    dense = fit_topk_logistic(train.X, train.labels, k=int(train.X.shape[1]), seed=seed)
    compared = []
    for i, task_id in enumerate(tasks):
        span = 0.6 / max(1, len(tasks))
        test = activations(task_id, "test", 0.2 + i * span, 0.2 + (i + 1) * span)
        compared.append(
            task_comparison(
                task_id,
                in_domain=task_id == train_task,
                labels=test.labels,
                sae=probe.score(test.X),
                neurons=neurons.score(test.X),
                dense=dense.score(test.X),
            )
        )
    features: list[dict[str, Any]] = []
    if documents:
        progress(0.8, "feature cards")
        features = feature_cards(
            lm,
            probe.sae.sae,
            layer=meta.layer,
            documents=documents,
            context=probe.sae.context,
            latents=probe.sae_latents,
            tokens=feature_tokens,
            top=FEATURE_TOP,
        )
        weights = np.asarray(probe.tensors["weight"], dtype=np.float64).reshape(-1)
        for card, weight in zip(features, weights, strict=True):
            card["weight"] = float(weight)
    progress(1.0, "done")
    return SaeBaselineResult(
        sae_id=probe.sae.id,
        k=k,
        layer=meta.layer,
        train_task=train_task,
        neurons=neurons.info,
        dense={key: v for key, v in dense.info.items() if key != "indices"},
        tasks=compared,
        features=features,
        train_cache_key=train.cache_key,
        seconds=time.perf_counter() - start,
    )
