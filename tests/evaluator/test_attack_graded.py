"""The graded attack (evaluator/axes/attack_graded.py): the curve's numbers from their definitions,
the budget's checks, and on the real SmolLM2 and MiniLM that the inserted vectors never touch what
the probe reads, stay inside their balls, and give a curve whose printed numbers recompute; that a
contrast pair and an encoder are attacked reading what the board reads; that the attacked rows are
the same for every probe of a task."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from evaluator.axes.attack import _encode
from evaluator.axes.attack_graded import (
    Sides,
    attacked_positives,
    curve_area,
    eps_to_half,
    insert_at,
    pooled_inserted,
)
from evaluator.data.registry.protocols import GradedAttackSettings, load_protocol
from evaluator.errors import EvaluatorError, RegistryError
from tests.evaluator.conftest import PROJECT_ROOT, TASK

P2 = PROJECT_ROOT / "registry" / "protocols" / "p2.yaml"
BUDGET = load_protocol(P2).attack_graded


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
        ({"min_caught": 0}, "min_caught"),
        ({"max_positives": 4, "min_caught": 8}, "min_caught"),
    ],
)
def test_a_budget_out_of_range_names_its_field(change, field):
    import dataclasses

    with pytest.raises(EvaluatorError, match=field):
        dataclasses.replace(BUDGET, **change).check()


def test_p2_carries_the_graded_budget_and_keeps_p1_otherwise():
    p1 = load_protocol(PROJECT_ROOT / "registry" / "protocols" / "p1.yaml")
    p2 = load_protocol(P2)
    assert p1.attack_graded is None and isinstance(p2.attack_graded, GradedAttackSettings)
    assert len(p2.attack_graded.seeds) >= 2
    # nothing else a number depends on moved: the clean numbers of p1 and p2 are the same numbers
    for field in (
        "dtype",
        "max_length",
        "batch_size",
        "max_batch_tokens",
        "seeds",
        "tolerances",
        "steering",
        "attack",
    ):
        assert getattr(p1, field) == getattr(p2, field), field


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("  radii: [0.1, 0.05]", "radii"),
        ("  seeds: []", "seeds"),
        ("  min_caught: 100", "min_caught"),
        ("  tokens: 2.5", "tokens"),
        ("  surprise: 1", "unknown key"),
    ],
)
def test_a_bad_graded_section_is_refused_naming_the_field(tmp_path, edit, message):
    key = edit.split(":")[0]
    lines = P2.read_text().splitlines()
    if any(line.startswith(f"{key}:") for line in lines):
        lines = [edit if line.startswith(f"{key}:") else line for line in lines]
    else:
        lines.append(edit)
    path = tmp_path / "p2.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RegistryError, match=message):
        load_protocol(path)


def test_the_attacked_positives_are_a_seeded_subset_shared_by_every_probe_of_the_task():
    ids = [f"r{i}" for i in range(200)]
    labels = [i % 2 for i in range(200)]
    first = attacked_positives("t", ids, labels, 64)
    assert first == attacked_positives("t", ids, labels, 64)  # no probe enters the choice
    assert len(first) == 64 and first == sorted(first) and all(labels[i] == 1 for i in first)
    assert first != attacked_positives("other-task", ids, labels, 64)
    assert len(attacked_positives("t", ids, labels, 500)) == 100


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
def test_the_graded_attack_gives_a_curve_whose_numbers_recompute(fitted, tiny_registry, cache_dir):
    import dataclasses

    from evaluator.axes.attack_graded import attack_graded

    budget = dataclasses.replace(BUDGET, steps=3, seeds=(0,), min_caught=4)
    out = attack_graded(fitted, task_id=TASK, registry=tiny_registry, cache_dir=cache_dir, budget=budget)
    assert out["protocol"] is None  # a changed budget is never a board number
    assert out["budget"]["steps"] == 3 and out["budget"]["seeds"] == [0]
    assert out["not_attacked"] is None and out["caught_clean"] >= 4
    assert len(out["ids"]) == out["n_positives"]
    (seed,) = out["seeds"]
    curve = seed["curve"]
    assert [c["eps"] for c in curve] == list(BUDGET.radii)
    # the kept recall never rises with the radius, and each vector stays inside its ball
    best = [c["recall_best"] for c in curve]
    assert best == sorted(best, reverse=True) and best[0] <= seed["recall_inserted"]
    assert all(c["moved"] <= c["eps"] * (1 + 1e-4) for c in curve)
    relative = [c["relative"] for c in curve]
    assert all(0.0 <= r <= 1.0 for r in relative)
    assert seed["area"] == pytest.approx(curve_area(BUDGET.radii, relative))
    assert seed["eps50"] == eps_to_half(BUDGET.radii, relative)
    assert out["goodhart_resistance"] == pytest.approx(seed["area"])
    assert [c["relative"] for c in out["curve"]] == relative and out["eps50"] == [seed["eps50"]]
    assert out["recall_clean"] > 0 and out["embedding_norm"] > 0
    # the largest radius takes something from this probe: a graded curve, not a flat line
    assert relative[-1] < 1.0
    assert np.isfinite(out["threshold"])


@pytest.mark.model
def test_a_task_with_too_few_caught_positives_is_reported_not_graded(fitted, tiny_root, cache_dir, capsys):
    """Under the protocol's budget this probe catches 6 of capitals' 14 test positives at its clean
    threshold: fewer than min_caught, so the command says so and runs no curve."""
    from evaluator.commands.cli import main

    argv = ["attack", "--graded", "--probe", str(fitted), "--task", TASK]
    assert main([*argv, "--registry", str(tiny_root), "--cache-dir", str(cache_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["protocol"] == "p2" and out["seeds"] == [] and out["goodhart_resistance"] is None
    assert out["caught_clean"] < BUDGET.min_caught and "fewer than" in out["not_attacked"]
    from evaluator.commands.cli import attack_summary

    assert "not attacked: the clean threshold catches" in attack_summary(out)  # the terminal's text


def test_graded_refuses_a_suffix_file(tmp_path, capsys):
    from evaluator.commands.cli import main

    code = main(
        ["attack", "--graded", "--probe", str(tmp_path), "--task", TASK, "--suffix-out", str(tmp_path / "s")]
    )
    assert code != 0
    assert "--graded" in capsys.readouterr().err


def _clean_scores(probe_dir, registry, cache_dir):
    from evaluator.axes.attack import clean_setup

    return clean_setup(
        probe_dir, task_id=TASK, registry=registry, cache_dir=cache_dir, device="cpu", lm=None, refuse=None
    )


def _fit(registry, lm, cache_dir, out, **recipe):
    from evaluator.core.activations import ActivationCache
    from evaluator.core.probes import save_probe
    from evaluator.core.recipes import Recipe, train_recipe

    trained = train_recipe(
        Recipe(task=TASK, seed=0, **recipe), lm, registry=registry, cache=ActivationCache(cache_dir)
    )
    save_probe(out, trained.tensors, trained.metadata(name="graded twin", category="hallucination"))
    return out


@pytest.mark.model
@pytest.mark.parametrize("kind", ["contrast_pair", "encoder"])
def test_a_contrast_pair_and_an_encoder_read_what_the_board_reads(
    kind, tiny_registry, cache_dir, smollm, minilm, tmp_path
):
    """With nothing inserted, the attack's forward gives the board's clean scores (through the
    activation cache): a contrast pair's two prompts differenced, an encoder's word embeddings with
    the model's own positions added. So the curve starts from the number the board shows."""
    if kind == "contrast_pair":
        lm = smollm
        probe_dir = _fit(
            tiny_registry,
            lm,
            cache_dir,
            tmp_path,
            method="diff_of_means",
            layer=6,
            input="contrast_pair",
            template="contrast_pair",
        )
    else:
        lm = minilm
        probe_dir = _fit(
            tiny_registry, lm, cache_dir, tmp_path, method="logistic_regression", layer=3, position="mean"
        )
    clean = _clean_scores(probe_dir, tiny_registry, cache_dir)
    sides = Sides.encode(lm, clean.task, clean.test.texts, clean.probe.metadata.input, clean.max_length, 4)
    assert len(sides.prompts) == (2 if kind == "contrast_pair" else 1)
    rows = list(range(len(clean.test.texts)))
    X = sides.read(lm, rows, None, layer=clean.probe.layer, position=clean.probe.metadata.position)
    scores = clean.probe.score(X.detach().numpy().astype(np.float64))
    np.testing.assert_allclose(scores, clean.test_scores, atol=1e-3, rtol=1e-3)


@pytest.mark.model
def test_an_encoder_probe_gets_a_graded_curve(tiny_registry, tiny_root, cache_dir, minilm, tmp_path, capsys):
    from evaluator.commands.cli import main

    probe_dir = _fit(
        tiny_registry, minilm, cache_dir, tmp_path, method="logistic_regression", layer=3, position="mean"
    )
    argv = ["attack", "--graded", "--probe", str(probe_dir), "--task", TASK, "--steps", "2", "--seed", "1"]
    assert main([*argv, "--registry", str(tiny_root), "--cache-dir", str(cache_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["input"] == "single" and out["base_model"] == minilm.id
    if out["not_attacked"]:  # a probe that catches too few positives is reported, not graded
        assert "fewer than" in out["not_attacked"] and out["goodhart_resistance"] is None
    else:
        (seed,) = out["seeds"]
        assert all(c["moved"] <= c["eps"] * (1 + 1e-4) for c in seed["curve"])
        assert 0.0 <= out["goodhart_resistance"] <= 1.0


@pytest.fixture
def readout_registry(tiny_registry):
    """The test registry with a true/false readout on capitals-v1 and a validation bar of 0 (SmolLM2
    135M's readout is near chance on most tasks: the bar's rule is tested apart)."""
    import dataclasses

    from evaluator.data.registry.tasks import ReadoutSpec

    task = tiny_registry.task(TASK)
    readout = ReadoutSpec(template="{text} Is this true? Answer:", positive=(" Yes",), negative=(" No",))
    protocol = tiny_registry.protocol()
    lenient = dataclasses.replace(
        protocol, steering=dataclasses.replace(protocol.steering, min_readout_auroc=0.0)
    )
    return dataclasses.replace(
        tiny_registry,
        tasks={**tiny_registry.tasks, TASK: dataclasses.replace(task, readout=readout)},
        protocols={protocol.id: lenient},
    )


@pytest.mark.model
def test_an_evasion_that_loses_the_behaviour_does_not_count(
    fitted, readout_registry, tiny_registry, cache_dir
):
    """The same start vectors: a positive whose readout fell counts as caught, so the kept curve's
    insertion recall is at least the plain one's. With a tolerance no readout can exceed, the term
    costs nothing and counts nothing: the kept curve is the plain curve, number for number. Without
    a readout the result says why."""
    import dataclasses

    from evaluator.axes.attack_graded import attack_graded

    budget = dataclasses.replace(BUDGET, steps=2, seeds=(0,), min_caught=4, readout_tolerance=1e-6)
    out = attack_graded(fitted, task_id=TASK, registry=readout_registry, cache_dir=cache_dir, budget=budget)
    kept = out["behaviour_kept"]
    assert kept["readout"]["applies"] and 0.0 <= kept["readout"]["readout_auroc"] <= 1.0
    (plain_seed,), (kept_seed,) = out["seeds"], kept["seeds"]
    assert kept_seed["recall_inserted"] >= plain_seed["recall_inserted"]
    assert 0.0 <= kept["goodhart_resistance"] <= 1.0
    loose = dataclasses.replace(budget, readout_tolerance=100.0)
    out = attack_graded(fitted, task_id=TASK, registry=readout_registry, cache_dir=cache_dir, budget=loose)
    assert out["behaviour_kept"]["seeds"] == out["seeds"]
    plain = attack_graded(
        fitted,
        task_id=TASK,
        registry=tiny_registry,
        cache_dir=cache_dir,
        budget=dataclasses.replace(budget, steps=0),
    )
    assert (
        not plain["behaviour_kept"]["readout"]["applies"]
        and "readout" in plain["behaviour_kept"]["readout"]["reason"]
    )
