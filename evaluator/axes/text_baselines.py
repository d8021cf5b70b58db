"""The committed text-baseline panels, and a probe's lift over the strongest of them.

``python -m evaluator data-baselines --write`` fits the text-only panel (:mod:`evaluator.axes.text_panel`)
of every task (an on-policy task: of every base model's own files) on train and scores its test and
distshift rows. Each result is one JSON file, ``registry/baselines/<task>.json`` (on-policy:
``registry/baselines/<task>/<model>.json``), whose SHA-256 tasks.yaml pins as the task's
``text_panel`` (a hash, or ``{model: hash}`` for an on-policy task). A file holds, per member, the
hyperparameters CV chose, its CV AUROC on train and its AUROC with interval on each scored split,
and every scored row's decision value (``scores``: per split, the row ids and one list per
member). The board reads these files; it never refits a baseline.

The bar a probe is judged against on a split is the **strongest member on that split's rows**
(:func:`strongest`): the highest AUROC there among members whose hyperparameters were each chosen
by CV on train. Choosing the member on the very rows it is scored on favours the text side (the
best of six correlated estimates is a little lucky), so a lift over it is, if anything, an
understatement: a probe that beats it beats every text-only model of the panel. The member CV on
train would have chosen is kept beside it (:func:`chosen_by_cv`).

:func:`text_lift` pairs a probe's per-row test scores with the strongest member's by row id and
gives the lift (probe AUROC − baseline AUROC on the same rows) with DeLong's paired 95% interval.
:func:`controlled_auroc` asks the sharper question: regressing the label on the probe's score
together with the strongest member's and the length member's (cross-fitted on the test rows), how
much AUROC does the probe add over those controls alone?

Pure: numpy and the evaluator; no Django.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.axes.text_panel import (
    AUROC_DECIMALS,
    C_GRID,
    GBM_DEPTHS,
    GBM_ITERS,
    GBM_RATES,
    best_member,
    task_panel,
)
from evaluator.data.registry.load import load_registry
from evaluator.data.registry.tasks import panel_bytes_pinned, panel_relpath
from evaluator.errors import EvaluatorError
from evaluator.metrics.compare import Z95, delong_test

#: the file format's version (bumped when a field changes meaning)
PANEL_FORMAT = 1
#: the splits a panel scores, when the task has them
PANEL_SPLITS: tuple[str, ...] = ("test", "distshift")
#: two-sided 95% normal quantile (the lift's interval)
#: decimals kept of a member's per-row decision value
SCORE_DECIMALS = 6


def panel_bytes(document: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a panel file (what its pinned hash is taken over)."""
    return (json.dumps(document, indent=1, sort_keys=True, allow_nan=False) + "\n").encode()


def panel_document(result, *, task_id: str, model: str | None, encoder: str | None) -> dict[str, Any]:
    """A :class:`evaluator.axes.text_panel.PanelResult` as the committed file's JSON."""

    members = result.members
    splits = [s for s in PANEL_SPLITS if all(s in m.splits for m in members.values())]
    scores: dict[str, Any] = {}
    for split in splits:
        ids = next(iter(members.values())).splits[split].ids
        scores[split] = {"ids": list(ids)} | {
            name: [round(v, SCORE_DECIMALS) for v in m.splits[split].scores] for name, m in members.items()
        }
    return {
        "format": PANEL_FORMAT,
        "task": task_id,
        "model": model,
        "protocol": {
            "folds": result.folds,
            "seed": result.seed,
            "C_grid": list(C_GRID),
            "gbm_grid": {
                "max_depth": list(GBM_DEPTHS),
                "learning_rate": list(GBM_RATES),
                "max_iter": list(GBM_ITERS),
            },
            "encoder": encoder,
        },
        "members": {
            name: {
                "params": dict(m.params),
                "cv_auroc": round(m.cv_auroc, AUROC_DECIMALS),
                "splits": {
                    s: {
                        "auroc": round(m.splits[s].auroc, AUROC_DECIMALS),
                        "ci": [
                            round(m.splits[s].ci[0], AUROC_DECIMALS),
                            round(m.splits[s].ci[1], AUROC_DECIMALS),
                        ],
                        "n": len(m.splits[s].ids),
                    }
                    for s in splits
                },
            }
            for name, m in members.items()
        },
        "scores": scores,
        "notes": list(result.notes),
    }


def summary(document: Mapping[str, Any], *, sha256: str) -> dict[str, Any]:
    """A panel without its per-row scores (what the board keeps on the task), with its hash."""
    return {k: v for k, v in document.items() if k != "scores"} | {"sha256": sha256}


def strongest(panel: Mapping[str, Any], split: str = "test") -> str | None:
    """The member with the highest AUROC on ``split`` (:func:`evaluator.axes.text_panel.best_member`);
    None when the panel did not score that split."""

    values = {}
    for name, member in (panel.get("members") or {}).items():
        value = ((member.get("splits") or {}).get(split) or {}).get("auroc")
        if isinstance(value, (int, float)):
            values[name] = float(value)
    return best_member(values)


def chosen_by_cv(panel: Mapping[str, Any]) -> str | None:
    """The member cross-validation on train picks (highest CV AUROC, :func:`best_member`)."""

    members = panel.get("members") or {}
    return best_member(
        {n: float(m["cv_auroc"]) for n, m in members.items() if isinstance(m.get("cv_auroc"), (int, float))}
    )


def load_panel(root: Path, task, model: str | None) -> dict[str, Any] | None:
    """The committed panel of ``task`` (a :class:`evaluator.data.registry.tasks.TaskSpec`) for a probe on
    ``model``, or None when tasks.yaml pins none."""
    pinned = task.text_panel_sha256(model)
    if pinned is None:
        return None
    return read_panel(root, task.id, model if task.on_policy else None, pinned)


def read_panel(root: Path, task_id: str, model: str | None, sha256: str) -> dict[str, Any]:
    """A panel file (``model``: the base model of an on-policy task's file, else None), checked
    against its pinned hash (:func:`evaluator.data.registry.tasks.panel_bytes_pinned`)."""
    return json.loads(panel_bytes_pinned(root, task_id, model, sha256))


def member_scores(panel: Mapping[str, Any], member: str, split: str = "test") -> dict[str, float]:
    """Row id → the member's decision value on ``split``."""
    block = (panel.get("scores") or {}).get(split)
    if not block or member not in block:
        raise EvaluatorError(f"the text-baseline panel has no {split} scores for member {member}")
    return dict(zip(block["ids"], block[member], strict=True))


def text_lift(
    panel: Mapping[str, Any], rows: Iterable[tuple[str, int, float]], split: str = "test"
) -> dict[str, Any] | None:
    """A probe's lift over the panel's strongest member on ``split``: ``rows`` are the probe's
    (row id, label, score). Paired by row id: a probe row the panel did not score is an error
    (the two must read the same split file). Returns ``{"name", "auroc", "lift", "ci",
    "p_value"}`` (``auroc``: the baseline's on these rows), or None when the panel has no score
    on ``split``."""

    name = strongest(panel, split)
    if name is None:
        return None
    baseline = member_scores(panel, name, split)
    rows = list(rows)
    missing = [i for i, _, _ in rows if i not in baseline]
    if missing:
        raise EvaluatorError(
            f"the text-baseline panel scored no row {missing[0]!r} of this {split} split"
            f" ({len(missing)} of {len(rows)} rows missing): it was built from another file"
        )
    labels = np.array([y for _, y, _ in rows], dtype=np.int64)
    probe = np.array([s for _, _, s in rows], dtype=np.float64)
    text = np.array([baseline[i] for i, _, _ in rows], dtype=np.float64)
    test = delong_test(probe, text, labels)
    half = Z95 * math.sqrt(test.variance)
    return {
        "name": name,
        "auroc": round(test.auroc_b, 6),
        "lift": round(test.delta, 6),
        "ci": [round(test.delta - half, 6), round(test.delta + half, 6)],
        "p_value": test.p_value,
    }


#: folds and seed of the confound-controlled AUROC's cross-fitting on the test rows
CONTROL_FOLDS = 5
CONTROL_SEED = 20260402
#: the panel members whose scores are the controls (beside the strongest member)
CONTROL_MEMBERS = ("length",)


def controlled_auroc(
    panel: Mapping[str, Any], rows: Iterable[tuple[str, int, float]], split: str = "test"
) -> dict[str, Any] | None:
    """What the probe adds beyond the text: the AUROC of a logistic regression of the label on
    [probe score, strongest text baseline's score, length member's score] minus that of one on the
    controls alone, both cross-fitted on ``split``'s rows (``CONTROL_FOLDS`` stratified folds: each
    row is predicted by models fit on the other folds, so no row scores a model it was fit on).
    The probe and the panel were fit on train; only the combination is fit here. Returns
    ``{"auroc", "controls_auroc", "delta", "ci", "controls"}`` (``ci``: DeLong's paired 95%
    interval of ``delta``), or None when the panel has no score on ``split``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    best = strongest(panel, split)
    if best is None:
        return None
    controls = [best] + [m for m in CONTROL_MEMBERS if m != best and m in (panel.get("members") or {})]
    by_member = {m: member_scores(panel, m, split) for m in controls}
    rows = list(rows)
    missing = [i for i, _, _ in rows if i not in by_member[best]]
    if missing:
        raise EvaluatorError(f"the text-baseline panel scored no row {missing[0]!r} of this {split} split")
    y = np.array([label for _, label, _ in rows], dtype=np.int64)
    x_controls = np.array([[by_member[m][i] for m in controls] for i, _, _ in rows], dtype=np.float64)
    x_full = np.column_stack([x_controls, [score for _, _, score in rows]])
    n_minor = int(min(y.sum(), y.size - y.sum()))
    folds = min(CONTROL_FOLDS, n_minor)
    if folds < 2:
        return None
    predicted = {"controls": np.zeros(y.size), "full": np.zeros(y.size)}
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=CONTROL_SEED)
    for fit_rows, held in splitter.split(x_full, y):
        for name, x in (("controls", x_controls), ("full", x_full)):
            model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=5000))
            predicted[name][held] = model.fit(x[fit_rows], y[fit_rows]).decision_function(x[held])
    test = delong_test(predicted["full"], predicted["controls"], y)
    half = Z95 * math.sqrt(test.variance)
    return {
        "auroc": round(test.auroc_a, 6),
        "controls_auroc": round(test.auroc_b, 6),
        "delta": round(test.delta, 6),
        "ci": [round(test.delta - half, 6), round(test.delta + half, 6)],
        "controls": controls,
    }


def write_panels(
    root: Path, task_ids: Iterable[str] | None = None, *, embed=None, encoder: str | None = None
) -> dict[str, Any]:
    """Fit and write the panel file of every (task, model) of ``task_ids`` (default: every task);
    returns the ``text_panel`` pins to store in tasks.yaml, per task."""

    registry = load_registry(root)
    wanted = list(task_ids) if task_ids else list(registry.tasks)
    pins: dict[str, Any] = {}
    for task_id in wanted:
        task = registry.task(task_id)
        models: list[str | None] = list(task.splits_by_model) if task.on_policy else [None]
        per_model: dict[str, str] = {}
        for model in models:
            splits = [s for s in PANEL_SPLITS if s in task.splits_for(model)]
            result = task_panel(registry, task_id, model=model, splits=splits, embed=embed)
            data = panel_bytes(panel_document(result, task_id=task_id, model=model, encoder=encoder))
            path = Path(root) / panel_relpath(task_id, model)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            per_model[model or ""] = hashlib.sha256(data).hexdigest()
        pins[task_id] = per_model if task.on_policy else per_model[""]
    return pins
