"""Cross-model transfer, ρ_CE.

For each other base model (target), the probe's recipe is re-fit on the target's activations of
the recipe task's train split, at the same relative depth. On a fixed transfer subset of that
task's test split (``n_examples`` rows, balanced, chosen by hashing ids with a fixed seed), each
word j of each example x is removed in turn and the per-word ablation effect

    e(x, j) = s(x) − s(x with word j removed)

is measured on the source (submitted probe, source model) and on the target (re-fit probe,
target model). The result per target is the Pearson correlation over all (x, j). The caller
averages over targets and counts negative values as 0.

Words are maximal runs of non-whitespace; removing word j also removes the whitespace after it
(before it, for the last word), so the rest of the text keeps its layout. Examples with more than
``max_words`` words are ablated at ``max_words`` evenly spaced words.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from evaluator.core.activations import ActivationCache, prompt_activations, read_split
from evaluator.core.harvest import harvest, render_prompts
from evaluator.core.probes import probe_from_tensors
from evaluator.core.recipes import Recipe, map_layer, train_recipe, transfer_refusal
from evaluator.errors import EvaluatorError
from evaluator.metrics.metrics import pearson
from evaluator.metrics.results import Progress, fields_dict, no_progress, sub_progress

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.activations import SplitRows
    from evaluator.core.harvest import HarvestConfig
    from evaluator.core.models import LoadedModel
    from evaluator.core.probes import Probe
    from evaluator.data.registry.load import Registry
    from evaluator.data.registry.tasks import TaskSpec

log = logging.getLogger(__name__)


class TransferNotApplicable(EvaluatorError):
    """The probe's recipe cannot be re-fit on another base model (``recipes.NOT_TRANSFERABLE``)."""


TRANSFER_EXAMPLES = 16
TRANSFER_SEED = 0
MAX_WORDS = 24
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class TransferResult:
    source_model: str
    target_model: str
    source_layer: int
    target_layer: int
    task_id: str
    pearson: float  # over all (x, j); the caller clamps negatives to 0 and averages over targets
    n_examples: int
    n_pairs: int
    example_ids: list[str]
    refit_train_cache_key: str
    seed: int
    max_words: int
    seconds: float

    def to_dict(self) -> dict:
        return fields_dict(self)


def transfer_subset(
    rows: SplitRows, n_examples: int = TRANSFER_EXAMPLES, seed: int = TRANSFER_SEED
) -> list[int]:
    """Row indices of the transfer subset: half positives, half negatives (as far as they go),
    ranked by SHA-256 of (seed, task, id) so the choice never depends on a library's RNG."""

    def rank(i: int) -> str:
        return hashlib.sha256(f"{seed}:{rows.task_id}:{rows.ids[i]}".encode()).hexdigest()

    pos = sorted((i for i in range(len(rows.ids)) if rows.labels[i] == 1), key=rank)
    neg = sorted((i for i in range(len(rows.ids)) if rows.labels[i] == 0), key=rank)
    n_pos = min(len(pos), max(n_examples // 2, n_examples - len(neg)))
    chosen = pos[:n_pos] + neg[: n_examples - n_pos]
    return sorted(chosen)


def word_ablations(text: str, max_words: int = MAX_WORDS) -> list[tuple[int, str]]:
    """[(word index j, text without word j)] for up to ``max_words`` evenly spaced words."""
    spans = [m.span() for m in _WORD.finditer(text)]
    if len(spans) < 2:
        return []  # removing the only word leaves nothing to score
    chosen = np.unique(np.linspace(0, len(spans) - 1, min(max_words, len(spans))).round().astype(int))
    out = []
    for j in chosen:
        start, end = spans[j]
        if j + 1 < len(spans):
            end = spans[j + 1][0]  # drop the whitespace after the word
        else:
            start = spans[j - 1][1]  # last word: drop the whitespace before it
        out.append((int(j), text[:start] + text[end:]))
    return out


def ablation_effects(
    probe: Probe,
    lm: LoadedModel,
    task: TaskSpec,
    texts: Sequence[str],
    *,
    max_words: int = MAX_WORDS,
    config: HarvestConfig | None = None,
    progress: Progress | None = None,
    cache: ActivationCache | None = None,
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Effects e(x, j) "m" and their (example index, word index) pairs, for ``probe`` on ``lm``.

    ``cache``: the ablated prompts' activations are read from (or stored in) the activation
    cache, keyed by the prompts' content, at every layer (:func:`evaluator.core.activations.prompt_activations`):
    the transfer subset depends on the task only, so every transfer run of every probe of that
    task on ``lm`` shares one forward. Without a cache they are harvested at the probe's layer.
    """

    variants: list[str] = []
    pairs: list[tuple[int, int]] = []
    for x, text in enumerate(texts):
        for j, ablated in word_ablations(text, max_words):
            variants.append(ablated)
            pairs.append((x, j))
    all_texts = list(texts) + variants
    prompts = render_prompts(task, all_texts, probe.metadata.input)
    if cache is not None:
        acts, _, _ = prompt_activations(
            lm,
            prompts,
            layer=probe.layer,
            position=probe.metadata.position,
            cache=cache,
            config=config,
            progress=progress,
        )
    else:
        acts = harvest(
            lm,
            prompts,
            layers=[probe.layer],
            positions=[probe.metadata.position],
            config=config,
            progress=progress,
        )[(probe.layer, probe.metadata.position)]
    if probe.metadata.input == "contrast_pair":
        acts = acts[: len(all_texts)] - acts[len(all_texts) :]
    scores = probe.score(acts)
    original, ablated_scores = scores[: len(texts)], scores[len(texts) :]
    effects = np.array([original[x] for x, _ in pairs]) - ablated_scores
    return effects, pairs


def cross_model_transfer(
    probe: Probe,
    *,
    targets: Sequence[str],
    registry: Registry,
    cache_dir: str | Path,
    device: str | None = None,
    dtype: str | None = None,
    n_examples: int = TRANSFER_EXAMPLES,
    seed: int = TRANSFER_SEED,
    max_words: int = MAX_WORDS,
    config: HarvestConfig | None = None,
    progress: Progress | None = None,
    load: Callable[[str], LoadedModel] | None = None,
    share_activations: bool = True,
) -> list[TransferResult]:
    """One TransferResult per target model (≠ the probe's base model). Needs the probe's recipe.

    ``load(model_id)`` returns a loaded base model (a worker passes its own keeper of loaded
    models); by default :func:`evaluator.core.models.load_model` with ``device``/``dtype``.

    Every harvest goes through the activation cache under ``cache_dir``, which keeps every layer
    a first harvest reaches: the re-fit's train split and the word ablations of source and
    target are computed once per (model, task) and shared by the later transfer runs of any
    probe of that task, at any layer. ``share_activations=False``: the path before the sharing,
    kept to compare with (the ablations harvested at the probe's layer on every call, the train
    split cached at the re-fit's layer only); the numbers are the same.
    """
    # imported when called: tests replace evaluator.core.models.load_model (no model may load)
    from evaluator.core.models import load_model

    progress = progress or no_progress
    if load is None:

        def load(model_id: str) -> LoadedModel:
            return load_model(model_id, registry=registry, cache_dir=cache_dir, device=device, dtype=dtype)

    if probe.metadata.recipe is None:
        raise EvaluatorError("cross-model transfer needs the probe's recipe (none given)")
    recipe = Recipe.from_dict(probe.metadata.recipe, probe=probe.metadata, registry=registry)
    refusal = transfer_refusal(recipe.method)
    if refusal is not None:
        raise TransferNotApplicable(f"cross-model transfer does not apply to {recipe.method}: {refusal}")
    task = registry.task(recipe.task)
    # an on-policy recipe task re-fits on each target's own split (split_activations reads the
    # loaded model's files); a target without that behaviour (the encoder) is not a target
    targets = [t for t in targets if t != probe.base_model and task.measured_on(t)]
    cache = ActivationCache(cache_dir)
    shared = cache if share_activations else None
    rows = read_split(registry, recipe.task, "test", model=probe.base_model)
    chosen = transfer_subset(rows, n_examples, seed)
    texts = [rows.texts[i] for i in chosen]
    ids = [rows.ids[i] for i in chosen]
    steps = 1 + 2 * len(targets)

    source_lm = load(probe.base_model)
    source_effects, pairs = ablation_effects(
        probe,
        source_lm,
        task,
        texts,
        max_words=max_words,
        config=config,
        progress=sub_progress(progress, 0, 1 / steps, "transfer source "),
        cache=shared,
    )
    if len(pairs) < 2:
        raise EvaluatorError(f"transfer subset of {recipe.task} has fewer than 2 word ablations")
    results = []
    for t, target in enumerate(targets):
        start = time.perf_counter()
        target_lm = load(target)
        target_layer = map_layer(probe.layer, source_lm.n_layers, target_lm.n_layers)
        trained = train_recipe(
            recipe.at_layer(target_layer),
            target_lm,
            registry=registry,
            cache=cache,
            config=config,
            progress=sub_progress(
                progress, (1 + 2 * t) / steps, (2 + 2 * t) / steps, f"transfer {target} re-fit "
            ),
            all_layers=share_activations,
        )

        refit_meta = replace(
            probe.metadata,
            base_model=target,
            layer=target_layer,
            recipe=recipe.at_layer(target_layer).to_dict(),
        )
        refit = probe_from_tensors(
            trained.tensors, refit_meta, registry=registry, artifact_metadata=trained.artifact_metadata
        )
        target_effects, target_pairs = ablation_effects(
            refit,
            target_lm,
            task,
            texts,
            max_words=max_words,
            config=config,
            progress=sub_progress(progress, (2 + 2 * t) / steps, (3 + 2 * t) / steps, f"transfer {target} "),
            cache=shared,
        )
        assert target_pairs == pairs  # the ablations depend on the texts only
        rho = pearson(source_effects, target_effects)
        log.info("rho_ce %s -> %s: %.3f over %d (x, j)", probe.base_model, target, rho, len(pairs))
        results.append(
            TransferResult(
                source_model=probe.base_model,
                target_model=target,
                source_layer=probe.layer,
                target_layer=target_layer,
                task_id=recipe.task,
                pearson=rho,
                n_examples=len(texts),
                n_pairs=len(pairs),
                example_ids=ids,
                refit_train_cache_key=trained.train.cache_key,
                seed=seed,
                max_words=max_words,
                seconds=time.perf_counter() - start,
            )
        )
    progress(1.0, "transfer")
    return results


def rho_ce(results: Sequence[TransferResult]) -> float | None:
    """ρ_CE: the mean over targets of max(0, Pearson); None without targets."""
    if not results:
        return None
    return float(np.mean([max(0.0, r.pearson) for r in results]))
