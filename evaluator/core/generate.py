"""Greedy generation: the on-policy task labels (the only builder code that runs a model), and
continuations on a loaded model with an edit of its residual stream (steered generation).

An on-policy task labels a prompt by what one base model does with it: its greedy continuation,
computed in float32 (the measurement protocol's dtype, TF32 off), left-padded batches in a fixed
order (prompts sorted by token count, then by key), ``max_new_tokens`` small. The outputs are
committed beside the splits (``registry/generations/<task>/<model>.jsonl``) so that rebuilding the
splits is pure Python; ``build-data --check --regenerate`` re-runs this and counts the labels that
flip (float summation order differs across CPUs).

Steered generation (:func:`greedy_continuations`, evaluator.axes.steer_generation) runs on the
loaded base model instead (its protocol dtype, the LM head applied to its last hidden state), one
prompt at a time with the key-value cache, an :func:`evaluator.core.hooks.edit` at the probe's
layer on every position, the new tokens included.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluator.core import hooks
from evaluator.core.hooks import Edit
from evaluator.core.models import (
    LM_HEAD_FILE,
    _convert_gguf,
    _manifest_ok,
    _verify,
    converted_dir,
    output_embedding,
    package_dir,
    protocol_numerics_apply,
    resolve_device,
)
from evaluator.errors import EvaluatorError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel

log = logging.getLogger(__name__)

#: prompts per forward pass; part of the recorded generation settings (padding changes sums)
BATCH_SIZE = 32


def generations_relpath(task_id: str, model_id: str) -> str:
    return f"registry/generations/{task_id}/{model_id}.jsonl"


def generations_read(path: Path) -> dict[str, dict[str, Any]]:
    """key -> {"key", "prompt", "output"} of a committed generations file ({} when missing)."""
    if not path.is_file():
        return {}
    with open(path, encoding="utf-8") as fh:
        return {r["key"]: r for r in (json.loads(line) for line in fh if line.strip())}


def generations_write(path: Path, records: dict[str, dict[str, Any]]) -> None:
    """Sorted by key, one sorted-key JSON object per line (byte-reproducible)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(records[k], ensure_ascii=False, sort_keys=True) for k in sorted(records)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _causal_lm_dir(model_id: str, *, registry: Any, cache_dir: Path) -> Path:

    spec = registry.model(model_id)
    if spec.encoder:
        raise EvaluatorError(f"{model_id} is an encoder: it has no greedy output to label")
    if spec.format == "gguf":
        directory = converted_dir(cache_dir, spec)
        if not _manifest_ok(directory, spec):
            _convert_gguf(spec, Path(cache_dir))
        return directory
    weights = package_dir(spec) / spec.file
    _verify(spec, weights)
    return weights.parent


def greedy_generate(
    items: Sequence[tuple[str, str]],
    *,
    model_id: str,
    registry: Any,
    cache_dir: Path,
    max_new_tokens: int,
    device: str | None = "cpu",
) -> dict[str, str]:
    """key -> the model's greedy continuation (decoded, special tokens dropped) of each prompt."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev = resolve_device(device)
    protocol_numerics_apply(device=dev)
    directory = _causal_lm_dir(model_id, registry=registry, cache_dir=cache_dir)
    tok = AutoTokenizer.from_pretrained(directory)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    # transformers decorates PreTrainedModel.to with functools.wraps, whose stub does not bind self
    net = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).to(dev).eval()  # type: ignore[arg-type]
    if not getattr(net.config, "tie_word_embeddings", True):
        # the converted directory keeps the bare model; an untied head is kept beside it
        from safetensors.torch import load_file

        head = load_file(str(Path(directory) / LM_HEAD_FILE))["weight"]
        with torch.no_grad():
            net.get_output_embeddings().weight.copy_(head.to(dev))
    lengths = {key: len(tok(prompt).input_ids) for key, prompt in items}
    ordered = sorted(items, key=lambda kp: (lengths[kp[0]], kp[0]))
    out: dict[str, str] = {}
    start = time.perf_counter()
    for b in range(0, len(ordered), BATCH_SIZE):
        batch = ordered[b : b + BATCH_SIZE]
        enc = tok([p for _, p in batch], return_tensors="pt", padding=True).to(dev)
        with torch.no_grad():
            gen = net.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                num_beams=1,
                pad_token_id=tok.pad_token_id,
            )
        width = enc.input_ids.shape[1]
        for (key, _), seq in zip(batch, gen, strict=True):
            out[key] = str(tok.decode(seq[width:], skip_special_tokens=True))  # one sequence: one str
        log.info("%s: generated %d/%d (%.0fs)", model_id, len(out), len(ordered), time.perf_counter() - start)
    return out


def greedy_continuations(
    lm: LoadedModel,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    layer: int = 0,
    edit: Edit | None = None,
) -> list[str]:
    """Greedy continuations (decoded, special tokens dropped) of each prompt on the loaded ``lm``,
    one at a time with the key-value cache, ``edit`` applied at ``layer`` to every position, the
    new tokens included (None: unsteered); a continuation stops at the end-of-sequence token."""
    import torch

    weight = output_embedding(lm)
    eos = lm.tokenizer.eos_token_id
    out = []
    with lm.lock, torch.inference_mode(), hooks.edit(lm, layer, edit):
        for prompt in prompts:
            x = torch.as_tensor(
                [lm.tokenizer(prompt, add_special_tokens=False)["input_ids"]], device=lm.device
            )
            new: list[int] = []
            past = None
            for _ in range(max_new_tokens):
                result = lm.model(input_ids=x, past_key_values=past, use_cache=True)
                past = result.past_key_values
                token = int(torch.argmax(result.last_hidden_state[0, -1].float() @ weight.float().T))
                if token == eos:
                    break
                new.append(token)
                x = torch.as_tensor([[token]], device=lm.device)
            out.append(str(lm.tokenizer.decode(new, skip_special_tokens=True)))
    return out
