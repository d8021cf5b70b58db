"""Shift-aware selection of an eval-awareness reference probe.

The first eval-awareness reference probes (``ea-smollm2``, ``ea-gemma3``) were chosen by a layer
sweep whose folds share the benchmark layouts and user frames: every layer scored ~1.000, and the
probes fell to chance on benchmark-vs-user-v1's distshift split, where the layouts and frames are
new. A second reference probe is chosen by a rule that scores what the distshift asks for —
generalising to a *format it has not seen* — while reading the train split only.

The rule (:data:`RULE`, fixed before any distshift number of the new probes was looked at):

- **folds**: one per format (a row's ``meta.frame``: a benchmark layout ``bench*`` or a user frame
  ``user*``) that covers at least :data:`MIN_FORMAT_GROUPS` groups of train. A fold holds out every
  row of every group (question) with a row in that format — the format's rows and their
  same-question partners — and fits on the other groups, so the held-out format is never seen in
  fitting and no question straddles fit and held-out. Formats below the threshold are never held
  out (their rows are always fitted).
- **candidates**: the manifest's grid of methods (with hyperparameters) × positions × every layer.
- **score**: held-out AUROC per fold. The chosen candidate has the highest **worst-fold** AUROC
  (rounded to 3 decimals); ties broken by the highest mean fold AUROC (3 decimals), then the lowest
  mean held-out log-loss of sigmoid(s) (4 decimals), then the earlier candidate in the manifest's
  order, then the lower layer.

The chosen recipe is then fitted on the whole train split
(:func:`evaluator.commands.reference_probes.training.train_selected`). test and distshift are measured only
afterwards, by the usual evaluation (``reference.json``); they are never read here.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.errors import EvaluatorError, RegistryError, SplitHashMismatch
from evaluator.metrics.metrics import auroc, sigmoid
from evaluator.metrics.results import fields_dict

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.recipes import Recipe
    from evaluator.data.registry.load import Registry

log = logging.getLogger(__name__)

RULE_NAME = "held_out_format"
FORMAT_KEY = "frame"  # the row meta key naming the format (evaluator/data/builders/eval_awareness.py)
MIN_FORMAT_GROUPS = 10
AUROC_DECIMALS = 3
LOG_LOSS_DECIMALS = 4
RULE = (
    f"held-out-format cross-validation on train: one fold per benchmark layout or user frame covering"
    f" at least {MIN_FORMAT_GROUPS} groups, holding out every group with a row in that format and fitting"
    f" on the others; highest worst-fold AUROC (rounded to {AUROC_DECIMALS} decimals), then highest mean"
    f" fold AUROC ({AUROC_DECIMALS} decimals), then lowest mean held-out log-loss ({LOG_LOSS_DECIMALS}"
    " decimals), then the earlier candidate in the manifest's order, then the lower layer"
)


@dataclass(frozen=True)
class Candidate:
    """One method (with its hyperparameters) at one position; the layer is swept."""

    method: str
    hyperparameters: dict[str, Any]
    position: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "hyperparameters": dict(self.hyperparameters),
            "position": self.position,
        }

    def label(self) -> str:
        hp = ", ".join(f"{k} = {v}" for k, v in sorted(self.hyperparameters.items()))
        where = {
            "last_token": "the last-token residual",
            "mean": "the mean-pooled residual",
            "max": "the max-pooled residual",
        }
        return f"{self.method}{f' ({hp})' if hp else ''} on {where.get(self.position, self.position)}"


def parse_selection(raw: Any, where: str) -> tuple[Candidate, ...]:
    """The manifest's ``selection`` block: ``{rule: held_out_format, positions: [...], methods:
    [{method, hyperparameters}, ...]}`` → candidates in manifest order (methods outer, positions
    inner). Structural checks only; the recipes are validated by the manifest loader."""

    if not isinstance(raw, dict) or raw.get("rule") != RULE_NAME:
        raise RegistryError(f"{where}: selection needs rule: {RULE_NAME}")
    unknown = sorted(set(raw) - {"rule", "positions", "methods"})
    if unknown:
        raise RegistryError(f"{where}: selection: unknown key(s) {', '.join(unknown)}")
    positions, methods = raw.get("positions"), raw.get("methods")
    if not isinstance(positions, list) or not positions or not all(isinstance(p, str) for p in positions):
        raise RegistryError(f"{where}: selection.positions must be a non-empty list")
    if not isinstance(methods, list) or not methods:
        raise RegistryError(f"{where}: selection.methods must be a non-empty list")
    out: list[Candidate] = []
    for m in methods:
        if not isinstance(m, dict) or not m.get("method") or set(m) - {"method", "hyperparameters"}:
            raise RegistryError(f"{where}: selection.methods: each is {{method, hyperparameters}}")
        for position in positions:
            out.append(Candidate(str(m["method"]), dict(m.get("hyperparameters") or {}), position))
    if len({json.dumps(c.to_dict(), sort_keys=True) for c in out}) != len(out):
        raise RegistryError(f"{where}: selection lists a candidate twice")
    return tuple(out)


# --------------------------------------------------------------------------- folds


@dataclass(frozen=True)
class FormatFold:
    """Hold out ``fmt``: every row of a group with a row in that format."""

    fmt: str
    fit: np.ndarray
    held: np.ndarray


def format_folds(
    labels: np.ndarray,
    groups: Sequence[str],
    formats: Sequence[str],
    *,
    min_groups: int = MIN_FORMAT_GROUPS,
) -> list[FormatFold]:
    """One fold per format covering at least ``min_groups`` groups, in sorted format order.

    Raises when fewer than two formats qualify, or a fold lacks a class on either side.
    """
    y = np.asarray(labels)
    groups, formats = list(groups), list(formats)
    if not (len(groups) == len(formats) == y.size):
        raise EvaluatorError("format folds: labels, groups and formats differ in length")
    groups_of: dict[str, set[str]] = {}
    for g, f in zip(groups, formats, strict=True):
        groups_of.setdefault(f, set()).add(g)
    folds: list[FormatFold] = []
    for fmt in sorted(groups_of):
        out = groups_of[fmt]
        if len(out) < min_groups:
            continue
        held = np.array([i for i, g in enumerate(groups) if g in out], dtype=np.int64)
        fit = np.array([i for i, g in enumerate(groups) if g not in out], dtype=np.int64)
        for name, idx in (("fit", fit), ("held-out", held)):
            if idx.size == 0 or len(set(y[idx].tolist())) < 2:
                raise EvaluatorError(f"format folds: holding out {fmt} leaves one class in {name}")
        folds.append(FormatFold(fmt, fit, held))
    if len(folds) < 2:
        raise EvaluatorError(
            f"format folds: {len(folds)} format(s) cover {min_groups} groups; the rule needs two or more"
        )
    return folds


def split_formats(
    registry: Registry, task_id: str, split: str, ids: Sequence[str], *, model: str | None = None
) -> list[str]:
    """``meta.frame`` of each row of a tasks.yaml split, in the order of ``ids`` (hash verified)."""
    spec = registry.task(task_id).splits_for(model)[split]
    data = (registry.root / spec.path).read_bytes()
    if hashlib.sha256(data).hexdigest() != spec.sha256:
        raise SplitHashMismatch(str(spec.path), spec.sha256, hashlib.sha256(data).hexdigest())
    by_id = {}
    for line in data.decode("utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            by_id[str(row["id"])] = (row.get("meta") or {}).get(FORMAT_KEY)
    missing = [i for i in ids if not by_id.get(i)]
    if missing:
        raise EvaluatorError(f"{task_id}/{split}: {len(missing)} row(s) have no meta.{FORMAT_KEY}")
    return [str(by_id[i]) for i in ids]


# --------------------------------------------------------------------------- scoring and the rule


@dataclass
class CandidateScore:
    candidate: int  # index into the candidates
    layer: int
    fold_auroc: list[float]
    log_loss: float  # mean over folds

    @property
    def worst(self) -> float:
        return float(min(self.fold_auroc))

    @property
    def mean(self) -> float:
        return float(np.mean(self.fold_auroc))

    def key(self) -> tuple:
        """:data:`RULE` as a sort key (smallest wins)."""
        return (
            -round(self.worst, AUROC_DECIMALS),
            -round(self.mean, AUROC_DECIMALS),
            round(self.log_loss, LOG_LOSS_DECIMALS),
            self.candidate,
            self.layer,
        )


#: fit ``recipe`` on (X_fit, y_fit) and return s(x) of X_held (evaluator.commands.reference_probes.training.fit_and_score)
FitScore = Callable[["Recipe", np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def fold_scores(
    recipe: Recipe, X: np.ndarray, y: np.ndarray, folds: Sequence[FormatFold], fit_score: FitScore
) -> tuple[list[float], float]:
    """Held-out AUROC per fold and the mean held-out log-loss of ``recipe`` fitted per fold."""

    aurocs, losses = [], []
    for fold in folds:
        s = fit_score(recipe, X[fold.fit], y[fold.fit], X[fold.held])
        p = np.clip(sigmoid(s), 1e-12, 1 - 1e-12)
        t = y[fold.held]
        aurocs.append(float(auroc(s, t)))
        losses.append(float(-np.mean(t * np.log(p) + (1 - t) * np.log(1 - p))))
    return aurocs, float(np.mean(losses))


@dataclass
class SelectionResult:
    """The held-out-format selection on train: every candidate × layer and the chosen one."""

    task_id: str
    candidates: list[dict[str, Any]]
    layers: list[int]
    folds: list[dict[str, Any]]  # {format, n_fit, n_held}
    table: list[dict[str, Any]]  # {candidate, layer, fold_auroc, worst, mean, log_loss}
    chosen: dict[str, Any]  # {candidate, method, hyperparameters, position, layer, worst, mean}
    seed: int
    n_train: int
    min_format_groups: int = MIN_FORMAT_GROUPS
    rule: str = RULE

    def to_dict(self) -> dict[str, Any]:

        return fields_dict(self)

    @property
    def chosen_layer(self) -> int:
        return int(self.chosen["layer"])

    @property
    def best(self) -> float:
        """The chosen candidate's worst-fold AUROC."""
        return float(self.chosen["worst"])

    def sentence(self, task_id: str) -> str:
        """How the recipe was chosen, for the probe's description (deterministic text)."""
        c = self.chosen
        cand = Candidate(c["method"], c["hyperparameters"], c["position"])
        formats = ", ".join(f["format"] for f in self.folds)
        return (
            f"{cand.label()} at layer {c['layer']} was chosen on the {task_id} train split only, by"
            f" held-out-format cross-validation over {len(self.candidates)} method/position candidates ×"
            f" layers {self.layers[0]}..{self.layers[-1]} ({len(self.folds)} folds, each holding out one"
            f" format: {formats}): highest worst-fold AUROC ({c['worst']:.3f}; mean {c['mean']:.3f}), ties"
            " broken by mean AUROC, held-out log-loss, candidate order, then the lower layer. Test,"
            " distshift and holdout splits were not used to choose."
        )


def choose(scores: Sequence[CandidateScore]) -> CandidateScore:
    """:data:`RULE` over the scored candidates."""
    if not scores:
        raise EvaluatorError("selection: no candidate was scored")
    return min(scores, key=CandidateScore.key)


def select(
    candidates: Sequence[Candidate],
    recipe_for: Callable[[Candidate, int], Recipe],
    X_for: Callable[[str, int], np.ndarray],
    y: np.ndarray,
    folds: Sequence[FormatFold],
    layers: Sequence[int],
    *,
    fit_score: FitScore,
    task_id: str,
    seed: int,
) -> SelectionResult:
    """Score every candidate at every layer on the format folds and apply :data:`RULE`.

    ``recipe_for(candidate, layer)`` builds the validated recipe; ``X_for(position, layer)`` the
    train activations (rows aligned with ``y`` and the folds); ``fit_score`` fits and scores."""
    y = np.asarray(y)
    scores: list[CandidateScore] = []
    for k, cand in enumerate(candidates):
        for layer in layers:
            aurocs, loss = fold_scores(
                recipe_for(cand, layer), X_for(cand.position, layer), y, folds, fit_score
            )
            scores.append(CandidateScore(k, layer, aurocs, loss))
            log.debug("%s layer %d: worst %.3f mean %.3f", cand.label(), layer, min(aurocs), np.mean(aurocs))
    best = choose(scores)
    cand = candidates[best.candidate]
    return SelectionResult(
        task_id=task_id,
        candidates=[c.to_dict() for c in candidates],
        layers=list(layers),
        folds=[{"format": f.fmt, "n_fit": int(f.fit.size), "n_held": int(f.held.size)} for f in folds],
        table=[
            {
                "candidate": s.candidate,
                "layer": s.layer,
                "fold_auroc": s.fold_auroc,
                "worst": s.worst,
                "mean": s.mean,
                "log_loss": s.log_loss,
            }
            for s in scores
        ],
        chosen={
            **cand.to_dict(),
            "candidate": best.candidate,
            "layer": best.layer,
            "worst": best.worst,
            "mean": best.mean,
        },
        seed=seed,
        n_train=int(y.size),
    )


def rechoose(table: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(candidate, layer) that :data:`RULE` chooses from a recorded selection table."""
    best = choose(
        [
            CandidateScore(int(r["candidate"]), int(r["layer"]), list(r["fold_auroc"]), float(r["log_loss"]))
            for r in table
        ]
    )
    return best.candidate, best.layer
