"""The text panel's member models (evaluator.axes.text_panel reads them): the logistic regressions
over length, word and character n-grams and sentence embeddings, the structured-feature model, the
entity-embedding features and the gradient-boosted trees over the structured features. Each is a
scikit-learn estimator, or a small class with ``fit`` and ``decision_function`` over what its member
reads. Which grid each member searches, and how it is cross-validated, is the panel's business.

Pure: numpy and scikit-learn.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from evaluator.data.registry.tasks import StructuredFeature

#: the panel's fixed seed (its CV folds, and the trees' random_state)
PANEL_SEED = 20260401
MAX_ITER = 5000
#: a categorical value seen fewer times than this in train reads as missing in ``structured_gbm``
#: (a tree cannot learn anything from a value it saw once); at most GBM_MAX_CATEGORIES values kept
GBM_MIN_COUNT = 2
GBM_MAX_CATEGORIES = 254


def logistic(c: float):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, max_iter=MAX_ITER)


def length_features(texts) -> np.ndarray:
    return np.array([[math.log1p(len(t)), math.log1p(len(t.split()))] for t in texts], dtype=np.float64)


def length_model(params: dict[str, Any]):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler

    return make_pipeline(FunctionTransformer(length_features), StandardScaler(), logistic(params["C"]))


def word_model(params: dict[str, Any]):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline

    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=1, lowercase=True, token_pattern=r"(?u)\b\w+\b")
    return make_pipeline(vec, logistic(params["C"]))


def char_model(params: dict[str, Any]):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline

    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=1, lowercase=True)
    return make_pipeline(vec, logistic(params["C"]))


def dense_model(params: dict[str, Any]):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), logistic(params["C"]))


def embedding_model(params: dict[str, Any]):
    """Unit-length embeddings (the encoder is trained for cosine similarity, so its vectors are
    compared by direction), then a logistic regression."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import Normalizer

    return make_pipeline(Normalizer(), logistic(params["C"]))


class StructuredModel:
    """Logistic regression on a task card's declared features, read from each row (a text, or a
    (text, meta) pair) by :meth:`StructuredFeature.extract`.

    Numeric features: the value (0 when missing) and a missing flag, standardised, expanded to all
    monomials up to ``degree``, standardised again. Categorical: one-hot of the values seen in
    train (a missing value is its own category; an unseen one is all zeros)."""

    def __init__(self, features: Sequence[StructuredFeature], *, degree: int, C: float):  # noqa: N803
        self.features, self.degree, self.C = tuple(features), degree, C

    def _columns(self, rows) -> tuple[np.ndarray, list[list[str]]]:
        numeric, categorical = [], []
        for row in rows:
            text, meta = row if isinstance(row, tuple) else (row, {})
            nums: list[float] = []
            cats: list[str] = []
            for f in self.features:
                raw = f.extract(str(text), meta)
                if f.kind == "numeric":
                    try:
                        value = float(raw) if raw is not None else math.nan
                    except ValueError:
                        value = math.nan
                    ok = math.isfinite(value)
                    nums += [value if ok else 0.0, 0.0 if ok else 1.0]
                else:
                    cats.append("\0missing" if raw is None else raw)
            numeric.append(nums)
            categorical.append(cats)
        return np.array(numeric, dtype=np.float64).reshape(len(numeric), -1), categorical

    def _matrix(self, texts, *, fit: bool) -> np.ndarray:
        from sklearn.preprocessing import OneHotEncoder, PolynomialFeatures, StandardScaler

        numeric, categorical = self._columns(texts)
        parts = []
        if numeric.shape[1]:
            if fit:
                self._scale_in = StandardScaler().fit(numeric)
                self._poly = PolynomialFeatures(self.degree, include_bias=False).fit(
                    self._scale_in.transform(numeric)
                )
                self._scale_out = StandardScaler().fit(
                    self._poly.transform(self._scale_in.transform(numeric))
                )
            parts.append(self._scale_out.transform(self._poly.transform(self._scale_in.transform(numeric))))
        if categorical and categorical[0]:
            if fit:
                self._onehot = OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(categorical)
            parts.append(self._onehot.transform(categorical))
        return np.hstack(parts)

    def fit(self, texts, labels) -> StructuredModel:
        self._model = logistic(self.C).fit(self._matrix(texts, fit=True), labels)
        return self

    def decision_function(self, texts) -> np.ndarray:
        return self._model.decision_function(self._matrix(texts, fit=False))


def unit(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def entity_pair_features(e: np.ndarray) -> np.ndarray:
    """The ``entity_embed`` member's features from an (n, k, d) array of entity embeddings (a
    missing entity is a zero vector): each entity scaled to unit length, then for each pair i < j
    their elementwise product and absolute difference, each scaled to unit length too (every block
    on the scale the ``minilm`` member reads), all concatenated."""
    u = unit(np.asarray(e, dtype=np.float64))
    n, k, _ = u.shape
    parts = [u[:, i] for i in range(k)]
    for i in range(k):
        for j in range(i + 1, k):
            parts += [unit(u[:, i] * u[:, j]), unit(np.abs(u[:, i] - u[:, j]))]
    return np.hstack(parts)


def entity_pair_cosines(e: np.ndarray) -> np.ndarray:
    """(n, k(k-1)/2): the cosine similarity of each pair i < j of a row's entity embeddings (0 when
    either is missing)."""
    u = unit(np.asarray(e, dtype=np.float64))
    k = u.shape[1]
    cols = [np.sum(u[:, i] * u[:, j], axis=1) for i in range(k) for j in range(i + 1, k)]
    return np.column_stack(cols) if cols else np.zeros((u.shape[0], 0))


def entity_model(params: dict[str, Any]):
    """Pair features of the entity embeddings (:func:`entity_pair_features`), then a logistic
    regression."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    return make_pipeline(FunctionTransformer(entity_pair_features), logistic(params["C"]))


class StructuredGBM:
    """Gradient-boosted trees (scikit-learn's HistGradientBoostingClassifier, fixed random_state)
    on a task card's declared features, read as :class:`StructuredModel` reads them, plus the
    cosine similarity of each pair of the row's entity embeddings when the card declares entities.

    Numeric features: the raw value (missing: NaN, which the trees route on their own).
    Categorical: a native categorical feature over the values seen at least GBM_MIN_COUNT times in
    train (the GBM_MAX_CATEGORIES most frequent); any other value, and a missing one, is NaN."""

    def __init__(
        self,
        features: Sequence[StructuredFeature],
        *,
        max_depth: int,
        learning_rate: float,
        max_iter: int,
    ):
        self.features = tuple(features)
        self.max_depth, self.learning_rate, self.max_iter = max_depth, learning_rate, max_iter

    def _raw(self, rows) -> tuple[list[list[str | None]], np.ndarray]:
        values, extra = [], []
        for row in rows:
            text, meta, cos = row
            values.append([f.extract(str(text), meta) for f in self.features])
            extra.append(np.asarray(cos, dtype=np.float64))
        return values, np.array(extra, dtype=np.float64).reshape(len(values), -1)

    def _matrix(self, rows, *, fit: bool) -> np.ndarray:
        from collections import Counter

        values, cos = self._raw(rows)
        if fit:
            self._codes: list[dict[str, int]] = []
            for j, f in enumerate(self.features):
                if f.kind != "categorical":
                    self._codes.append({})
                    continue
                counts = Counter(str(v[j]) for v in values if v[j] is not None)
                kept = sorted(
                    (v for v, c in counts.items() if c >= GBM_MIN_COUNT), key=lambda v: (-counts[v], v)
                )[:GBM_MAX_CATEGORIES]
                self._codes.append({v: i for i, v in enumerate(sorted(kept))})
        cols = np.full((len(values), len(self.features)), np.nan)
        for j, f in enumerate(self.features):
            for i, v in enumerate(values):
                value = v[j]
                if value is None:
                    continue
                if f.kind == "categorical":
                    code = self._codes[j].get(value)
                    cols[i, j] = np.nan if code is None else code
                else:
                    with contextlib.suppress(ValueError):
                        cols[i, j] = float(value)
        return np.hstack([cols, cos])

    def fit(self, rows, labels) -> StructuredGBM:
        from sklearn.ensemble import HistGradientBoostingClassifier
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

        x = self._matrix(rows, fit=True)
        categorical = [f.kind == "categorical" for f in self.features] + [False] * (
            x.shape[1] - len(self.features)
        )
        model = HistGradientBoostingClassifier(
            max_depth=self.max_depth,
            learning_rate=self.learning_rate,
            max_iter=self.max_iter,
            categorical_features=np.array(categorical, dtype=bool) if any(categorical) else None,
            early_stopping=False,
            random_state=PANEL_SEED,
        )
        # one thread: on a few hundred rows the threads' start-up costs ten times the work
        with threadpool_limits(1):
            self._model = model.fit(x, labels)
        return self

    def decision_function(self, rows) -> np.ndarray:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            return self._model.decision_function(self._matrix(rows, fit=False))
