"""Recipes: declarative, deterministic probe training from a task's train split.

A recipe names a method, the task whose ``train`` split it trains on, the layer/position/input
the probe reads, the template, hyperparameters and a seed. The same recipe re-fit on the same
activations gives bit-identical tensors (tested); the workers rerun it to check a submission
(reproduction) and to re-fit it on other base models (cross-model transfer, ρ_CE).

Methods (X is "n d_model": φ(x) for ``single`` input, φ(x⁺) − φ(x⁻) for ``contrast_pair``):

- ``logistic_regression``: L2 logistic regression (lbfgs) on standardized X.
- ``diff_of_means``: w = mean(X | y=1) − mean(X | y=0); Platt-calibrated (scale and bias of
  the 1-D projection fitted on train) so that p(x) = sigmoid(s) means something.
- ``pca_unsupervised``: the top principal component of the centered X (for contrast pairs: of
  the centered pair differences, as in the source papers); unsupervised direction, sign fixed
  so positives score higher on train, then Platt-calibrated like diff_of_means.
- ``lda``: linear discriminant analysis with Ledoit–Wolf shrinkage on standardized X.
- ``mlp``: one hidden ReLU layer (scikit-learn MLPClassifier, Adam, fixed random_state).
- ``neuron_topk_meandiff``: the ``k`` residual dimensions with the largest |mean(x | y=1) −
  mean(x | y=0)| on train (ties to the lower index), standardized, then L2 logistic regression
  whose C is chosen by cross-validation (:func:`fit_topk_logistic`); a ``linear`` artifact (zero
  weight, mean 0 and scale 1 outside the chosen dimensions). k = d_model: the dense logistic probe.
- ``sae_topk_meandiff``: the same rule on the TopK latents z(x) of the registered SAE ``sae``
  (``evaluator.core.sae_probe``), at its layer, ``last_token`` of a ``single`` input; an
  ``sae_features`` artifact naming the SAE by its weights' hash.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from evaluator.core.activations import split_activations
from evaluator.core.applicability import POSITIONS
from evaluator.core.sae_probe import INTEGER_TENSOR, SAE_HASH_KEY, sae_encoder
from evaluator.errors import ArtifactError, EvaluatorError, UnknownNameError
from evaluator.metrics.metrics import auroc

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.activations import ActivationCache, SplitActivations
    from evaluator.core.harvest import HarvestConfig, Progress
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.load import Registry
    from evaluator.data.registry.saes import SaeRegistry

log = logging.getLogger(__name__)


class RecipeProbe(Protocol):
    """What a recipe must agree with of its probe: a ProbeMetadata, or the fields a server read."""

    @property
    def layer(self) -> int: ...
    @property
    def position(self) -> str: ...
    @property
    def input(self) -> str: ...


#: Every method with its default hyperparameters (a recipe may override any of them, no others).
DEFAULT_HYPERPARAMETERS: dict[str, dict[str, Any]] = {
    "logistic_regression": {"C": 1.0, "standardize": True, "max_iter": 2000},
    "diff_of_means": {"standardize": False, "calibrate": True},
    "pca_unsupervised": {"standardize": False, "calibrate": True},
    "lda": {"shrinkage": "auto", "standardize": True},
    "mlp": {"hidden": 32, "alpha": 1e-2, "max_iter": 300, "learning_rate_init": 1e-3, "standardize": True},
    "neuron_topk_meandiff": {"k": 16},
    "sae_topk_meandiff": {"k": 16},
}
METHODS: tuple[str, ...] = tuple(DEFAULT_HYPERPARAMETERS)
#: hyperparameters a recipe of the method must give (no default)
REQUIRED_HYPERPARAMETERS: dict[str, tuple[str, ...]] = {"sae_topk_meandiff": ("sae",)}
#: the latents an SAE recipe may read
SAE_RECIPE_K = (1, 2, 5, 16, 64)
#: why a method's recipe cannot be re-fit on another base model (the transfer axis: not applicable)
NOT_TRANSFERABLE: dict[str, str] = {
    "sae_topk_meandiff": (
        "an SAE-feature recipe reads the latents of one base model's SAE; no SAE of that id encodes"
        " another model's residual stream, so it cannot be re-fit there"
    ),
}

#: What each hyperparameter accepts: ("flag",) a boolean; ("int", low, high) and
#: ("float", low, high) a finite number in [low, high]; ("shrinkage",) "auto", null or a float in
#: [0, 1]. The bounds keep one run's work bounded; the submission check and the worker both call
#: :func:`hyperparameters_validate`, so a recipe accepted at submission always runs.
HYPERPARAMETER_RULES: dict[str, dict[str, tuple]] = {
    "logistic_regression": {
        "C": ("float", 1e-6, 1e6),
        "standardize": ("flag",),
        "max_iter": ("int", 1, 10_000),
    },
    "diff_of_means": {"standardize": ("flag",), "calibrate": ("flag",)},
    "pca_unsupervised": {"standardize": ("flag",), "calibrate": ("flag",)},
    "lda": {"shrinkage": ("shrinkage",), "standardize": ("flag",)},
    "mlp": {
        "hidden": ("int", 1, 512),
        "alpha": ("float", 0.0, 100.0),
        "max_iter": ("int", 1, 1000),
        "learning_rate_init": ("float", 1e-6, 1.0),
        "standardize": ("flag",),
    },
    # k ≤ the base model's d_model is checked where the model is known (recipe_model_check)
    "neuron_topk_meandiff": {"k": ("int", 1, 8192)},
    "sae_topk_meandiff": {"sae": ("id",), "k": ("choice", *SAE_RECIPE_K)},
}
#: A seed is a NumPy / scikit-learn random state.
SEED_RANGE = (0, 2**32 - 1)


def _rule_text(rule: tuple) -> str:
    kind = rule[0]
    if kind == "flag":
        return "true or false"
    if kind == "shrinkage":
        return '"auto", null or a number in 0..1'
    if kind == "choice":
        return "one of " + ", ".join(str(v) for v in rule[1:])
    if kind == "id":
        return "the id of a registered SAE (registry/saes.yaml), text of 1..100 characters"
    what = "an integer" if kind == "int" else "a number"
    return f"{what} in {rule[1]:g}..{rule[2]:g}"


def _value_ok(rule: tuple, value: Any) -> bool:
    kind = rule[0]
    if kind == "flag":
        return isinstance(value, bool)
    if kind == "choice":
        return isinstance(value, int) and not isinstance(value, bool) and value in rule[1:]
    if kind == "id":
        return isinstance(value, str) and 1 <= len(value) <= 100 and value.isprintable()
    if kind == "shrinkage":
        if value is None or value == "auto":
            return True
        rule = ("float", 0.0, 1.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if rule[0] == "int" and not isinstance(value, int):
        return False
    return math.isfinite(value) and rule[1] <= value <= rule[2]


def hyperparameters_validate(method: str, hyperparameters: Any, *, seed: Any = 0) -> dict[str, Any]:
    """Check a recipe's hyperparameters (and seed) against :data:`HYPERPARAMETER_RULES`; return
    them unchanged, or raise ArtifactError naming the hyperparameter and what it accepts.

    One validator for the submission check and the worker: a bad value is the submitter's
    error (400 at submission, a failed run in the worker), never an infrastructure fault.
    """
    if method not in HYPERPARAMETER_RULES:
        raise UnknownNameError("recipe method", str(method), list(METHODS))
    if not isinstance(hyperparameters, dict):
        raise ArtifactError("recipe: hyperparameters must be a JSON object")
    rules = HYPERPARAMETER_RULES[method]
    unknown = sorted(str(k) for k in set(hyperparameters) - set(rules))
    if unknown:
        raise ArtifactError(
            f"recipe: unknown hyperparameter(s) {', '.join(unknown)} for {method};"
            f" accepted: {', '.join(rules)}"
        )
    for name, value in hyperparameters.items():
        if not _value_ok(rules[name], value):
            raise ArtifactError(
                f"recipe: hyperparameter {name} = {str(value)[:40]} is not accepted for {method};"
                f" accepted: {_rule_text(rules[name])}"
            )
    missing = [name for name in REQUIRED_HYPERPARAMETERS.get(method, ()) if name not in hyperparameters]
    if missing:
        raise ArtifactError(
            f"recipe: {method} needs hyperparameter(s) {', '.join(missing)}"
            f" ({'; '.join(f'{m}: {_rule_text(rules[m])}' for m in missing)})"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        raise ArtifactError(
            f"recipe: seed {str(seed)[:40]} is not accepted; accepted: an integer in 0..{SEED_RANGE[1]}"
        )
    return hyperparameters


@dataclass(frozen=True)
class Recipe:
    """How a probe is trained. ``template`` names the task template and equals ``input``."""

    method: str
    task: str
    layer: int
    position: str = "last_token"
    input: str = "single"
    template: str = "single"
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def params(self) -> dict[str, Any]:
        """Hyperparameters with the method's defaults filled in."""
        return {**DEFAULT_HYPERPARAMETERS[self.method], **self.hyperparameters}

    def at_layer(self, layer: int) -> Recipe:
        """The same recipe reading another layer (re-fitting on another base model)."""
        return Recipe(
            self.method,
            self.task,
            layer,
            self.position,
            self.input,
            self.template,
            dict(self.hyperparameters),
            self.seed,
        )

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], *, probe: RecipeProbe | None = None, registry: Registry | None = None
    ) -> Recipe:
        """Validate a recipe. With ``probe``, missing layer/position/input default to the probe's and
        given ones must match it; with ``registry``, the task and its template must exist."""
        if not isinstance(data, dict):
            raise ArtifactError("recipe must be a JSON object")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ArtifactError(
                f"recipe: unknown field(s) {', '.join(unknown)}; accepted: {', '.join(sorted(known))}"
            )
        method = data.get("method")
        if method not in METHODS:
            raise UnknownNameError("recipe method", str(method), list(METHODS))
        if not data.get("task"):
            raise ArtifactError("recipe: missing field task (whose train split it trains on)")
        values: dict[str, Any] = {"method": method, "task": str(data["task"])}
        for key in ("layer", "position", "input"):
            given = data.get(key)
            from_probe = getattr(probe, key) if probe is not None else None
            if given is not None and from_probe is not None and given != from_probe:
                raise ArtifactError(f"recipe: {key} {given!r} differs from the probe's {key} {from_probe!r}")
            values[key] = given if given is not None else from_probe
        if values["layer"] is None:
            raise ArtifactError("recipe: missing field layer")
        if not isinstance(values["layer"], int) or isinstance(values["layer"], bool):
            raise ArtifactError(f"recipe: layer must be an integer, got {values['layer']!r}")
        values["position"] = values["position"] or "last_token"
        if values["position"] not in POSITIONS:
            raise ArtifactError(
                f"recipe: unknown position {values['position']!r}; accepted: {', '.join(POSITIONS)}"
            )
        values["input"] = values["input"] or "single"
        values["template"] = data.get("template") or values["input"]
        if values["template"] != values["input"]:
            raise ArtifactError(
                f"recipe: template {values['template']!r} must name the task template of the input"
                f" {values['input']!r}"
            )
        hyper = data.get("hyperparameters")
        hyper = {} if hyper is None else hyper
        seed = data.get("seed", 0)
        hyperparameters_validate(method, hyper, seed=seed)
        recipe = cls(hyperparameters=dict(hyper), seed=seed, **values)
        if method == "sae_topk_meandiff" and (recipe.position, recipe.input) != ("last_token", "single"):
            raise ArtifactError(
                f"recipe: {method} reads last_token of a single input (the SAE encodes one token's"
                f" residual), not {recipe.position} of a {recipe.input} input"
            )
        if registry is not None:
            task = registry.task(recipe.task)
            if recipe.template not in task.templates:
                raise ArtifactError(
                    f"recipe: task {task.id} has no {recipe.template!r} template; it has"
                    f" {', '.join(task.templates)}"
                )
            if method == "sae_topk_meandiff":
                _sae_layer_check(recipe, registry.saes)
        return recipe


def _sae_layer_check(recipe: Recipe, saes: SaeRegistry) -> None:
    spec = saes.sae(recipe.params["sae"])
    if recipe.layer != spec.layer:
        raise ArtifactError(
            f"recipe: layer {recipe.layer} is not the layer of SAE {spec.id}; accepted: {spec.layer}"
        )


def recipe_model_check(recipe: Recipe, *, model_id: str, d_model: int, saes: SaeRegistry) -> None:
    """What a recipe needs of the base model it is fitted on: a top-k recipe's k at most its
    d_model; an SAE recipe's SAE registered, of this model, at the recipe's layer."""
    if recipe.method == "neuron_topk_meandiff" and recipe.params["k"] > d_model:
        raise ArtifactError(
            f"recipe: hyperparameter k = {recipe.params['k']} exceeds the d_model of {model_id};"
            f" accepted: an integer in 1..{d_model}"
        )
    if recipe.method == "sae_topk_meandiff":
        spec = saes.sae(recipe.params["sae"])
        if spec.model != model_id:
            raise ArtifactError(
                f"recipe: SAE {spec.id} encodes {spec.model}, not {model_id}; accepted: an SAE of"
                f" {model_id} ({', '.join(s.id for s in saes.saes.values() if s.model == model_id) or 'none registered'})"
            )
        _sae_layer_check(recipe, saes)


def transfer_refusal(method: str) -> str | None:
    """Why a recipe of ``method`` cannot be re-fit on another base model (None: it can)."""
    return NOT_TRANSFERABLE.get(method)


# --------------------------------------------------------------------------- fitting


#: A column whose spread on train is at most this fraction of its size is constant up to float32
#: rounding: it is centred but not scaled. A max-pooled column is often one: on a decoder the first
#: token's residual wins some dimensions in every row, and it is the same wherever the prompts start
#: alike, but for rounding that differs with the batch it was harvested in. Scaled by that rounding,
#: it would turn noise into the probe's largest feature.
CONSTANT_SPREAD = 1e-5


def _standardizer(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = X.mean(axis=0)
    std = X.std(axis=0)
    return mean, np.where(std > CONSTANT_SPREAD * np.abs(mean), std, 1.0)


def _platt(u: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Scale a and bias c so that sigmoid(a·u + c) is calibrated on train (1-D logistic fit)."""
    from sklearn.linear_model import LogisticRegression

    spread = u.std() or 1.0
    clf = LogisticRegression(C=1e4, max_iter=1000).fit((u / spread)[:, None], y)
    return float(clf.coef_[0, 0] / spread), float(clf.intercept_[0])


#: C of the top-k recipes' logistic regression: 10^-4 … 10^2 in half-decade steps, chosen by CV
C_GRID: tuple[float, ...] = tuple(float(10.0**e) for e in np.linspace(-4.0, 2.0, 13))
CV_FOLDS = 5
TOPK_MAX_ITER = 2000


def topk_meandiff(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """The k columns of X with the largest |mean(X | y=1) − mean(X | y=0)|, largest first, ties
    to the lower index (int64)."""
    diff = np.abs(X[y == 1].mean(axis=0) - X[y == 0].mean(axis=0))
    return np.lexsort((np.arange(X.shape[1]), -diff))[:k].astype(np.int64)


def _logistic(C: float, seed: int) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, max_iter=TOPK_MAX_ITER, random_state=seed)


class TopkLogistic(NamedTuple):
    """What :func:`fit_topk_logistic` returns (unpacks as ``indices, tensors, info``)."""

    indices: np.ndarray  # "k" int64: the chosen columns, largest difference first
    tensors: dict[str, np.ndarray]  # ``weight``, ``mean``, ``scale`` "k", ``bias`` [] (float64)
    info: dict[str, Any]  # k, indices, C, cv_auroc, cv_folds, cv_auroc_by_C

    def score(self, X: np.ndarray) -> np.ndarray:
        """s(x) of the fit on rows of the full X "n d" (it reads the chosen columns), float64."""
        t = self.tensors
        Xk = np.asarray(X, dtype=np.float64)[:, self.indices]
        return ((Xk - t["mean"]) / t["scale"]) @ t["weight"] + float(t["bias"])


def fit_topk_logistic(X: np.ndarray, y: np.ndarray, k: int, seed: int) -> TopkLogistic:
    """The top-k mean-difference columns of X (:func:`topk_meandiff`, on all of X), standardized,
    and an L2 logistic regression (lbfgs) on them whose C is chosen on (X, y) alone: stratified
    ``CV_FOLDS``-fold cross-validation (shuffled with ``seed``; fewer folds when a class has fewer
    rows) over :data:`C_GRID`, the highest mean held-out AUROC, ties to the smaller C; then refit on
    every row with that C. Each fold standardizes on its own fitting rows.

    Returns :class:`TopkLogistic`: (indices "k", tensors ``weight``/``mean``/``scale`` "k" and
    ``bias`` [] in float64, info: k, indices, C, cv_auroc, cv_folds and the mean AUROC of each C),
    whose ``score(X)`` applies it. Deterministic."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import StratifiedKFold
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y).astype(np.int64)
    if not 1 <= k <= X.shape[1]:
        raise EvaluatorError(f"top-k: k = {k} is not in 1..{X.shape[1]} (the columns it chooses from)")
    folds = min(CV_FOLDS, int(y.sum()), int((1 - y).sum()))
    if folds < 2:
        raise EvaluatorError("top-k: choosing C by cross-validation needs at least 2 rows of each class")
    idx = topk_meandiff(X, y, k)
    Xk = X[:, idx]
    splits = list(StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(Xk, y))
    means = []
    # one BLAS thread: these fits are small (threads cost more than they save under load), and the
    # sums then never depend on how many threads a machine has
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore", ConvergenceWarning)
        for C in C_GRID:
            aurocs = []
            for fit, held in splits:
                mean, scale = _standardizer(Xk[fit])
                clf = _logistic(C, seed).fit((Xk[fit] - mean) / scale, y[fit])
                aurocs.append(auroc(clf.decision_function((Xk[held] - mean) / scale), y[held]))
            means.append(float(np.mean(aurocs)))
        best = int(np.argmax(np.round(means, 12)))  # the first (smallest C) of equal means
        mean, scale = _standardizer(Xk)
        clf = _logistic(C_GRID[best], seed).fit((Xk - mean) / scale, y)
    tensors = {"weight": clf.coef_[0], "bias": np.array(clf.intercept_[0]), "mean": mean, "scale": scale}
    info = {
        "k": k,
        "indices": idx.tolist(),
        "C": C_GRID[best],
        "cv_auroc": means[best],
        "cv_folds": folds,
        "cv_auroc_by_C": {f"{C:.3g}": m for C, m in zip(C_GRID, means, strict=True)},
    }
    return TopkLogistic(idx, tensors, info)


@dataclass(frozen=True)
class RecipeFit:
    """A fitted recipe: the artifact's tensors (float32; ``latents`` int64), the header's
    ``__metadata__`` it needs (an SAE recipe's ``sae_weights_sha256``) and what the fit chose."""

    tensors: dict[str, np.ndarray]
    artifact_metadata: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


def _fit_topk(recipe: Recipe, X: np.ndarray, y: np.ndarray, registry: Registry | None) -> RecipeFit:
    k, seed = int(recipe.params["k"]), recipe.seed
    if recipe.method == "neuron_topk_meandiff":
        idx, t, info = fit_topk_logistic(X, y, k, seed)
        d = X.shape[1]
        weight, mean, scale = np.zeros(d), np.zeros(d), np.ones(d)
        weight[idx], mean[idx], scale[idx] = t["weight"], t["mean"], t["scale"]
        tensors = {"weight": weight, "bias": t["bias"], "mean": mean, "scale": scale}
        return RecipeFit(tensors, {}, info)
    if registry is None:
        raise EvaluatorError(f"recipe {recipe.method}: fitting it needs the registry (its SAE)")
    spec = registry.saes.sae(recipe.params["sae"])
    _sae_layer_check(recipe, registry.saes)
    encoder = sae_encoder(registry.root, spec)
    if X.shape[1] != encoder.d_model or k > encoder.width:
        raise EvaluatorError(
            f"recipe {recipe.method}: SAE {spec.id} reads d_model {encoder.d_model} and has"
            f" {encoder.width} latents; got activations of width {X.shape[1]} and k = {k}"
        )
    idx, t, info = fit_topk_logistic(encoder.encode(X), y, k, seed)
    return RecipeFit(
        {INTEGER_TENSOR: idx, **t},
        {SAE_HASH_KEY: spec.weights_sha256},
        info | {"sae": spec.id},
    )


def fit_recipe(
    recipe: Recipe, X: np.ndarray, y: np.ndarray, *, registry: Registry | None = None
) -> dict[str, np.ndarray]:
    """The artifact tensors of :func:`recipe_fit` (an SAE recipe needs ``registry``)."""
    return recipe_fit(recipe, X, y, registry=registry).tensors


def recipe_fit(
    recipe: Recipe, X: np.ndarray, y: np.ndarray, *, registry: Registry | None = None
) -> RecipeFit:
    """Train the recipe's probe on X "n d_model", y "n" (0/1): the artifact tensors (float32;
    an SAE recipe's ``latents`` int64), the header metadata and what the fit chose. ``registry``:
    where an SAE recipe finds its SAE.

    Deterministic: the same inputs and seed give bit-identical tensors.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y).astype(np.int64)
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise EvaluatorError(f"fit_recipe: X {X.shape} and y {y.shape} do not match")
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == y.size:
        raise EvaluatorError(
            f"recipe {recipe.method}: the train split needs both classes, got {n_pos} positive"
        )
    hyperparameters_validate(recipe.method, recipe.hyperparameters, seed=recipe.seed)
    if recipe.method in ("neuron_topk_meandiff", "sae_topk_meandiff"):
        fit = _fit_topk(recipe, X, y, registry)
        return replace(fit, tensors=_stored(fit.tensors))
    params = recipe.params
    tensors: dict[str, np.ndarray] = {}
    Z = X
    if params.get("standardize"):
        mean, scale = _standardizer(X)
        Z = (X - mean) / scale
        tensors["mean"], tensors["scale"] = mean, scale

    method = recipe.method
    if method == "logistic_regression":
        from sklearn.linear_model import LogisticRegression

        clf = LogisticRegression(
            C=float(params["C"]), max_iter=int(params["max_iter"]), random_state=recipe.seed
        ).fit(Z, y)
        tensors["weight"], tensors["bias"] = clf.coef_[0], np.array(clf.intercept_[0])
    elif method in ("diff_of_means", "pca_unsupervised"):
        if method == "diff_of_means":
            direction = Z[y == 1].mean(axis=0) - Z[y == 0].mean(axis=0)
            center = (Z[y == 1].mean(axis=0) + Z[y == 0].mean(axis=0)) / 2
        else:
            center = Z.mean(axis=0)
            _, _, vt = np.linalg.svd(Z - center, full_matrices=False)
            direction = vt[0]
            # the sign of a principal component is arbitrary: fix it on the train labels
            proj = (Z - center) @ direction
            if proj[y == 1].mean() < proj[y == 0].mean():
                direction = -direction
        norm = np.linalg.norm(direction)
        if norm == 0:
            raise EvaluatorError(f"recipe {method}: the direction is zero (identical class means)")
        direction = direction / norm
        u = (Z - center) @ direction
        a, c = _platt(u, y) if params.get("calibrate") else (1.0, 0.0)
        tensors["weight"] = a * direction
        tensors["bias"] = np.array(c - a * float(center @ direction))
    elif method == "lda":
        from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

        shrinkage = params["shrinkage"]
        clf = LinearDiscriminantAnalysis(solver="lsqr", shrinkage=shrinkage).fit(Z, y)
        tensors["weight"], tensors["bias"] = clf.coef_[0], np.array(clf.intercept_[0])
    elif method == "mlp":
        from sklearn.neural_network import MLPClassifier

        clf = MLPClassifier(
            hidden_layer_sizes=(int(params["hidden"]),),
            activation="relu",
            alpha=float(params["alpha"]),
            max_iter=int(params["max_iter"]),
            learning_rate_init=float(params["learning_rate_init"]),
            random_state=recipe.seed,
        )
        import warnings

        from sklearn.exceptions import ConvergenceWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(Z, y)
        tensors["w1"], tensors["b1"] = clf.coefs_[0].T, clf.intercepts_[0]
        tensors["w2"], tensors["b2"] = clf.coefs_[1].T, clf.intercepts_[1]
    else:  # pragma: no cover - from_dict rejects unknown methods
        raise UnknownNameError("recipe method", method, list(METHODS))
    return RecipeFit(_stored(tensors))


def _stored(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The tensors as an artifact stores them: float32, the latent indices int64."""
    return {
        k: np.asarray(v, dtype=np.int64 if k == INTEGER_TENSOR else np.float32) for k, v in tensors.items()
    }


# --------------------------------------------------------------------------- training on a task


@dataclass
class TrainResult:
    """A freshly trained probe and where its training data came from."""

    recipe: Recipe
    model_id: str
    tensors: dict[str, np.ndarray]
    train: SplitActivations
    seconds: float
    #: the safetensors header's ``__metadata__`` (``save_probe(..., artifact_metadata=)``)
    artifact_metadata: dict[str, str] = field(default_factory=dict)
    #: what the fit chose (a top-k recipe: its columns, C and the CV AUROC)
    info: dict[str, Any] = field(default_factory=dict)

    def metadata(
        self,
        *,
        name: str,
        category: str,
        license: str = "Apache-2.0",
        authors: list[str] | None = None,
        description: str = "",
    ) -> dict[str, Any]:
        """probe.json for this probe (docs/ARCHITECTURE.md)."""
        return {
            "name": name,
            "category": category,
            "base_model": self.model_id,
            "layer": self.recipe.layer,
            "position": self.recipe.position,
            "input": self.recipe.input,
            "output": "logit",
            "license": license,
            "authors": list(authors or []),
            "paper_url": "",
            "description": " ".join(filter(None, [description, self.fit_sentence()])),
            "training_data": {"tasks": [self.recipe.task], "external": ""},
            "declared_metrics": {},
            "recipe": self.recipe.to_dict(),
        }

    def fit_sentence(self) -> str:
        """What a top-k recipe's fit chose, in words ("" for the other methods)."""
        if "C" not in self.info:
            return ""
        return (
            f"C = {self.info['C']:.3g} chosen by {self.info['cv_folds']}-fold stratified cross-validation"
            f" on train (mean held-out AUROC {self.info['cv_auroc']:.3f})."
        )


def train_recipe(
    recipe: Recipe,
    lm: LoadedModel,
    *,
    registry: Registry,
    cache: ActivationCache | None,
    config: HarvestConfig | None = None,
    progress: Progress | None = None,
    all_layers: bool = True,
) -> TrainResult:
    """Harvest (or read from the cache) the recipe task's train split on ``lm`` and fit the recipe.
    ``all_layers``: a harvest keeps every layer in the cache (see split_activations)."""

    if not 0 <= recipe.layer <= lm.n_layers:
        raise EvaluatorError(f"recipe layer {recipe.layer} out of range for {lm.id}: 0..{lm.n_layers}")
    recipe_model_check(recipe, model_id=lm.id, d_model=lm.d_model, saes=registry.saes)
    start = time.perf_counter()
    acts = split_activations(
        lm,
        registry,
        recipe.task,
        "train",
        layers=[recipe.layer],
        position=recipe.position,
        input_kind=recipe.input,
        cache=cache,
        config=config,
        progress=progress,
        all_layers=all_layers,
    )[recipe.layer]
    fit = recipe_fit(recipe, acts.X, acts.labels, registry=registry)
    log.info(
        "trained %s on %s/train (%d rows) at %s layer %d",
        recipe.method,
        recipe.task,
        len(acts.ids),
        lm.id,
        recipe.layer,
    )
    return TrainResult(
        recipe=recipe,
        model_id=lm.id,
        tensors=fit.tensors,
        train=acts,
        seconds=time.perf_counter() - start,
        artifact_metadata=fit.artifact_metadata,
        info=fit.info,
    )


def map_layer(layer: int, n_source: int, n_target: int) -> int:
    """The layer at the same relative depth in another model (used when re-fitting elsewhere)."""
    return int(min(n_target, max(0, round(layer * n_target / n_source))))
