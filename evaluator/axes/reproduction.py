"""Reproduction: rerun a probe's recipe on its base model and judge the re-fit against the
uploaded artifact by their scores on the recipe task's test rows.

The reproduced mark is judged by the measurement protocol's tolerances (registry/protocols/,
``tolerances.reproduction``): the re-fit's scores on the test rows, not its weight vector.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.axes.run import as_probe, as_registry
from evaluator.core.activations import ActivationCache, split_activations
from evaluator.core.harvest import HarvestConfig
from evaluator.core.probes import Probe, probe_from_tensors
from evaluator.core.recipes import Recipe, train_recipe
from evaluator.data.registry.load import Registry
from evaluator.errors import EvaluatorError
from evaluator.metrics.metrics import auroc, pearson
from evaluator.metrics.results import Progress, fields_dict, no_progress, sub_progress

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.protocols import Protocol, ProtocolTolerances


@dataclass(frozen=True)
class ReproductionResult:
    task_id: str
    method: str
    cosine: float | None  # of the raw-space directions (None for MLP and SAE probes): information only
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
    refit = probe_from_tensors(
        trained.tensors, p.metadata, registry=reg, artifact_metadata=trained.artifact_metadata
    )
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
