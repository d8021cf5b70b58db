"""Direction utility (evaluator/steer.py): readouts declared in tasks.yaml, addition and
ablation of a probe's direction against random directions, on the real SmolLM2.

Fast (default): the readout and steering schema; the replay from the probe's layer equals the
full forward; adding the cities probe's direction moves the truth readout towards "false";
a random-direction probe stays within the random spread; n/a without a readout; the encoder
and MLP probes are not eligible; the CLI's JSON. Runs use a handful of rows and layer-28 probes
where the intervention's cost does not matter (the replay then runs 2 of 30 blocks).

Slow (``-m slow``): the cities reference probe at the protocol's default subset.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from bench.bench_steer import random_probe_write
from evaluator.activations import HarvestConfig, read_split, render
from evaluator.errors import RegistryError
from evaluator.models import load_model
from evaluator.probes import load_probe
from evaluator.registry import load_protocol, load_registry, load_tasks
from evaluator.steer import (
    _ablation,
    _addition,
    _encode,
    direction_utility,
    random_directions,
    readout_prefix,
    readout_tokens,
    readouts,
    readouts_batched,
    steer_probe,
    steer_task,
    unit_direction,
)
from tests.evaluator.conftest import GEMMA, PROJECT_ROOT, SMOLLM, model_cache_dir

REFERENCE = PROJECT_ROOT / "registry" / "reference_probes"


@pytest.fixture(scope="module")
def registry():
    return load_registry(PROJECT_ROOT)


@pytest.fixture(scope="module")
def smollm2(registry):
    return load_model(SMOLLM, registry=registry, cache_dir=model_cache_dir(), device="cpu")


# --------------------------------------------------------------------------- schema


def _tasks_yaml(tmp_path: Path, readout: dict) -> Path:
    """tasks.yaml with only its first task, whose readout keys are replaced by ``readout``."""
    data = yaml.safe_load((PROJECT_ROOT / "tasks.yaml").read_text(encoding="utf-8"))
    first = {k: v for k, v in data["tasks"][0].items() if not k.startswith("readout")}
    data["tasks"] = [first | readout]
    path = tmp_path / "tasks.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_every_task_declares_a_readout_or_says_why_not(registry):
    for task in registry.tasks.values():
        if getattr(task, "on_policy", False):
            continue  # on-policy tasks declare no readout yet
        assert task.readout is not None or task.readout_reason, task.id
    assert registry.task("prompted-sandbagging-v1").readout is None
    assert "answer key" in registry.task("prompted-sandbagging-v1").readout_reason
    refusal = registry.task("harmful-requests-v1").readout
    assert refusal.template_for("smollm2").startswith("<|im_start|>")
    assert refusal.template_for("gemma3") is None  # a base model has no chat markup to read


@pytest.mark.parametrize(
    ("readout", "message"),
    [
        ({"readout": None}, "needs a readout_reason"),
        ({"readout": {"template": "no placeholder", "positive": [" No"], "negative": [" Yes"]}}, "text"),
        ({"readout": {"template": "{text}", "positive": [" No"], "negative": [" No"]}}, "share"),
        ({"readout": {"template": "{text}", "positive": [], "negative": [" Yes"]}}, "non-empty"),
        ({"readout": {"template": "{text}", "positive": [" No"], "negative": [" Yes"], "x": 1}}, "unknown"),
    ],
)
def test_a_malformed_readout_is_refused_with_the_reason(tmp_path, readout, message):
    with pytest.raises(RegistryError, match=message):
        load_tasks(_tasks_yaml(tmp_path, readout))


def test_a_declared_readout_loads(tmp_path):
    readout = {"template": "{text} True? Answer:", "positive": [" No"], "negative": [" Yes"]}
    _, tasks = load_tasks(_tasks_yaml(tmp_path, {"readout": readout}))
    spec = next(iter(tasks.values())).readout
    assert spec.template_for("smollm2") == "{text} True? Answer:" and spec.positive == (" No",)


def test_the_protocol_names_the_steering_settings(tmp_path):
    steering = load_protocol(PROJECT_ROOT / "registry" / "protocols" / "p1.yaml").steering
    assert steering.random_directions >= 16 and 0 < steering.examples <= 128
    text = (PROJECT_ROOT / "registry" / "protocols" / "p1.yaml").read_text()
    path = tmp_path / "p1.yaml"
    path.write_text(text.replace("random_directions: 16", "random_directions: 8"))
    with pytest.raises(RegistryError, match="at least 16"):
        load_protocol(path)


def test_random_directions_are_seeded_unit_vectors():
    a, b = random_directions(576, k=16, seed=0), random_directions(576, k=16, seed=0)
    assert np.array_equal(a, b) and np.allclose(np.linalg.norm(a, axis=1), 1.0)
    assert not np.array_equal(a, random_directions(576, k=16, seed=1))


def test_direction_utility_averages_only_the_tasks_with_a_readout():
    assert direction_utility([{"utility_z": 3.0}, {"utility_z": None}, {"utility_z": 1.0}]) == 2.0
    assert direction_utility([{"utility_z": None}]) is None


# --------------------------------------------------------------------------- the real model


def test_the_replay_from_the_probe_layer_equals_the_full_forward(registry, smollm2):
    task = registry.task("cities-truth-v1")
    rows = read_split(registry, task.id, "test")
    encoded = _encode(smollm2, [render(task.readout.template, t) for t in rows.texts[:5]], HarvestConfig())
    tokens = readout_tokens(smollm2, positive=task.readout.positive, negative=task.readout.negative)
    prefix = readout_prefix(smollm2, encoded, layer=18, tokens=tokens)
    assert np.array_equal(readouts(smollm2, prefix, tokens=tokens), prefix.base)
    assert prefix.norms.size == encoded.lengths.sum()  # one norm per real token


def _prefix(registry, lm, *, task_id: str, rows: int, layer: int, batch_size: int = 32):
    task = registry.task(task_id)
    texts = read_split(registry, task.id, "test").texts[:rows]
    template = task.readout.template_for(registry.model(lm.id).family)
    encoded = _encode(lm, [render(template, t) for t in texts], HarvestConfig(batch_size=batch_size))
    tokens = readout_tokens(lm, positive=task.readout.positive, negative=task.readout.negative)
    return readout_prefix(lm, encoded, layer=layer, tokens=tokens), tokens


def _edits(lm, prefix, k: int = 3):
    import torch

    directions = random_directions(lm.d_model, k=k, seed=3)
    alpha = 0.5 * float(np.median(prefix.norms))
    as_t = lambda v: torch.as_tensor(v, dtype=torch.float32)  # noqa: E731
    return [_addition(as_t(alpha * d)) for d in directions] + [_ablation(as_t(d)) for d in directions]


@pytest.mark.parametrize(("batch_size", "replay_tokens"), [(32, 32768), (2, 32768), (2, 1)])
def test_stacked_interventions_give_the_readouts_of_one_replay_each(
    registry, smollm2, batch_size, replay_tokens
):
    """Batches of 5, of 2+2+1 (a one-row batch), and one intervention per pass."""
    prefix, tokens = _prefix(
        registry, smollm2, task_id="cities-truth-v1", rows=5, layer=26, batch_size=batch_size
    )
    edits = _edits(smollm2, prefix)
    one_each = np.stack([readouts(smollm2, prefix, tokens=tokens, edit=e) for e in edits])
    stacked = readouts_batched(smollm2, prefix, tokens=tokens, edits=edits, replay_tokens=replay_tokens)
    assert stacked.shape == (len(edits), 5)
    atol = 1e-3 + 1e-4 * float(np.abs(one_each).max())  # the protocol's score tolerance
    np.testing.assert_allclose(stacked, one_each, rtol=0, atol=atol)
    assert not np.allclose(stacked[0], prefix.base)  # the interventions did something


def test_stacking_works_through_gemmas_sliding_window_blocks(registry):
    gemma = load_model(GEMMA, registry=registry, cache_dir=model_cache_dir(), device="cpu")
    prefix, tokens = _prefix(registry, gemma, task_id="cities-truth-v1", rows=4, layer=14, batch_size=3)
    edits = _edits(gemma, prefix, k=2)
    one_each = np.stack([readouts(gemma, prefix, tokens=tokens, edit=e) for e in edits])
    stacked = readouts_batched(gemma, prefix, tokens=tokens, edits=edits)
    np.testing.assert_allclose(stacked, one_each, rtol=0, atol=1e-3 + 1e-4 * float(np.abs(one_each).max()))


def test_a_batched_steer_run_has_the_numbers_of_one_replay_per_intervention(registry, smollm2):
    probe = load_probe(REFERENCE / "refusal-dom-smollm2", registry=registry)  # layer 28: 2 blocks replayed
    replays: list[int] = []
    handle = smollm2.blocks[probe.layer].register_forward_pre_hook(lambda m, a: replays.append(1))
    try:
        runs = {}
        for batched in (False, True):
            replays.clear()
            runs[batched] = steer_task(
                probe,
                smollm2,
                registry.task("harmful-requests-v1"),
                registry=registry,
                settings=registry.protocol().steering,
                config=HarvestConfig(),
                n=8,
                batched=batched,
            )
            runs[batched]["block_calls"] = len(replays)
    finally:
        handle.remove()
    old, new = runs[False], runs[True]
    k = registry.protocol().steering.random_directions
    assert old["block_calls"] == 1 + (2 + 2 * k) and new["block_calls"] == 1 + 1  # prefix + replays
    for part in ("addition", "ablation"):
        for name in ("effect", "random_mean", "random_sd"):
            assert new[part][name] == pytest.approx(old[part][name], abs=1e-3), (part, name)
        np.testing.assert_allclose(
            new[part]["random_effects"], old[part]["random_effects"], rtol=0, atol=1e-3
        )
    assert new["readout"] == old["readout"] and new["ablation"]["judged"] == old["ablation"]["judged"]
    assert new["utility_z"] == pytest.approx(old["utility_z"], rel=1e-3, abs=1e-3)


def test_adding_the_truth_probe_direction_moves_the_readout_towards_false(registry, smollm2):
    """cities-cp-logreg-smollm2 (positive class: the statement is false); the readout is
    log P(" No") − log P(" Yes") after "Is this statement true? Answer:"."""
    import torch

    probe = load_probe(REFERENCE / "cities-cp-logreg-smollm2", registry=registry)
    task = registry.task("cities-truth-v1")
    rows = read_split(registry, task.id, "test")
    encoded = _encode(smollm2, [render(task.readout.template, t) for t in rows.texts[:8]], HarvestConfig())
    tokens = readout_tokens(smollm2, positive=task.readout.positive, negative=task.readout.negative)
    prefix = readout_prefix(smollm2, encoded, layer=probe.layer, tokens=tokens)
    alpha = registry.protocol().steering.alpha_multiple * float(np.median(prefix.norms))
    u = torch.as_tensor(unit_direction(probe), dtype=torch.float32)
    towards = readouts(smollm2, prefix, tokens=tokens, edit=_addition(alpha * u))
    away = readouts(smollm2, prefix, tokens=tokens, edit=_addition(-alpha * u))
    # on average over the rows (the effect the board reports is a mean change)
    assert towards.mean() > prefix.base.mean() > away.mean()
    assert (towards > away).mean() >= 0.75


def test_a_random_direction_probe_stays_within_the_random_spread(registry, smollm2, tmp_path):
    path = random_probe_write(
        tmp_path / "random", layer=28, category="refusal", task="harmful-requests-v1", seed=7
    )
    out = steer_probe(path, registry=registry, cache_dir=model_cache_dir(), n=8, load=lambda _m: smollm2)
    result = out["tasks"]["harmful-requests-v1"]
    assert out["eligible"] and result["readout"]["n"] == 8
    assert len(result["addition"]["random_effects"]) == 16
    assert abs(result["addition"]["utility_z"]) < 2.5
    ablation = result["ablation"]
    assert ablation["judged"] == (
        result["readout"]["auroc"] >= registry.protocol().steering.ablation_min_readout_auroc
    )
    assert ablation["utility_z"] is None or abs(ablation["utility_z"]) < 2.5
    if not ablation["judged"]:  # a readout at chance: the task's z is the addition's alone
        assert ablation["utility_z"] is None and "nothing to drop" in ablation["reason"]
        assert result["utility_z"] == pytest.approx(result["addition"]["utility_z"])
    assert out["direction_utility"] == pytest.approx(result["utility_z"])


def test_a_task_without_a_readout_is_not_applicable(registry, smollm2):
    probe = load_probe(REFERENCE / "sandbagging-logreg-smollm2", registry=registry)
    result = steer_task(
        probe,
        smollm2,
        registry.task("prompted-sandbagging-v1"),
        registry=registry,
        settings=registry.protocol().steering,
        config=HarvestConfig(),
    )
    assert result["readout"] is None and result["utility_z"] is None
    assert "answer key" in result["reason"]


def test_the_encoder_and_mlp_probes_are_not_eligible(registry, tmp_path):
    def no_model(_model_id):
        raise AssertionError("an ineligible probe must not load a model")

    out = steer_probe(REFERENCE / "ea-minilm", registry=registry, cache_dir=model_cache_dir(), load=no_model)
    assert out["eligible"] is False and "encoder" in out["reason"]
    assert out["tasks"] == {} and out["direction_utility"] is None


def test_the_cli_prints_the_steer_json(registry, smollm2, capsys):
    from evaluator.cli import main

    code = main(
        [
            "steer",
            "--probe",
            str(REFERENCE / "refusal-dom-smollm2"),
            "--n",
            "4",
            "--device",
            "cpu",
            "--cache-dir",
            str(model_cache_dir()),
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    task = out["tasks"]["harmful-requests-v1"]
    assert set(task["addition"]) >= {"effect", "random_mean", "random_sd", "utility_z"}
    assert set(task["ablation"]) >= {"effect", "random_mean", "random_sd", "utility_z"}
    assert 0.0 <= task["readout"]["auroc"] <= 1.0
    assert out["direction_utility"] == pytest.approx(task["utility_z"])
    assert out["protocol"] == registry.protocol().id


@pytest.mark.slow
def test_the_cities_probe_at_the_default_subset(registry, smollm2):
    out = steer_probe(
        REFERENCE / "cities-cp-logreg-smollm2",
        registry=registry,
        cache_dir=model_cache_dir(),
        tasks=["cities-truth-v1"],
        load=lambda _m: smollm2,
    )
    result = out["tasks"]["cities-truth-v1"]
    assert result["readout"]["n"] == registry.protocol().steering.examples
    assert result["addition"]["effect"] > 0  # towards "false", the probe's positive class
