"""The ``max`` position: the per-dimension maximum of the residual over the tokens ``mean`` averages
(no pad, no special token the tokenizer adds), harvested with a cache key of its own, read the
same way by the attack, and accepted wherever a position is declared."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evaluator.core.activations import ActivationCache, cache_key_parts
from evaluator.core.applicability import POSITIONS, ProbeReads, applicability
from evaluator.core.harvest import harvest, run_inputs_check, span_max
from evaluator.core.probes import ProbeMetadata
from evaluator.core.recipes import Recipe
from evaluator.errors import ArtifactError, EvaluatorError
from tests.evaluator.conftest import SMOLLM, TASK

PROMPTS = [
    "The capital of France is Paris.",
    "Hi",
    "The capital of Peru is Lima, and this sentence goes on for quite a few more words than the others.",
    "Question: what is 2 + 2?\nAnswer: 4",
]
LAYERS = [0, 6, 30]
ACCEPTED = "last_token, mean, max"


def _close(a: np.ndarray, b: np.ndarray, rtol: float = 1e-4) -> bool:
    """Equal up to float32 reordering noise, relative to the vector's scale."""
    return bool(np.abs(a - b).max() <= rtol * max(1.0, float(np.abs(b).max())))


def _hidden_alone(lm, prompt: str, layer: int) -> np.ndarray:
    """The residual "t d" of ``prompt`` alone (no padding) at ``layer``: the embedding output at 0,
    else block ``layer - 1``'s raw output, by a forward hook of our own."""
    enc = lm.tokenizer([prompt], return_tensors="pt")
    if layer == 0:
        with torch.inference_mode():
            return lm.model(**enc, output_hidden_states=True).hidden_states[0][0].float().numpy()
    captured = {}
    handle = lm.blocks[layer - 1].register_forward_hook(lambda m, a, out: captured.setdefault("h", out))
    try:
        with torch.inference_mode():
            lm.model(**enc)
    finally:
        handle.remove()
    out = captured["h"][0] if isinstance(captured["h"], tuple) else captured["h"]
    return out[0].float().numpy()


# --------------------------------------------------------------------------- the pooling itself


def test_a_masked_position_never_wins_even_where_every_real_value_is_negative():
    hidden = torch.tensor([[[-3.0, -1.0], [-2.0, -5.0], [0.0, 0.0], [9.0, 9.0]]])  # "1 4 2"
    outside = torch.tensor([[False, False, True, True]])  # a pad at 0 and a special token at 9
    assert span_max(hidden, outside).tolist() == [[-2.0, -1.0]]


def test_the_gradient_reaches_only_the_winning_position_of_each_dimension():
    hidden = torch.tensor([[[1.0, 4.0], [3.0, 2.0], [7.0, 7.0]]], requires_grad=True)
    span_max(hidden, torch.tensor([[False, False, True]])).sum().backward()
    assert hidden.grad is not None
    assert hidden.grad[0].tolist() == [[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]


# --------------------------------------------------------------------------- the harvest, real models


@pytest.mark.model
def test_the_harvested_max_is_the_hand_computed_max_over_the_prompt(smollm):
    got = harvest(smollm, PROMPTS, layers=LAYERS, positions=["mean", "max"])
    for layer in LAYERS:
        for i, prompt in enumerate(PROMPTS):
            h = _hidden_alone(smollm, prompt, layer)  # SmolLM2 adds no special token of its own
            assert _close(got[(layer, "max")][i], h.max(axis=0)), (layer, prompt)
            assert _close(got[(layer, "mean")][i], h.mean(axis=0)), (layer, prompt)
    assert not _close(got[(6, "max")], got[(6, "mean")], rtol=1e-2)


@pytest.mark.model
def test_pads_never_contribute_to_the_max(smollm):
    """The short prompts are padded in the batch with the long one; each one's max is the one it
    has alone (at layer 0 a pad's vector is the pad token's embedding, a real vector that would win
    some dimensions if it were pooled)."""
    batched = harvest(smollm, PROMPTS, layers=LAYERS, positions=["max"])
    for i, prompt in enumerate(PROMPTS):
        alone = harvest(smollm, [prompt], layers=LAYERS, positions=["max"])
        for key, matrix in batched.items():
            assert _close(matrix[i], alone[key][0]), (key, prompt)
    pad = smollm.embeddings(torch.tensor([smollm.tokenizer.pad_token_id]))[0].float().detach().numpy()
    short = _hidden_alone(smollm, "Hi", 0)
    assert (pad > short.max(axis=0)).any()  # so a pooled pad would have changed the max


@pytest.mark.model
def test_the_encoders_cls_and_sep_never_contribute_to_the_max(minilm):
    prompt = "The capital of France is Paris."
    got = harvest(minilm, [prompt, "Hi"], layers=[6], positions=["max"])[(6, "max")][0]
    enc = minilm.tokenizer([prompt], return_tensors="pt")
    with torch.inference_mode():
        h = minilm.model(**enc, output_hidden_states=True).hidden_states[6][0].numpy()
    assert _close(got, h[1:-1].max(axis=0))  # [CLS] first, [SEP] last
    assert not _close(got, h.max(axis=0), rtol=1e-3)


@pytest.mark.model
def test_the_cache_keeps_max_apart_from_mean(smollm, tiny_registry, tmp_path):
    from evaluator.core.activations import split_activations
    from evaluator.core.harvest import HarvestConfig

    task = tiny_registry.task(TASK)
    keys = {
        p: ActivationCache.make_key(
            cache_key_parts(
                smollm,
                task,
                split_sha256="0" * 64,
                layer=6,
                position=p,
                input_kind="single",
                config=HarvestConfig(),
            )
        )
        for p in POSITIONS
    }
    assert len(set(keys.values())) == len(POSITIONS)
    cache = ActivationCache(tmp_path)
    got = {
        p: split_activations(
            smollm, tiny_registry, TASK, "test", layers=[6], position=p, cache=cache, all_layers=False
        )[6]
        for p in ("mean", "max")
    }
    assert got["max"].cache_key != got["mean"].cache_key and not got["max"].cache_hit
    assert not _close(got["max"].X, got["mean"].X, rtol=1e-2)
    again = split_activations(
        smollm, tiny_registry, TASK, "test", layers=[6], position="max", cache=cache, all_layers=False
    )[6]
    assert again.cache_hit and np.array_equal(again.X, got["max"].X)


# --------------------------------------------------------------------------- the attack reads the same


@pytest.mark.model
@pytest.mark.parametrize("layer", [0, 6])
def test_the_attacks_reading_of_a_max_probe_is_the_harvest_on_clean_inputs(smollm, layer):
    from evaluator.axes.attack import _encode, _pooled

    prompts = _encode(smollm, PROMPTS, 512, 0)
    read = _pooled(smollm, prompts, range(len(PROMPTS)), None, layer=layer, position="max")
    harvested = harvest(smollm, PROMPTS, layers=[layer], positions=["max"])[(layer, "max")]
    assert _close(read.detach().numpy(), harvested)


@pytest.mark.model
def test_the_attacks_max_is_differentiable_and_ignores_positions_of_weight_zero(smollm):
    """At layer 0 the read is the input embeddings themselves: a huge vector at a position whose
    pool weight is 0 never wins, and the suffix, whose weight is 1, gets a gradient."""
    from evaluator.axes.attack import _encode, _pooled, probe_read

    prompts = _encode(smollm, PROMPTS[:2], 512, 4)
    with torch.no_grad():
        inputs = smollm.embeddings(torch.tensor([prompts.ids[0]])).float()
    n = inputs.shape[1]
    spiked = torch.cat([inputs, torch.full((1, 1, smollm.d_model), 1e4)], dim=1)
    mask = torch.ones((1, n + 1), dtype=torch.long)
    pool = torch.tensor([[1.0] * n + [0.0]])
    read = probe_read(smollm, spiked, mask, pool, [n + 1], layer=0, position="max")
    assert torch.allclose(read, inputs[0].max(dim=0).values[None])

    suffix = (
        torch.randn(4, smollm.d_model, generator=torch.Generator().manual_seed(0)) * 0.05
    ).requires_grad_()
    pooled = _pooled(smollm, prompts, [0, 1], suffix, layer=6, position="max")
    pooled.sum().backward()
    assert suffix.grad is not None and torch.isfinite(suffix.grad).all() and suffix.grad.abs().sum() > 0


@pytest.fixture(scope="module")
def max_probe(tiny_registry, cache_dir, smollm, tmp_path_factory):
    """A logistic probe on capitals-v1 at SmolLM2's layer 6, reading the max-pooled residual."""
    from evaluator.core.probes import save_probe
    from evaluator.core.recipes import train_recipe

    recipe = Recipe(method="logistic_regression", task=TASK, layer=6, position="max", seed=0)
    trained = train_recipe(recipe, smollm, registry=tiny_registry, cache=ActivationCache(cache_dir))
    out = tmp_path_factory.mktemp("max-probe")
    save_probe(out, trained.tensors, trained.metadata(name="capitals max logreg", category="hallucination"))
    return out


@pytest.mark.model
def test_the_attacks_clean_scores_of_a_max_probe_are_the_boards(max_probe, tiny_registry, cache_dir, smollm):
    from evaluator.axes.attack import _encode, _scores
    from evaluator.axes.run import execute_run
    from evaluator.core.activations import read_split
    from evaluator.core.harvest import render_prompts
    from evaluator.core.probes import load_probe

    probe = load_probe(max_probe, registry=tiny_registry)
    assert probe.metadata.position == "max"
    run = execute_run(
        max_probe, task_id=TASK, split="test", registry=tiny_registry, cache_dir=cache_dir, device="cpu"
    )
    rows = read_split(tiny_registry, TASK, "test")
    encoded = _encode(smollm, render_prompts(tiny_registry.task(TASK), rows.texts, "single"), 512, 0)
    own = _scores(smollm, probe, encoded, range(len(rows.ids)), None)
    assert own == pytest.approx(run.examples.scores, abs=1e-3)


# --------------------------------------------------------------------------- declared and validated


def _metadata(**overrides) -> dict:
    return {
        "name": "A max probe",
        "category": "hallucination",
        "base_model": SMOLLM,
        "layer": 6,
        "position": "max",
        "input": "single",
        "output": "logit",
        "license": "MIT",
    } | overrides


def test_probe_metadata_accepts_max_and_lists_it_when_refusing_another(tiny_registry):
    assert ProbeMetadata.from_dict(_metadata(), registry=tiny_registry).position == "max"
    with pytest.raises(ArtifactError, match=f"position 'middle' is not one of {ACCEPTED}"):
        ProbeMetadata.from_dict(_metadata(position="middle"), registry=tiny_registry)


def test_a_recipe_accepts_max_and_refuses_an_unknown_position_with_the_accepted_ones():
    assert Recipe.from_dict({"method": "mlp", "task": TASK, "layer": 6, "position": "max"}).position == "max"
    with pytest.raises(ArtifactError, match=f"unknown position 'first'; accepted: {ACCEPTED}"):
        Recipe.from_dict({"method": "mlp", "task": TASK, "layer": 6, "position": "first"})


def test_the_harvester_and_the_applicability_rule_list_max_among_the_accepted(tiny_registry):
    task, model = tiny_registry.task(TASK), tiny_registry.model(SMOLLM)
    for input_kind in ("single", "contrast_pair"):
        reads = ProbeReads(input=input_kind, position="max", layer=6)
        assert applicability(reads, task, model) == applicability(
            ProbeReads(input=input_kind, position="mean", layer=6), task, model
        )
    ok, why = applicability(ProbeReads(input="single", position="first", layer=6), task, model)
    assert not ok and why == f"unknown position 'first'; accepted: {ACCEPTED}"
    run_inputs_check(
        tiny_registry,
        TASK,
        "test",
        model_id=SMOLLM,
        n_layers=30,
        layers=[6],
        position="max",
        input_kind="single",
    )
    with pytest.raises(EvaluatorError, match=f"unknown position 'first'; accepted: {ACCEPTED}"):
        run_inputs_check(
            tiny_registry,
            TASK,
            "test",
            model_id=SMOLLM,
            n_layers=30,
            layers=[6],
            position="first",
            input_kind="single",
        )


def test_the_train_command_takes_max_and_names_the_accepted_positions(capsys):
    from evaluator.commands.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "{last_token,mean,max}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(
            [
                "train",
                "--model",
                SMOLLM,
                "--task",
                TASK,
                "--layer",
                "6",
                "--method",
                "mlp",
                "--out",
                "x",
                "--position",
                "first",
            ]
        )
    assert "invalid choice: 'first' (choose from" in capsys.readouterr().err
