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
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from evaluator.core.activations import split_activations
from evaluator.core.applicability import POSITIONS
from evaluator.errors import ArtifactError, EvaluatorError, UnknownNameError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.activations import ActivationCache, SplitActivations
    from evaluator.core.harvest import HarvestConfig, Progress
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.load import Registry

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
}
METHODS: tuple[str, ...] = tuple(DEFAULT_HYPERPARAMETERS)

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
}
#: A seed is a NumPy / scikit-learn random state.
SEED_RANGE = (0, 2**32 - 1)


def _rule_text(rule: tuple) -> str:
    kind = rule[0]
    if kind == "flag":
        return "true or false"
    if kind == "shrinkage":
        return '"auto", null or a number in 0..1'
    what = "an integer" if kind == "int" else "a number"
    return f"{what} in {rule[1]:g}..{rule[2]:g}"


def _value_ok(rule: tuple, value: Any) -> bool:
    kind = rule[0]
    if kind == "flag":
        return isinstance(value, bool)
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
        if registry is not None:
            task = registry.task(recipe.task)
            if recipe.template not in task.templates:
                raise ArtifactError(
                    f"recipe: task {task.id} has no {recipe.template!r} template; it has"
                    f" {', '.join(task.templates)}"
                )
        return recipe


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


def fit_recipe(recipe: Recipe, X: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """Train the recipe's probe on X "n d_model", y "n" (0/1); return the artifact tensors (float32).

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
    return {k: np.asarray(v, dtype=np.float32) for k, v in tensors.items()}


# --------------------------------------------------------------------------- training on a task


@dataclass
class TrainResult:
    """A freshly trained probe and where its training data came from."""

    recipe: Recipe
    model_id: str
    tensors: dict[str, np.ndarray]
    train: SplitActivations
    seconds: float

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
            "description": description,
            "training_data": {"tasks": [self.recipe.task], "external": ""},
            "declared_metrics": {},
            "recipe": self.recipe.to_dict(),
        }


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
    tensors = fit_recipe(recipe, acts.X, acts.labels)
    log.info(
        "trained %s on %s/train (%d rows) at %s layer %d",
        recipe.method,
        recipe.task,
        len(acts.ids),
        lm.id,
        recipe.layer,
    )
    return TrainResult(
        recipe=recipe, model_id=lm.id, tensors=tensors, train=acts, seconds=time.perf_counter() - start
    )


def map_layer(layer: int, n_source: int, n_target: int) -> int:
    """The layer at the same relative depth in another model (used when re-fitting elsewhere)."""
    return int(min(n_target, max(0, round(layer * n_target / n_source))))
