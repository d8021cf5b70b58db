"""The graded attack (evaluator/axes/attack_graded.py): the curve's numbers from their definitions,
the budget's checks, and on the real SmolLM2 that the inserted vectors never touch what the probe
reads, stay inside their balls, and give a curve whose printed numbers recompute."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from evaluator.axes.attack import _encode
from evaluator.axes.attack_graded import (
    DRAFT_BUDGET,
    GradedBudget,
    curve_area,
    eps_to_half,
    insert_at,
    pooled_inserted,
)
from evaluator.errors import EvaluatorError
from tests.evaluator.conftest import TASK


def test_the_area_is_the_normalised_trapezoid_over_log_radius():
    assert curve_area([0.01, 0.1, 1.0], [1.0, 1.0, 1.0]) == pytest.approx(1.0)
    assert curve_area([0.01, 0.1, 1.0], [0.0, 0.0, 0.0]) == 0.0
    # a drop from 1 to 0 between the first and the second radius: a quarter of the log range
    assert curve_area([0.01, 0.1, 1.0], [1.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert curve_area([0.5], [0.7]) == 0.7
    with pytest.raises(ValueError):
        curve_area([0.1, 0.2], [1.0])


def test_eps50_interpolates_in_log_radius_and_is_none_when_the_grid_never_halves():
    assert eps_to_half([0.01, 0.1], [1.0, 0.0]) == pytest.approx(math.sqrt(0.01 * 0.1))
    assert eps_to_half([0.01, 0.1], [0.4, 0.0]) == 0.01
    assert eps_to_half([0.01, 0.1], [1.0, 0.6]) is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"tokens": 0}, "tokens"),
        ({"radii": (0.1, 0.05)}, "radii"),
        ({"radii": ()}, "radii"),
        ({"steps": -1}, "steps"),
        ({"step_fraction": 0.0}, "step_fraction"),
        ({"seeds": ()}, "seeds"),
    ],
)
def test_a_budget_out_of_range_names_its_field(change, field):
    import dataclasses

    with pytest.raises(EvaluatorError, match=field):
        dataclasses.replace(DRAFT_BUDGET, **change).check()


@pytest.mark.model
def test_the_vectors_go_after_the_first_content_token_and_never_into_a_one_token_prompt(smollm):
    prompts = _encode(smollm, ["The capital of France is Paris", "Paris"], 64, 4)
    where = insert_at(prompts)
    assert where[0] == 1 and where[0] < len(prompts.ids[0])
    assert where[1] == -1


@pytest.fixture(scope="module")
def fitted(tiny_registry, cache_dir, smollm, tmp_path_factory):
    """A logistic probe on capitals-v1 at SmolLM2's layer 6."""
    from evaluator.core.activations import ActivationCache
    from evaluator.core.probes import save_probe
    from evaluator.core.recipes import Recipe, train_recipe

    recipe = Recipe(method="logistic_regression", task=TASK, layer=6, position="last_token", seed=0)
    trained = train_recipe(recipe, smollm, registry=tiny_registry, cache=ActivationCache(cache_dir))
    out = tmp_path_factory.mktemp("graded")
    save_probe(out, trained.tensors, trained.metadata(name="capitals logreg", category="hallucination"))
    return out


@pytest.mark.model
@pytest.mark.parametrize("position", ["last_token", "mean"])
def test_what_the_probe_reads_at_the_embeddings_does_not_move_when_vectors_are_inserted(smollm, position):
    """At layer 0 the read is the original tokens' embeddings: the inserted vectors, whatever they
    are, change nothing there (they can act only through attention, in later layers)."""
    import torch

    prompts = _encode(smollm, ["The capital of France is Paris.", "Berlin is in Germany, in Europe."], 64, 4)
    where = insert_at(prompts)
    vectors = torch.randn(4, smollm.d_model, generator=torch.Generator().manual_seed(0)) * 3
    clean = pooled_inserted(smollm, prompts, [0, 1], None, where, layer=0, position=position)
    inserted = pooled_inserted(smollm, prompts, [0, 1], vectors, where, layer=0, position=position)
    assert torch.allclose(clean, inserted, atol=1e-6)
    later = pooled_inserted(smollm, prompts, [0, 1], vectors, where, layer=6, position=position)
    assert not torch.allclose(
        pooled_inserted(smollm, prompts, [0, 1], None, where, layer=6, position=position), later
    )


@pytest.mark.model
def test_the_graded_attack_prints_a_curve_whose_numbers_recompute(fitted, tiny_root, cache_dir, capsys):
    from evaluator.commands.cli import main

    argv = ["attack", "--graded", "--probe", str(fitted), "--task", TASK, "--steps", "3", "--seed", "0"]
    assert main([*argv, "--registry", str(tiny_root), "--cache-dir", str(cache_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["protocol"] is None  # a changed budget is never a board number
    assert out["budget"]["steps"] == 3 and out["budget"]["seeds"] == [0]
    (seed,) = out["seeds"]
    curve = seed["curve"]
    assert [c["eps"] for c in curve] == list(DRAFT_BUDGET.radii)
    # the kept recall never rises with the radius, and each vector stays inside its ball
    best = [c["recall_best"] for c in curve]
    assert best == sorted(best, reverse=True) and best[0] <= seed["recall_inserted"]
    assert all(c["moved"] <= c["eps"] * (1 + 1e-4) for c in curve)
    relative = [c["relative"] for c in curve]
    assert all(0.0 <= r <= 1.0 for r in relative)
    assert seed["area"] == pytest.approx(curve_area(DRAFT_BUDGET.radii, relative))
    assert seed["eps50"] == eps_to_half(DRAFT_BUDGET.radii, relative)
    assert out["goodhart_resistance"] == pytest.approx(seed["area"])
    assert out["recall_clean"] > 0 and out["embedding_norm"] > 0
    # the largest radius takes something from this probe: a graded curve, not a flat line
    assert relative[-1] < 1.0
    assert np.isfinite(out["threshold"])


def test_graded_refuses_a_suffix_file(tmp_path, capsys):
    from evaluator.commands.cli import main

    code = main(
        ["attack", "--graded", "--probe", str(tmp_path), "--task", TASK, "--suffix-out", str(tmp_path / "s")]
    )
    assert code != 0
    assert "--graded" in capsys.readouterr().err


def test_the_draft_budget_is_valid():
    assert isinstance(DRAFT_BUDGET.check(), GradedBudget)
    assert len(DRAFT_BUDGET.seeds) >= 2
