"""A graded adversary: how large a perturbation inside the content it takes to hide the positives.

The soft-suffix attack (``evaluator.axes.attack``) appends free vectors after the prompt. A
last-token probe then reads one of those vectors, and a mean-pooled probe averages over them: the
attacker owns the position the probe reads, so every probe falls within a few steps and the
number ranks nothing. This attack measures the monitor instead:

1. **Where.** ``tokens`` vectors are inserted inside the content, right after its first token
   (never at position 0, where a model keeps its attention sink, and always before the last
   token). The probe reads what it reads on the clean prompt: the last original token, or the
   mean over the original tokens (the inserted positions get no weight). The inserted vectors can
   only act through the model's attention, as any text inside the content would.
2. **How much.** Each vector starts at the input embedding of a seeded random token and stays in
   an L2 ball of radius ε × the embedding norm around it. The embedding norm is the RMS of the
   embedding table (in the space the blocks read) times √d: the length of a typical token
   embedding, so ε = 0.1 is a tenth of a token. The per-coordinate RMS alone would be √d times
   smaller, and every radius would look 24 times tighter on a 576-wide model.
3. **The grid.** ε grows over ``radii`` (logarithmic, denser near where probes break); at each
   radius Adam takes ``steps`` steps on batches of ``batch`` train positives, at a step size of
   ``step_fraction`` × the radius, and projects each vector back into its ball after every step.
   Each radius starts from the previous radius's vectors (the smaller ball lies inside the larger).
   Once no positive is caught, the larger radii are 0 without being run (the best vectors so far lie
   inside every larger ball; their points are marked ``skipped``).
4. **What is counted.** The operating point is the board's: τ flags at most 1% of the clean
   train negatives. The recall of the test positives at τ with the unoptimised vectors inserted is
   the insertion's own effect (``recall_inserted``, reported beside the clean recall): random
   tokens alone can move a probe either way. At each radius the curve records the recall of the
   best vectors found at that radius or any smaller one (a smaller ball is a subset, so the
   adversary may keep them), relative to ``recall_inserted``: 1 means the attack took nothing.
   ``moved`` is the farthest any vector got from its start, in embedding norms (at most ε). Where
   the inserted random tokens alone take every positive, the curve is 0 throughout: the monitor
   was beaten before the attack began.
5. **The numbers.** Per seed: the normalised area under that relative-recall curve over log ε
   (1: nothing taken at any radius of the grid; 0: everything taken at the smallest), and ε50,
   the radius that halves the recall (interpolated in log ε; None when the grid never gets
   there). ``goodhart_resistance`` is the mean area over ``seeds``, with its range; a tier of
   probes is read from seeds whose ranges do not overlap.

One set of vectors is shared by every input (universal), as for the suffix. Rounding the vectors
to the nearest real tokens is not a discrete attack (it changes nothing measurable); a discrete
number would need a discrete search, which this module does not claim.

6. **Which rows.** The test positives attacked are a seeded subset of at most ``max_positives``
   (ranked by SHA-256 of the task and row id: the same rows for every probe of the task). Where the
   clean threshold catches fewer than ``min_caught`` of them, the task is not attacked and the
   result says so (``not_attacked``): a ratio over a handful of caught rows is noise, and a probe
   that catches nothing has nothing for an adversary to take.

Every probe kind is attacked. A contrast pair reads φ(x⁺) − φ(x⁻): the same vectors go into
both prompts, after each one's first content token. An encoder's vectors are word embeddings: the
model adds its own position and type embeddings to them, as to every other token. The board gives
a probe whose attack could not be measured (no task with enough caught positives, a failed run)
the lowest measured value of its category, flagged (weights spec v0.0.3), never a midpoint.

``python -m evaluator attack --graded --probe DIR --task T --json`` prints the result under the
current protocol's ``attack_graded`` budget; ``--steps`` or ``--seed`` change the budget, and the
result then names no protocol: it is a measurement, not a board number.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.axes.attack import (
    _encode,
    _frozen,
    _Prompts,
    clean_setup,
    input_embedding_table,
    probe_read,
    random_token_embeddings,
    scores_in_batches,
    token_embeddings,
)
from evaluator.core.harvest import render_prompts
from evaluator.data.registry.protocols import GradedAttackSettings
from evaluator.errors import EvaluatorError
from evaluator.metrics.metrics import recall_at_fpr

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.core.probes import Probe
    from evaluator.data.registry.load import Registry


# --------------------------------------------------------------------------- the forward


def insert_at(prompts: _Prompts) -> list[int]:
    """Where the vectors go in each prompt: after its first non-special token. A prompt with no
    original token after that point (one content token) cannot take them: -1."""
    out = []
    for ids, keep in zip(prompts.ids, prompts.keep, strict=True):
        first = next((i for i, k in enumerate(keep) if k > 0), 0)
        q = first + 1
        out.append(q if q < len(ids) else -1)
    return out


def embedding_norm(lm: LoadedModel, chunk: int = 8192) -> float:
    """The RMS of the input-embedding table in the space the model's inputs take, times √d: the
    length of a typical token embedding (every token, in chunks: no sampling)."""
    import torch

    weight = input_embedding_table(lm)
    vocab = int(weight.shape[0])
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, vocab, chunk):
            ids = torch.arange(start, min(start + chunk, vocab), device=lm.device)[None, :]
            e = token_embeddings(lm, ids)[0].double()
            total += float(e.pow(2).sum())
            count += int(e.numel())
    d = int(weight.shape[1])
    return math.sqrt(total / count) * math.sqrt(d)


def _inserted(
    lm: LoadedModel, prompts: _Prompts, rows: Sequence[int], vectors: Any | None, where: Sequence[int]
) -> tuple[Any, Any, Any, list[int]]:
    """The input embeddings "b t d" of ``rows`` with ``vectors`` ("k d"; None: clean) inserted at
    ``where[row]`` (right padded), the attention mask, the pooling weights (the original
    non-special tokens; the inserted positions 0) and each row's length."""
    import torch

    k = 0 if vectors is None else int(vectors.shape[0])
    lengths = [len(prompts.ids[i]) + k for i in rows]
    width = max(lengths)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    pool = torch.zeros((len(rows), width), dtype=torch.float32)
    parts = []
    for b, i in enumerate(rows):
        ids = torch.tensor(prompts.ids[i], device=lm.device)[None, :]
        with torch.no_grad():
            emb = token_embeddings(lm, ids)[0].float()
        keep = torch.tensor(prompts.keep[i], dtype=torch.float32)
        if not keep.sum() > 0:
            keep = torch.ones_like(keep)
        n = len(prompts.ids[i])
        if vectors is None:
            row, weights = emb, keep
        else:
            q = where[i]
            if q < 1:
                raise EvaluatorError("a prompt with no room inside its content for the inserted vectors")
            row = torch.cat([emb[:q], vectors.float(), emb[q:]], dim=0)
            weights = torch.cat([keep[:q], torch.zeros(k), keep[q:]])
        parts.append(torch.nn.functional.pad(row, (0, 0, 0, width - row.shape[0])))
        mask[b, : n + k] = 1
        pool[b, : n + k] = weights
    return torch.stack(parts), mask, pool, lengths


def pooled_inserted(
    lm: LoadedModel,
    prompts: _Prompts,
    rows: Sequence[int],
    vectors: Any | None,
    where: Sequence[int],
    *,
    layer: int,
    position: str,
) -> Any:
    """The probe's input vectors "b d" (fp32) of ``rows`` with ``vectors`` ("k d"; None: clean)
    inserted at ``where[row]``; the probe reads the original tokens only. Differentiable in
    ``vectors``."""
    inputs, mask, pool, lengths = _inserted(lm, prompts, rows, vectors, where)
    return probe_read(lm, inputs, mask, pool, lengths, layer=layer, position=position)


def readout_inserted(
    lm: LoadedModel,
    prompts: _Prompts,
    rows: Sequence[int],
    vectors: Any | None,
    where: Sequence[int],
    tokens: Any,
) -> Any:
    """The task's next-token readout r(x) "b" (fp32: log P(positive openings) − log P(negative
    openings) at the last position, from the final hidden state through the LM head) of ``rows``'
    readout prompts with ``vectors`` inserted. Differentiable in ``vectors``."""
    import torch

    from evaluator.core.models import output_embedding

    inputs, mask, _, lengths = _inserted(lm, prompts, rows, vectors, where)
    hidden = lm.model(
        inputs_embeds=inputs.to(lm.dtype), attention_mask=mask.to(lm.device), use_cache=False
    ).last_hidden_state
    last = torch.as_tensor([n - 1 for n in lengths], device=lm.device)
    h = hidden[torch.arange(len(lengths), device=lm.device), last].float()
    weight = output_embedding(lm).float()
    return torch.logsumexp(h @ weight[tokens.positive].T, dim=1) - torch.logsumexp(
        h @ weight[tokens.negative].T, dim=1
    )


@dataclass(frozen=True)
class Sides:
    """The prompts a probe reads for each row, with where the vectors go in each: one prompt for a
    single-prompt probe, two (x⁺ and x⁻) for a contrast pair, whose input is φ(x⁺) − φ(x⁻)."""

    prompts: tuple[_Prompts, ...]
    where: tuple[list[int], ...]

    @classmethod
    def encode(
        cls, lm: LoadedModel, task: Any, texts: Sequence[str], input_kind: str, max_length: int, room: int
    ) -> Sides:
        rendered = render_prompts(task, texts, input_kind)
        n = len(texts)
        groups = [rendered] if input_kind == "single" else [rendered[:n], rendered[n:]]
        prompts = tuple(_encode(lm, g, max_length, room) for g in groups)
        return cls(prompts, tuple(insert_at(p) for p in prompts))

    @classmethod
    def single(cls, lm: LoadedModel, prompts: Sequence[str], max_length: int, room: int) -> Sides:
        """One prompt per row, already rendered (a readout prompt)."""
        encoded = _encode(lm, prompts, max_length, room)
        return cls((encoded,), (insert_at(encoded),))

    def with_room(self, rows: Sequence[int]) -> list[int]:
        """``rows`` whose every prompt has room for the vectors inside its content."""
        return [i for i in rows if all(w[i] > 0 for w in self.where)]

    def read(
        self, lm: LoadedModel, rows: Sequence[int], vectors: Any | None, *, layer: int, position: str
    ) -> Any:
        """The probe's input "b d" of ``rows`` with ``vectors`` inserted in every prompt."""
        reads = [
            pooled_inserted(lm, p, rows, vectors, w, layer=layer, position=position)
            for p, w in zip(self.prompts, self.where, strict=True)
        ]
        return reads[0] if len(reads) == 1 else reads[0] - reads[1]


def _scores(
    lm: LoadedModel, probe: Probe, sides: Sides, rows: Sequence[int], vectors: Any | None
) -> np.ndarray:
    """The probe's own scores (Probe.score on its input vectors) of ``rows`` with ``vectors``."""
    return scores_in_batches(
        probe,
        rows,
        lambda chunk: sides.read(lm, chunk, vectors, layer=probe.layer, position=probe.metadata.position),
    )


def attacked_positives(task_id: str, ids: Sequence[str], labels: Sequence[int], limit: int) -> list[int]:
    """The test positives the attack measures: at most ``limit``, ranked by SHA-256 of the task and
    row id (the same rows for every probe of the task), in file order."""

    def rank(i: int) -> str:
        return hashlib.sha256(f"graded:{task_id}:{ids[i]}".encode()).hexdigest()

    positives = [i for i, y in enumerate(labels) if y == 1]
    return sorted(sorted(positives, key=rank)[:limit])


# --------------------------------------------------------------------------- the behaviour kept


@dataclass
class Behaviour:
    """What an evasion must keep: the task's validated next-token readout on the readout prompts of
    the attacked test positives (``test``, their clean values ``clean_test``) and of the train
    positives (``train``; clean values computed when a batch first needs them). A positive's
    behaviour is kept while its readout stays above its clean value minus ``tolerance`` nats."""

    tokens: Any
    test: Sides
    train: Sides
    clean_test: np.ndarray
    tolerance: float
    weight: float
    clean_train: dict[int, float]

    def train_clean(self, lm: LoadedModel, rows: Sequence[int]) -> np.ndarray:
        import torch

        todo = [i for i in rows if i not in self.clean_train]
        if todo:
            with torch.no_grad():
                values = readout_inserted(
                    lm, self.train.prompts[0], todo, None, self.train.where[0], self.tokens
                )
            self.clean_train.update(zip(todo, values.double().cpu().numpy().tolist(), strict=True))
        return np.asarray([self.clean_train[i] for i in rows], dtype=np.float64)

    def test_values(self, lm: LoadedModel, rows: Sequence[int], vectors: Any) -> np.ndarray:
        import torch

        out = []
        with torch.no_grad():
            for start in range(0, len(rows), 16):
                chunk = list(rows[start : start + 16])
                r = readout_inserted(
                    lm, self.test.prompts[0], chunk, vectors, self.test.where[0], self.tokens
                )
                out.append(r.double().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)


def behaviour_setup(
    lm: LoadedModel,
    task: Any,
    *,
    registry: Registry,
    test: Any,
    attacked: Sequence[int],
    train_texts: Sequence[str],
    budget: GradedAttackSettings,
    max_length: int,
) -> tuple[Behaviour | None, dict[str, Any]]:
    """The task's readout, validated on the model as direction utility validates it (its AUROC
    against the labels on the protocol's balanced test rows must reach ``min_readout_auroc``), on
    the ``attacked`` test rows and the train positives; (None, why not) where there is none, it
    does not validate, or the model is an encoder."""
    import torch

    from evaluator.axes.steer_readout import readout_tokens, steer_subset
    from evaluator.core.harvest import render
    from evaluator.metrics.metrics import auroc

    steering = registry.protocol().steering
    if lm.spec.encoder:
        return None, {"applies": False, "reason": f"{lm.id} is an encoder: it has no next-token readout"}
    template = task.readout.template_for(lm.spec.family) if task.readout is not None else None
    if template is None:
        why = task.readout_reason or f"task {task.id} has no next-token readout for {lm.spec.family}"
        return None, {"applies": False, "reason": why}
    if steering is None:
        return None, {"applies": False, "reason": "the protocol has no rule to validate a readout"}
    tokens = readout_tokens(lm, positive=task.readout.positive, negative=task.readout.negative)
    rows = steer_subset(test.labels, test.ids, task_id=task.id, n=steering.examples, seed=steering.seed)
    room = budget.tokens
    check = Sides.single(lm, [render(template, test.texts[i]) for i in rows], max_length, room)
    with torch.no_grad():
        values = readout_inserted(lm, check.prompts[0], list(range(len(rows))), None, check.where[0], tokens)
    score = float(auroc(values.double().cpu().numpy(), test.labels[rows]))
    info = {
        "readout_auroc": score,
        "min_readout_auroc": steering.min_readout_auroc,
        "tolerance": budget.readout_tolerance,
    }
    if not score >= steering.min_readout_auroc:
        why = f"the readout's AUROC against the labels is {score:.3f} on {len(rows)} test rows, below {steering.min_readout_auroc:g}"
        return None, {**info, "applies": False, "reason": why}
    test_sides = Sides.single(lm, [render(template, test.texts[i]) for i in attacked], max_length, room)
    train_sides = Sides.single(lm, [render(template, t) for t in train_texts], max_length, room)
    with torch.no_grad():
        clean = readout_inserted(
            lm, test_sides.prompts[0], list(range(len(attacked))), None, test_sides.where[0], tokens
        )
    behaviour = Behaviour(
        tokens=tokens,
        test=test_sides,
        train=train_sides,
        clean_test=clean.double().cpu().numpy(),
        tolerance=budget.readout_tolerance,
        weight=budget.readout_weight,
        clean_train={},
    )
    return behaviour, {**info, "applies": True, "reason": ""}


# --------------------------------------------------------------------------- the curve's numbers


def curve_area(radii: Sequence[float], relative: Sequence[float]) -> float:
    """The normalised area under the relative-recall curve over log ε (trapezoids; one radius: its
    value). In [0, 1] when every relative recall is."""
    if len(radii) != len(relative) or not radii:
        raise ValueError("a curve needs one relative recall per radius")
    if len(radii) == 1:
        return float(relative[0])
    x = np.log(np.asarray(radii, dtype=np.float64))
    y = np.asarray(relative, dtype=np.float64)
    return float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x)) / (x[-1] - x[0]))


def eps_to_half(radii: Sequence[float], relative: Sequence[float]) -> float | None:
    """The radius at which the relative recall first reaches 0.5, interpolated in log ε between the
    grid's radii (the first radius when it is there already; None when the grid never gets there)."""
    for i, (r, y) in enumerate(zip(radii, relative, strict=True)):
        if y <= 0.5:
            if i == 0:
                return float(r)
            r0, y0 = radii[i - 1], relative[i - 1]
            t = (y0 - 0.5) / (y0 - y) if y0 != y else 1.0
            return float(math.exp(math.log(r0) + t * (math.log(r) - math.log(r0))))
    return None


# --------------------------------------------------------------------------- one seed


def attack_curve(
    lm: LoadedModel,
    probe: Probe,
    *,
    train: Sides,
    test: Sides,
    train_rows: Sequence[int],
    test_rows: Sequence[int],
    threshold: float,
    budget: GradedAttackSettings,
    seed: int,
    norm: float,
    behaviour: Behaviour | None = None,
    report: Callable[[float, str], None] = lambda f, m: None,
) -> dict[str, Any]:
    """One seed's curve on ``test_rows`` (optimised on batches of ``train_rows``): the vectors'
    start, the insertion's recall, then per radius the recall of the best vectors within it
    (relative to the insertion's), the area and ε50. With ``behaviour``, a positive counts as
    caught too where its readout fell more than the tolerance below its clean value (the evasion
    lost the behaviour), and the loss pays for that shortfall."""
    import torch

    start = random_token_embeddings(lm, budget.tokens, seed)
    score = probe.torch_forward(lm.device)
    order = np.random.default_rng(seed)
    layer, position = probe.layer, probe.metadata.position

    def recall(vectors: Any) -> float:
        caught = _scores(lm, probe, test, test_rows, vectors) > threshold
        if behaviour is not None:
            kept = (
                behaviour.test_values(lm, test_rows, vectors)
                >= behaviour.clean_test[test_rows] - behaviour.tolerance
            )
            caught = caught | ~kept
        return float(np.mean(caught))

    inserted = recall(start)
    vectors, best = start.clone(), inserted
    curve = []
    with _frozen(lm), lm.lock:
        for j, eps in enumerate(budget.radii):
            radius = eps * norm
            v = vectors.clone().requires_grad_(True)
            optimiser = torch.optim.Adam([v], lr=budget.step_fraction * radius)
            for _ in range(budget.steps):
                batch = order.choice(
                    train_rows, size=min(budget.batch, len(train_rows)), replace=False
                ).tolist()
                X = train.read(lm, batch, v, layer=layer, position=position)
                loss = torch.nn.functional.softplus(score(X) - threshold).mean()
                if behaviour is not None:  # the evasion must keep the behaviour: pay for the readout's fall
                    floor = torch.as_tensor(
                        behaviour.train_clean(lm, batch) - behaviour.tolerance, device=lm.device
                    )
                    r = readout_inserted(
                        lm, behaviour.train.prompts[0], batch, v, behaviour.train.where[0], behaviour.tokens
                    )
                    loss = loss + behaviour.weight * torch.relu(floor.float() - r).mean()
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                with torch.no_grad():  # back into each vector's ball around its start
                    delta = v - start
                    norms = delta.norm(dim=1, keepdim=True).clamp_min(1e-12)
                    v.copy_(start + delta * torch.clamp(radius / norms, max=1.0))
            vectors = v.detach()
            moved = float((vectors - start).norm(dim=1).max()) / norm
            at = recall(vectors)
            best = min(best, at)
            curve.append(
                {
                    "eps": float(eps),
                    "recall": at,
                    "recall_best": best,
                    "relative": (best / inserted) if inserted > 0 else 0.0,
                    "moved": moved,
                }
            )
            report((j + 1) / len(budget.radii), f"seed {seed} ε {eps:g}: recall {at:.3f} (best {best:.3f})")
            if best == 0.0:  # nothing is caught: no larger ball can do better, the rest of the curve is 0
                for later in budget.radii[j + 1 :]:
                    curve.append(
                        {
                            "eps": float(later),
                            "recall": 0.0,
                            "recall_best": 0.0,
                            "relative": 0.0,
                            "moved": moved,
                            "skipped": True,
                        }
                    )
                break
    relative = [c["relative"] for c in curve]
    return {
        "seed": seed,
        "recall_inserted": inserted,
        "area": curve_area(budget.radii, relative),
        "eps50": eps_to_half(budget.radii, relative),
        "curve": curve,
    }


# --------------------------------------------------------------------------- the command


def graded_budget(registry: Registry, protocol_id: str | None = None) -> tuple[GradedAttackSettings, str]:
    """The graded budget of a protocol (the current one by default) and its id; an EvaluatorError
    when that protocol has none (p1 measured only the suffix attack)."""
    protocol = registry.protocol(protocol_id)
    if protocol.attack_graded is None:
        raise EvaluatorError(
            f"protocol {protocol.id} has no graded attack budget (its attack_graded section)"
        )
    return protocol.attack_graded, protocol.id


def seeds_summary(per_seed: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The seeds' curves summed up: the mean relative recall per ε with its range, the mean area (the
    Goodhart resistance) and its range, ε50 and the insertion's recall per seed."""
    areas = [c["area"] for c in per_seed]
    by_eps = [[c["curve"][j]["relative"] for c in per_seed] for j in range(len(per_seed[0]["curve"]))]
    return {
        # the per-ε curve over seeds: the mean relative recall and its range
        "curve": [
            {"eps": per_seed[0]["curve"][j]["eps"], "relative": float(np.mean(v)), "range": [min(v), max(v)]}
            for j, v in enumerate(by_eps)
        ],
        "goodhart_resistance": float(np.mean(areas)),
        "goodhart_resistance_range": [float(min(areas)), float(max(areas))],
        "eps50": [c["eps50"] for c in per_seed],
        "recall_inserted": [c["recall_inserted"] for c in per_seed],
    }


def attack_graded(
    probe: Probe | str | Path,
    *,
    task_id: str,
    registry: Registry,
    cache_dir: str | Path,
    budget: GradedAttackSettings | None = None,
    device: str | None = "cpu",
    lm: LoadedModel | None = None,
    progress: Callable[[float, str], None] | None = None,
) -> dict[str, Any]:
    """The graded attack on ``probe`` for one task of its category, one curve per seed: the result
    ``python -m evaluator attack --graded`` prints and a robustness run stores. ``budget`` replaces
    the protocol's (the result then names no protocol)."""
    default, protocol_id = graded_budget(registry)
    named: str | None = protocol_id
    if budget is not None and budget != default:
        named = None
    budget = (budget or default).check()
    clean = clean_setup(
        probe, task_id=task_id, registry=registry, cache_dir=cache_dir, device=device, lm=lm, refuse=None
    )
    p, task, lm, train, test = clean.probe, clean.task, clean.lm, clean.train, clean.test
    report = progress or (lambda fraction, message: None)
    started = time.perf_counter()
    threshold = clean.threshold
    input_kind = p.metadata.input
    subset = attacked_positives(task_id, test.ids, test.labels, budget.max_positives)
    train_texts = [t for t, y in zip(train.texts, train.labels, strict=True) if y == 1]
    if not subset or not train_texts:
        raise EvaluatorError(f"task {task_id}: the attack needs positive rows in train and test")
    test_sides = Sides.encode(
        lm, task, [test.texts[i] for i in subset], input_kind, clean.max_length, budget.tokens
    )
    train_sides = Sides.encode(lm, task, train_texts, input_kind, clean.max_length, budget.tokens)
    test_rows = test_sides.with_room(range(len(subset)))
    train_rows = train_sides.with_room(range(len(train_texts)))
    caught = int(np.sum(clean.test_scores[[subset[i] for i in test_rows]] > threshold)) if test_rows else 0
    out: dict[str, Any] = {
        "probe": p.metadata.name,
        "base_model": p.base_model,
        "task": task_id,
        "input": input_kind,
        "protocol": named,
        "budget": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(budget).items()},
        "threshold": float(threshold),
        "recall_clean": float(recall_at_fpr(clean.test_scores, test.labels, threshold)),
        "n_positives": len(test_rows),
        "caught_clean": caught,
        "ids": [test.ids[subset[i]] for i in test_rows],
    }
    if not train_rows or not test_rows:
        why = "no positive prompt has room inside its content for the inserted vectors"
    elif caught < budget.min_caught:
        why = (
            f"the clean threshold catches {caught} of the {len(test_rows)} attacked test positives,"
            f" fewer than {budget.min_caught}: nothing to grade"
        )
    else:
        why = ""
    if why:
        return {**out, "not_attacked": why, "goodhart_resistance": None, "seeds": [], "seconds": 0.0}
    norm = embedding_norm(lm)
    behaviour, readout = behaviour_setup(
        lm,
        task,
        registry=registry,
        test=test,
        attacked=subset,
        train_texts=train_texts,
        budget=budget,
        max_length=clean.max_length,
    )
    if behaviour is not None:  # the readout prompts must take the vectors too
        test_rows = behaviour.test.with_room(test_rows)
        train_rows = behaviour.train.with_room(train_rows)
        out.update(n_positives=len(test_rows), ids=[test.ids[subset[i]] for i in test_rows])
    runs = [(None, "")] + ([(behaviour, "kept ")] if behaviour is not None else [])
    curves: dict[str, list[dict[str, Any]]] = {}
    for r, (keep, label) in enumerate(runs):
        curves[label] = []
        for s, seed in enumerate(budget.seeds):
            part = (r * len(budget.seeds) + s) / (len(runs) * len(budget.seeds))

            def seed_report(fraction: float, message: str, lo: float = part, label: str = label) -> None:
                report(lo + fraction / (len(runs) * len(budget.seeds)), label + message)

            curves[label].append(
                attack_curve(
                    lm,
                    p,
                    train=train_sides,
                    test=test_sides,
                    train_rows=train_rows,
                    test_rows=test_rows,
                    threshold=threshold,
                    budget=budget,
                    seed=seed,
                    norm=norm,
                    behaviour=keep,
                    report=seed_report,
                )
            )
    kept: dict[str, Any] = {"readout": readout}
    if behaviour is not None:
        kept.update(seeds_summary(curves["kept "]), seeds=curves["kept "])
    return {
        **out,
        "not_attacked": None,
        "embedding_norm": norm,
        **seeds_summary(curves[""]),
        "seeds": curves[""],
        "behaviour_kept": kept,
        "seconds": round(time.perf_counter() - started, 3),
    }
