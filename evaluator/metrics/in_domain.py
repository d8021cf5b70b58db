"""In-domain and cross-domain: a probe's means over the tasks it was trained on, and over the others.

A probe is scored on every applicable task of its category, but it was fit on one of them (its
recipe's task) or on the tasks it declares (``trained_on``). On those it is in distribution; on
the category's other tasks it is frozen and out of domain, while the text-only panel it is compared
with is refit on each task. The mean over all tasks mixes the two; these split it:

- :func:`in_domain_tasks`: the task ids a probe version was trained on, or None when it declares
  none (a version stored before the declaration existed): the split is then "not declared";
- :func:`domain_split`: from the per-task records, the in-domain and cross-domain means of AUROC,
  lift over text and controlled AUROC, each with its 95% interval, computed as the all-task means
  are (``auroc_mean_ci`` for AUROC, ``mean_delta_ci`` for the differences).

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from evaluator.metrics.compare import mean_delta_ci
from evaluator.metrics.metrics import auroc_mean_ci

#: ``trained_on``'s entry for training data outside the registry (declared by its text hashes)
EXTERNAL = "external"
#: the two sides of the split, as the metric names end
SIDES = ("in_domain", "cross_domain")
#: the per-task metrics split, each stored as ``<name>_<side>`` and ``<name>_<side>_ci``
SPLIT_METRICS = ("auroc", "lift_over_text", "controlled_auroc")
#: Score.measurements key of the scored tasks counted in-domain (None: not declared)
IN_DOMAIN_TASKS_KEY = "in_domain_tasks"


def split_keys() -> tuple[str, ...]:
    """The stored keys of the split, in order: each metric's two sides, each with its interval."""
    out: list[str] = []
    for name in SPLIT_METRICS:
        for side in SIDES:
            out += [f"{name}_{side}", f"{name}_{side}_ci"]
    return tuple(out)


def in_domain_tasks(version: Any) -> set[str] | None:
    """The registry task ids ``version`` was trained on: its recipe's task (a recipe trains on one
    task's train split), else the tasks of its declared ``trained_on`` (``"external"`` alone: none,
    every task is cross-domain); None when it declares neither (stored before the declaration was
    required), so that the split is never guessed."""
    recipe = getattr(version, "recipe", None)
    if isinstance(recipe, Mapping) and isinstance(recipe.get("task"), str) and recipe["task"]:
        return {recipe["task"]}
    metadata = getattr(version, "metadata", None)
    declared = metadata.get("trained_on") if isinstance(metadata, Mapping) else None
    if isinstance(declared, str):
        declared = [declared]
    if not isinstance(declared, list) or not declared:
        return None
    return {t for t in declared if isinstance(t, str) and t != EXTERNAL}


def _delta_mean(values: list[tuple[float, Any]]) -> tuple[float | None, list[float] | None]:
    """The mean of per-task differences and its interval (None unless every task has one)."""
    if not values:
        return None, None
    mean = float(np.mean([v for v, _ in values]))
    with_ci = [(v, (ci[0], ci[1])) for v, ci in values if ci is not None]
    ci = mean_delta_ci(with_ci) if len(with_ci) == len(values) else None
    return mean, None if ci is None else list(ci)


def domain_split(
    records: Mapping[str, Any],
    *,
    tests: Mapping[str, tuple[np.ndarray, np.ndarray]],
    in_domain: Collection[str] | None,
) -> dict[str, Any]:
    """The in-domain and cross-domain means of a probe's scored tasks (:func:`split_keys`, then
    :data:`IN_DOMAIN_TASKS_KEY`).

    ``records``: task → its :class:`evaluator.metrics.records.TaskRecord` (``metrics.auroc``,
    ``lift_over_text`` and ``controlled_auroc`` with their intervals); ``tests``: task → its test
    scores and labels (the AUROC interval resamples them); ``in_domain``: :func:`in_domain_tasks`.
    A side with no scored task, or a metric no task of it has, is None; with ``in_domain`` None
    every value is None (not declared)."""
    out: dict[str, Any] = dict.fromkeys(split_keys())
    out[IN_DOMAIN_TASKS_KEY] = None
    if in_domain is None:
        return out
    inside = sorted(t for t in records if t in in_domain)
    out[IN_DOMAIN_TASKS_KEY] = inside
    sides = {"in_domain": inside, "cross_domain": sorted(t for t in records if t not in in_domain)}
    for side, tasks in sides.items():
        aurocs = [(t, records[t].metrics.auroc) for t in tasks if records[t].metrics.auroc is not None]
        if aurocs:
            out[f"auroc_{side}"] = float(np.mean([v for _, v in aurocs]))
            out[f"auroc_{side}_ci"] = list(auroc_mean_ci([tests[t] for t, _ in aurocs]))
        for name in ("lift_over_text", "controlled_auroc"):
            values = [
                (getattr(records[t], name), getattr(records[t], f"{name}_ci"))
                for t in tasks
                if getattr(records[t], name) is not None
            ]
            out[f"{name}_{side}"], out[f"{name}_{side}_ci"] = _delta_mean(values)
    return out
