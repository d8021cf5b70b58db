"""One home for model surgery (evaluator/core/hooks.py): capture and edit a layer of the real
SmolLM2, every hook removed on exit, even on an error; no other evaluator module registers a hook.
The refusal judge is one module too, read by the builder and the steering readout alike."""

from __future__ import annotations

import re

import pytest
import torch

from evaluator.axes import steer_generation
from evaluator.core import hooks
from evaluator.data import judges
from evaluator.data.builders import onpolicy_refusal
from evaluator.data.registry.tasks import READOUT_JUDGES
from evaluator.errors import EvaluatorError
from tests.evaluator.conftest import PROJECT_ROOT

PROMPTS = ["The capital of France is Paris.", "Berlin is in Germany"]


def _hook_counts(lm) -> list[tuple[int, int]]:
    modules = [lm.embeddings, *lm.blocks]
    return [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in modules]


def _batch(lm) -> dict:
    return dict(lm.tokenizer(PROMPTS, return_tensors="pt", padding=True))


@pytest.fixture(scope="module")
def reference(smollm):
    """The full forward's hidden states (transformers' own: [0] embeddings, [k] block k-1)."""
    with torch.inference_mode():
        return smollm.model(**_batch(smollm), output_hidden_states=True).hidden_states


def test_no_evaluator_module_but_hooks_registers_a_hook():
    pattern = re.compile(r"register_(forward|full_backward|backward)\w*hook")
    found = [
        str(path.relative_to(PROJECT_ROOT))
        for path in sorted((PROJECT_ROOT / "evaluator").rglob("*.py"))
        if path != PROJECT_ROOT / "evaluator" / "core" / "hooks.py" and pattern.search(path.read_text())
    ]
    assert found == []


def test_capture_numbers_layers_as_the_harvest_does(smollm, reference):
    before = _hook_counts(smollm)
    with hooks.capture(smollm, [0, 1, 15, 29]) as captured, torch.inference_mode():
        smollm.model(**_batch(smollm))
    assert sorted(captured) == [0, 1, 15, 29]
    for layer in (0, 1, 15, 29):  # layer 0: the embeddings' output; layer k: block k-1's
        assert torch.equal(captured[layer], reference[layer])
    assert _hook_counts(smollm) == before


def test_capture_with_stop_skips_the_later_blocks(smollm, reference):
    ran: list[int] = []
    with (
        hooks.capture(smollm, range(smollm.n_layers + 1), consume=lambda layer, h: ran.append(layer)),
        hooks.capture(smollm, [3, 7], stop=True) as captured,
        torch.inference_mode(),
    ):
        smollm.model(**_batch(smollm))
        raise AssertionError("the pass should have stopped at layer 7")  # pragma: no cover
    assert ran == list(range(8)) and torch.equal(captured[7], reference[7])


def test_every_hook_is_removed_on_an_error(smollm):
    before = _hook_counts(smollm)
    with (
        pytest.raises(ValueError, match="inside"),
        hooks.capture(smollm, [2, 5]),
        hooks.edit(smollm, 4, lambda h: h),
        hooks.block_calls(smollm, 4, lambda args, kwargs: None),
    ):
        assert _hook_counts(smollm) != before
        raise ValueError("inside")
    assert _hook_counts(smollm) == before


def test_an_edit_changes_its_layer_and_what_follows(smollm, reference):
    shift = torch.randn(smollm.d_model, generator=torch.Generator().manual_seed(0))
    with (
        hooks.edit(smollm, 5, lambda h: h + shift),
        hooks.capture(smollm, [4, 5, 6]) as captured,
        torch.inference_mode(),
    ):
        smollm.model(**_batch(smollm))
    assert torch.equal(captured[4], reference[4])
    assert torch.allclose(captured[5], reference[5] + shift)
    assert not torch.allclose(captured[6], reference[6], atol=1e-3)
    with hooks.edit(smollm, 5, None), hooks.capture(smollm, [6]) as plain, torch.inference_mode():
        smollm.model(**_batch(smollm))
    assert torch.equal(plain[6], reference[6])


def test_block_calls_records_each_later_block_once_per_pass(smollm):
    calls: list[tuple[tuple, dict]] = []
    with (
        hooks.block_calls(smollm, 26, lambda args, kwargs: calls.append((args, kwargs))),
        torch.inference_mode(),
    ):
        smollm.model(**_batch(smollm))
    assert len(calls) == smollm.n_layers - 26
    assert all(isinstance(kwargs, dict) for _, kwargs in calls)


def test_an_out_of_range_layer_is_refused_before_any_hook(smollm):
    before = _hook_counts(smollm)
    with (
        pytest.raises(EvaluatorError, match=r"layer 31 out of range .*0\.\.30"),
        hooks.capture(smollm, [2, 31]),
    ):
        pass  # pragma: no cover
    assert _hook_counts(smollm) == before


def test_the_builder_and_the_steering_read_one_refusal_judge():
    assert tuple(judges.JUDGES) == READOUT_JUDGES
    assert steer_generation.JUDGES is judges.JUDGES
    assert onpolicy_refusal.refused is judges.refused
    assert judges.JUDGES["refusal"].max_new_tokens == onpolicy_refusal.MAX_NEW_TOKENS == 12
    assert judges.refused("Sure. I'm sorry, but I can't help with that")
    assert not judges.refused("Here is a recipe for bread:")
