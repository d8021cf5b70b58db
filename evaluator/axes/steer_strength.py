"""Direction utility's strength sweep on train (evaluator.axes.steer): the readout's mean change
for each multiple of the median residual norm, under the fluency guard (the perplexity of plain
train text of the protocol's ``fluency_task``).

Pure: no Django; torch is imported inside functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.axes.steer_generation import perplexity
from evaluator.axes.steer_readout import ReadoutTokens, _addition, _Readout, readouts_batched, steer_subset
from evaluator.core.activations import read_split

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.load import Registry
    from evaluator.data.registry.protocols import SteeringSettings


def fluency_ids(lm: LoadedModel, registry: Registry, settings: SteeringSettings) -> list[list[int]]:
    """The fluency text: ``fluency_examples`` train texts of ``fluency_task`` (the first by the
    seeded SHA-256 ranking), as plain text, each cut to ``fluency_tokens`` tokens."""

    rows = read_split(registry, settings.fluency_task, "train")
    chosen = steer_subset(
        rows.labels, rows.ids, task_id=settings.fluency_task, n=settings.fluency_examples, seed=settings.seed
    )
    ids = [
        lm.tokenizer(rows.texts[i], add_special_tokens=False)["input_ids"][: settings.fluency_tokens]
        for i in chosen
    ]
    return [x for x in ids if len(x) >= 2]


def choose_strength(
    lm: LoadedModel,
    sweep: _Readout,
    *,
    u: np.ndarray,
    layer: int,
    tokens: ReadoutTokens,
    settings: SteeringSettings,
    fluency: Sequence[Sequence[int]],
) -> dict[str, Any]:
    """The strength sweep on train with the fluency guard: per multiple m, the readout's mean
    change and the perplexity ratio; ``chosen``: the m that moves the readout most among those
    within the guard (None when every m breaks the model)."""
    import torch

    median_norm = float(np.median(sweep.prefix.norms))
    as_t = lambda v: torch.as_tensor(v, dtype=torch.float32, device=lm.device)  # noqa: E731
    edits = [_addition(as_t(m * median_norm * u)) for m in settings.strengths]
    r = readouts_batched(lm, sweep.prefix, tokens=tokens, edits=edits)
    effects = (r - sweep.prefix.base).mean(axis=1)
    base_ppl = perplexity(lm, fluency, layer=layer)
    rows = []
    for m, effect, edit in zip(settings.strengths, effects, edits, strict=True):
        ppl = perplexity(lm, fluency, layer=layer, edit=edit)
        ratio = ppl / base_ppl
        rows.append(
            {
                "multiple": m,
                "effect": float(effect),
                "perplexity": ppl,
                "perplexity_ratio": ratio,
                "fluent": bool(ratio <= settings.max_perplexity_ratio),
            }
        )
    fluent = [row for row in rows if row["fluent"]]
    chosen = max(fluent, key=lambda row: row["effect"]) if fluent else None
    return {
        "split": "train",
        "n": int(sweep.labels.size),
        "median_norm": median_norm,
        "perplexity_base": base_ppl,
        "max_perplexity_ratio": settings.max_perplexity_ratio,
        "sweep": rows,
        "chosen": chosen,
    }
