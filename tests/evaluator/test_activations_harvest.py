"""The harvester returns the residual stream it claims to, however prompts are batched,
and the truncated forward pass gives the same vectors as the full one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evaluator.core.harvest import HarvestConfig, forward_until, harvest

pytestmark = pytest.mark.model

PROMPTS = [
    "The capital of France is Paris.",
    "Hi",
    "The capital of Peru is Lima, and this sentence goes on for quite a few more words than the others.",
    "Question: what is 2 + 2?\nAnswer: 4",
    "<|im_start|>user\nIs Rome the capital of Italy?<|im_end|>",
]
LAYERS = [0, 1, 8, 15, 29, 30]


def _close(a: np.ndarray, b: np.ndarray, rtol: float = 1e-4) -> bool:
    """Equal up to float32 reordering noise, relative to the vector's scale."""
    return bool(np.abs(a - b).max() <= rtol * max(1.0, float(np.abs(b).max())))


@pytest.fixture(scope="module")
def batched(smollm):
    return harvest(smollm, PROMPTS, layers=LAYERS, positions=["last_token", "mean"])


def test_batched_equals_one_by_one(smollm, batched):
    for i, prompt in enumerate(PROMPTS):
        alone = harvest(smollm, [prompt], layers=LAYERS, positions=["last_token", "mean"])
        for key, matrix in batched.items():
            assert _close(matrix[i], alone[key][0]), (key, prompt)


def test_tiny_batches_give_the_same_vectors_as_one_big_batch(smollm, batched):
    small = harvest(
        smollm,
        PROMPTS,
        layers=LAYERS,
        positions=["last_token", "mean"],
        config=HarvestConfig(batch_size=2, max_batch_tokens=64),
    )
    for key, matrix in batched.items():
        assert _close(small[key], matrix), key


def _full_forward(lm, prompt: str, block: int):
    """Reference: the whole model with output_hidden_states, plus our own hook on ``block``."""
    captured = {}
    handle = lm.blocks[block].register_forward_hook(lambda m, a, out: captured.setdefault("h", out))
    try:
        enc = lm.tokenizer([prompt], return_tensors="pt")
        with torch.inference_mode():
            out = lm.model(**enc, output_hidden_states=True)
    finally:
        handle.remove()
    hooked = captured["h"][0] if isinstance(captured["h"], tuple) else captured["h"]
    return out.hidden_states, hooked[0].float().numpy()


@pytest.mark.parametrize("layer", [1, 8, 15, 29])
def test_truncated_forward_equals_the_full_forward(smollm, batched, layer):
    for i, prompt in enumerate(PROMPTS[:3]):
        hidden_states, _ = _full_forward(smollm, prompt, layer - 1)
        assert _close(batched[(layer, "last_token")][i], hidden_states[layer][0, -1].float().numpy())


def test_every_layer_equals_a_forward_hook_on_its_block(smollm, batched):
    for layer in (1, 15, 30):
        for i, prompt in enumerate(PROMPTS[:3]):
            _, hooked = _full_forward(smollm, prompt, layer - 1)
            assert _close(batched[(layer, "last_token")][i], hooked[-1])
            assert _close(batched[(layer, "mean")][i], hooked.mean(axis=0))


def test_the_last_layer_is_the_raw_residual_not_the_final_norm(smollm, batched):
    hidden_states, _ = _full_forward(smollm, PROMPTS[0], 29)
    normed = hidden_states[-1][0, -1].float().numpy()  # transformers applies the final norm here
    assert not _close(batched[(30, "last_token")][0], normed, rtol=1e-2)


def test_layer_zero_is_the_embedding_output(smollm, batched):
    hidden_states, _ = _full_forward(smollm, PROMPTS[0], 0)
    assert _close(batched[(0, "last_token")][0], hidden_states[0][0, -1].float().numpy())


def test_blocks_after_the_deepest_layer_never_run(smollm):
    ran = []
    handles = [
        b.register_forward_pre_hook(lambda m, a, i=i: ran.append(i)) for i, b in enumerate(smollm.blocks)
    ]
    try:
        enc = smollm.tokenizer(["The capital of France is Paris."], return_tensors="pt")
        forward_until(smollm, dict(enc), [3, 7])
    finally:
        for h in handles:
            h.remove()
    assert ran == list(range(7))


def test_an_out_of_range_layer_is_refused(smollm):
    enc = smollm.tokenizer(["x"], return_tensors="pt")
    with pytest.raises(Exception, match=r"layer 31 out of range .*0\.\.30"):
        forward_until(smollm, dict(enc), [31])


def test_activations_are_float32_with_d_model_columns(batched):
    for matrix in batched.values():
        assert matrix.dtype == np.float32 and matrix.shape == (len(PROMPTS), 576)
        assert np.isfinite(matrix).all()


def test_encoder_mean_pooling_skips_cls_and_sep(minilm):
    prompt = "The capital of France is Paris."
    got = harvest(minilm, [prompt, "Hi"], layers=[6], positions=["mean"])[(6, "mean")][0]
    enc = minilm.tokenizer([prompt], return_tensors="pt")
    with torch.inference_mode():
        h = minilm.model(**enc, output_hidden_states=True).hidden_states[6][0].numpy()
    assert _close(got, h[1:-1].mean(axis=0))  # [CLS] first, [SEP] last
    assert not _close(got, h.mean(axis=0), rtol=1e-3)


def test_progress_is_reported_from_zero_to_one(smollm):
    seen = []
    harvest(
        smollm, PROMPTS, layers=[2], config=HarvestConfig(batch_size=2), progress=lambda f, s: seen.append(f)
    )
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen)
