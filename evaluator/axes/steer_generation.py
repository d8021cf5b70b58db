"""Direction utility's full passes with an edit at the probe's layer (evaluator.axes.steer):
the perplexity of the fluency guard and the generated-text readout (unsteered, ablated and added,
beside random directions): greedy generation from evaluator.core.generate, judged by a judge of
evaluator.data.judges.

Pure: no Django; torch is imported inside functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.axes.steer_readout import _ablation, _addition, _output_embedding, _Readout
from evaluator.core import hooks
from evaluator.core.generate import greedy_continuations
from evaluator.core.hooks import Edit
from evaluator.data.judges import JUDGES

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.protocols import SteeringSettings
    from evaluator.data.registry.tasks import TaskSpec


def perplexity(
    lm: LoadedModel, ids: Sequence[Sequence[int]], *, layer: int, edit: Edit | None = None
) -> float:
    """exp of the mean next-token negative log-likelihood over the tokens of ``ids`` (one text
    at a time, no padding), with ``edit`` applied at ``layer``: the fluency guard."""
    import torch

    weight = _output_embedding(lm)
    total, count = 0.0, 0
    with lm.lock, torch.inference_mode(), hooks.edit(lm, layer, edit):
        for row in ids:
            x = torch.as_tensor([list(row)], device=lm.device)
            hidden = lm.model(input_ids=x, use_cache=False).last_hidden_state[0, :-1].float()
            logp = torch.log_softmax(hidden @ weight.float().T, dim=-1)
            total -= float(logp.gather(1, x[0, 1:].unsqueeze(1)).sum())
            count += x.shape[1] - 1
    return float(np.exp(total / max(count, 1)))


def generated_readout(
    lm: LoadedModel,
    readout: _Readout,
    task: TaskSpec,
    *,
    u: np.ndarray,
    alpha: float,
    layer: int,
    settings: SteeringSettings,
    randoms: np.ndarray,
) -> dict[str, Any] | None:
    """The judge of the generated text on ``generation_examples`` rows per class (the first of the
    test subset): the rate among label-1 rows unsteered and with the direction ablated, among
    label-0 rows unsteered and with it added at ``alpha``; the same interventions along the first
    ``generation_random`` random directions. None when the readout names no judge."""
    import torch

    spec = task.readout
    if spec is None or not spec.generated:
        return None
    judge = JUDGES[spec.generated]
    max_new = judge.max_new_tokens
    k = settings.generation_examples
    pos = [p for p, y in zip(readout.prompts, readout.labels, strict=True) if y == 1][:k]
    neg = [p for p, y in zip(readout.prompts, readout.labels, strict=True) if y == 0][:k]
    as_t = lambda v: torch.as_tensor(v, dtype=torch.float32, device=lm.device)  # noqa: E731

    def rate(prompts: list[str], edit: Edit | None) -> tuple[float, list[str]]:
        texts = greedy_continuations(lm, prompts, layer=layer, edit=edit, max_new_tokens=max_new)
        return float(np.mean([judge.judge(t) for t in texts])), texts

    base_pos, base_pos_texts = rate(pos, None)
    base_neg, _ = rate(neg, None)
    ablated, ablated_texts = rate(pos, _ablation(as_t(u)))
    added, added_texts = rate(neg, _addition(as_t(alpha * u)))
    random_ablated = [rate(pos, _ablation(as_t(d)))[0] for d in randoms]
    random_added = [rate(neg, _addition(as_t(alpha * d)))[0] for d in randoms]
    return {
        "judge": spec.generated,
        "max_new_tokens": max_new,
        "n_positive": len(pos),
        "n_negative": len(neg),
        "positive_rate": base_pos,
        "positive_rate_ablated": ablated,
        "random_ablated": random_ablated,
        "negative_rate": base_neg,
        "negative_rate_added": added,
        "random_added": random_added,
        "examples": {
            "unsteered": base_pos_texts[:3],
            "ablated": ablated_texts[:3],
            "added": added_texts[:3],
        },
    }
