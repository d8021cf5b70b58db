"""The automatic baselines of a probe's test run: seeded random directions and diff-of-means
(fit on the train split) at the probe's layer, position and input, on the same activations; the
probe's lift over each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.core.recipes import Recipe, fit_recipe
from evaluator.metrics.metrics import auroc
from evaluator.metrics.results import fields_dict

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.activations import SplitActivations


RANDOM_BASELINE_DIRECTIONS = 10


BASELINE_SEED = 0


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
