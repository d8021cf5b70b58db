"""Recipes train real probes deterministically, and a logistic probe on SmolLM2 separates
held-out true and false capital statements."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator.core.activations import ActivationCache, split_activations
from evaluator.core.probes import probe_from_tensors
from evaluator.core.recipes import METHODS, Recipe, fit_recipe, map_layer, train_recipe
from evaluator.errors import ArtifactError, UnknownNameError
from evaluator.metrics.metrics import auroc
from tests.evaluator.conftest import SMOLLM, TASK

LAYER = 15
#: every method that fits from the activations alone (an SAE recipe also reads a registered SAE:
#: tests/evaluator/test_sae_probe.py fits it on a synthetic one)
FIT_METHODS = [m for m in METHODS if m != "sae_topk_meandiff"]


@pytest.fixture(scope="module")
def acts(smollm, tiny_registry, cache_dir):
    cache = ActivationCache(cache_dir)
    train = split_activations(
        smollm, tiny_registry, TASK, "train", layers=[LAYER], position="last_token", cache=cache
    )[LAYER]
    test = split_activations(
        smollm, tiny_registry, TASK, "test", layers=[LAYER], position="last_token", cache=cache
    )[LAYER]
    return train, test


def recipe(method: str, **hyper) -> Recipe:
    return Recipe(method=method, task=TASK, layer=LAYER, hyperparameters=hyper, seed=0)


def _probe(tensors, tiny_registry, input_kind="single"):
    meta = {
        "name": "t",
        "category": "hallucination",
        "base_model": SMOLLM,
        "layer": LAYER,
        "position": "last_token",
        "input": input_kind,
        "output": "logit",
        "license": "MIT",
    }
    return probe_from_tensors(tensors, meta, registry=tiny_registry)


@pytest.mark.model
@pytest.mark.parametrize("method", FIT_METHODS)
def test_every_recipe_is_deterministic(acts, method):
    train, _ = acts
    first = fit_recipe(recipe(method), train.X, train.labels)
    second = fit_recipe(recipe(method), train.X.copy(), train.labels.copy())
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_array_equal(first[name], second[name])


@pytest.mark.model
@pytest.mark.parametrize("method", FIT_METHODS)
def test_every_recipe_separates_held_out_statements_above_chance(acts, method, tiny_registry):
    train, test = acts
    probe = _probe(fit_recipe(recipe(method), train.X, train.labels), tiny_registry)
    floor = 0.6 if method == "pca_unsupervised" else 0.8  # the unsupervised direction is weaker
    assert auroc(probe.score(test.X), test.labels) > floor


@pytest.mark.model
def test_a_logistic_probe_on_smollm2_separates_held_out_capitals_well(smollm, tiny_registry, cache_dir):
    trained = train_recipe(
        recipe("logistic_regression"), smollm, registry=tiny_registry, cache=ActivationCache(cache_dir)
    )
    probe = _probe(trained.tensors, tiny_registry)
    _, test = split_activations(
        smollm,
        tiny_registry,
        TASK,
        "test",
        layers=[LAYER],
        position="last_token",
        cache=ActivationCache(cache_dir),
    ).popitem()
    # held-out countries (grouped split); 0.97 was measured with grouped CV on this layer
    assert auroc(probe.score(test.X), test.labels) >= 0.9


@pytest.mark.model
def test_pca_sign_is_fixed_so_positives_score_higher(acts, tiny_registry):
    train, _ = acts
    for flip in (1, -1):
        tensors = fit_recipe(recipe("pca_unsupervised"), flip * train.X, train.labels)
        scores = _probe(tensors, tiny_registry).score(flip * train.X)
        assert scores[train.labels == 1].mean() > scores[train.labels == 0].mean()


@pytest.mark.model
def test_a_different_seed_changes_the_mlp(acts):
    train, _ = acts
    a = fit_recipe(recipe("mlp"), train.X, train.labels)
    b = fit_recipe(Recipe(method="mlp", task=TASK, layer=LAYER, seed=1), train.X, train.labels)
    assert not np.array_equal(a["w1"], b["w1"])


def test_an_unknown_method_suggests_the_closest_one():
    with pytest.raises(UnknownNameError, match="did you mean 'logistic_regression'"):
        Recipe.from_dict({"method": "logistic_regresion", "task": TASK, "layer": 3})


def test_an_unknown_hyperparameter_is_rejected_with_the_accepted_ones():
    with pytest.raises(ArtifactError, match="unknown hyperparameter.*gamma.*accepted: C, standardize"):
        Recipe.from_dict(
            {"method": "logistic_regression", "task": TASK, "layer": 3, "hyperparameters": {"gamma": 1}}
        )


def test_a_recipe_for_a_template_the_task_lacks_is_rejected(tiny_registry):
    with pytest.raises(ArtifactError, match="template"):
        Recipe.from_dict(
            {"method": "lda", "task": TASK, "layer": 3, "input": "single", "template": "contrast_pair"},
            registry=tiny_registry,
        )


def test_single_class_training_data_is_an_error():
    with pytest.raises(Exception, match="both classes"):
        fit_recipe(recipe("lda"), np.ones((4, 3)), np.ones(4))


def test_layers_map_by_relative_depth():
    assert map_layer(15, 30, 18) == 9
    assert map_layer(30, 30, 6) == 6
    assert map_layer(0, 30, 18) == 0


@pytest.mark.parametrize("method", ["logistic_regression", "mlp"])
def test_a_column_constant_up_to_rounding_is_centred_but_never_scaled(method):
    """A column that differs between rows only by float32 rounding (as a max-pooled dimension won by
    the first token does) is not blown up into a feature: rounding it again moves what the probe
    reads by no more than the rounding."""
    rng = np.random.default_rng(0)
    y = np.tile([0, 1], 40)
    X = rng.normal(size=(80, 8)) + y[:, None] * 0.8
    X[:, 3] = 5.7 + rng.normal(scale=1e-7, size=80)  # 5.7 up to rounding
    tensors = fit_recipe(Recipe(method=method, task=TASK, layer=1, seed=0), X, y)
    assert tensors["scale"][3] == 1.0 and tensors["mean"][3] == pytest.approx(5.7)
    assert tensors["scale"][0] == pytest.approx(X[:, 0].std())
    nudged = X.copy()
    nudged[:, 3] += rng.normal(scale=1e-6, size=80)
    moved = (nudged - tensors["mean"]) / tensors["scale"] - (X - tensors["mean"]) / tensors["scale"]
    assert np.abs(moved).max() < 1e-5
