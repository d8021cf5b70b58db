"""The panel of text-only baselines of one task (and, for an on-policy task, one base model).

A probe reads a model's activations; these baselines read only the row's ``text`` (what the
labeller's rows hold; with the task's ``single`` template, which is ``{text}`` for every on-policy
task, that is exactly the prompt the probes' model reads: the model's own answer is not in it).
Each member is fit on the train split alone, its hyperparameters chosen by stratified K-fold
cross-validation on train (``CV_FOLDS`` folds, rows of one ``group`` kept in one fold, fixed
``PANEL_SEED``; the mean of the folds' AUROCs decides, ties go to the earlier grid point, which is
the more regularised). Test and distshift rows are only scored, never looked at to choose anything.

Members (``MEMBERS``, in report order):

- ``length``: characters and words, log-scaled, logistic regression.
- ``word_tfidf``: word 1–2-gram TF-IDF, every token kept (no minimum count, single characters too).
- ``char_tfidf``: character 2–5-gram TF-IDF within word boundaries (``char_wb``).
- ``minilm``: the registry's sentence encoder (all-minilm-l6-v2) on the rendered prompt, mean-pooled
  last layer, scaled to unit length as the encoder is meant to be read, logistic regression (only
  when an embedding function is given).
- ``structured``: the features the task card declares (``structured_baseline`` in tasks.yaml),
  read from the text by a pattern or from a fact about the input the row records (the true country
  of the city a prompt names: what a reader with the source's gazetteer knows without the model):
  numeric ones standardised and expanded to polynomials of degree 1–3 (degree chosen by CV),
  categorical ones one-hot (a value not seen in train reads as all zeros), logistic regression.
  Absent when the card declares none.
- ``entity_embed``: the entities a row names (``structured_baseline.entities`` in tasks.yaml: a city,
  the country a statement gives it, each read by a pattern's group or a meta field like a feature),
  each embedded alone by the same encoder as ``minilm`` (through the same ``embed``), scaled to unit
  length; then for each pair their elementwise product and absolute difference (each block scaled to
  unit length), all concatenated; logistic regression. The product term is what lets a linear model
  read "does this city go with this country"; neither embedding alone says it. Absent when the card
  declares no entities or there is no encoder.
- ``structured_gbm``: gradient-boosted trees (scikit-learn's HistGradientBoostingClassifier, fixed
  ``random_state``, one thread) over the declared features (numeric raw, so the trees can find e.g.
  a carry in addition; categorical as native categories, a value seen fewer than ``GBM_MIN_COUNT``
  times in train read as missing) and, with entities and an encoder, the cosine similarity of each
  pair of entity embeddings (two premises naming the same country, say). ``max_depth`` ×
  ``learning_rate`` × ``max_iter`` from ``GBM_DEPTHS`` × ``GBM_RATES`` × ``GBM_ITERS`` by the same
  CV. Absent when the card declares neither features nor (with an encoder) entities.
- ``stack``: a logistic regression over the other members' decision values, fit on their
  out-of-fold values on train (``fit_stack``); the panel's way of letting two weak text signals
  (say, the words and the embedding) add up rather than making the baseline the better of them.

Every member but ``structured_gbm`` is an L2 logistic regression with C from ``C_GRID``. The *strongest* member on a split
is the one with the highest AUROC on that split's rows: the bar a probe must clear (choosing it on
those rows favours the text side, so a lift over it is conservative; see
:mod:`evaluator.axes.text_baselines`). The member cross-validation on train picks (``by_cv``) is
reported beside it.
Pure: numpy and scikit-learn; the encoder is reached through an ``embed`` callable.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluator.axes.text_members import (
    PANEL_SEED,
    StructuredGBM,
    StructuredModel,
    char_model,
    dense_model,
    embedding_model,
    entity_model,
    entity_pair_cosines,
    length_model,
    word_model,
)
from evaluator.core.activations import ActivationCache, prompt_activations, read_split
from evaluator.core.harvest import render_prompts
from evaluator.data.registry.tasks import StructuredEntity, StructuredFeature
from evaluator.errors import EvaluatorError
from evaluator.metrics.metrics import auroc, auroc_ci

CV_FOLDS = 5
#: half-decade steps from strong to weak regularisation (a coarser grid missed the best text model
#: on some files by more than the gap a probe is judged on)
C_GRID: tuple[float, ...] = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
STRUCTURED_DEGREES: tuple[int, ...] = (1, 2, 3)
MEMBERS: tuple[str, ...] = (
    "length",
    "word_tfidf",
    "char_tfidf",
    "minilm",
    "structured",
    "entity_embed",
    "structured_gbm",
    "stack",
)
#: the ``structured_gbm`` member's grid (every combination), fit with a fixed random_state
GBM_DEPTHS: tuple[int, ...] = (2, 3, 5)
GBM_RATES: tuple[float, ...] = (0.03, 0.1)
GBM_ITERS: tuple[int, ...] = (100, 300)
#: the member that combines the others (``fit_stack``)
STACK = "stack"
#: the encoder of the ``minilm`` member (registry/models.yaml)
ENCODER_ID = "all-minilm-l6-v2"

Embed = Callable[[Sequence[str]], np.ndarray]
#: decimals an AUROC keeps in a committed panel file (evaluator.axes.text_baselines)
AUROC_DECIMALS = 4


def best_member(values: Mapping[str, float]) -> str | None:
    """The member with the highest value at the file's precision (AUROC_DECIMALS); equals go to
    the first by name. One rule for the CLI's panel and the board's reading of the committed file."""
    if not values:
        return None
    return min(values, key=lambda name: (-round(values[name], AUROC_DECIMALS), name))


@dataclass(frozen=True)
class PanelRows:
    """The rows of one split as the panel reads them."""

    ids: list[str]
    texts: list[str]
    labels: np.ndarray  # "n" int64
    groups: list[str]
    #: each row's ``meta`` (what a ``field`` structured feature reads); empty: no row has any
    meta: list[dict] = field(default_factory=list)

    def meta_of(self, i: int) -> dict:
        return self.meta[i] if self.meta else {}


@dataclass(frozen=True)
class SplitScores:
    ids: list[str]
    scores: list[float]  # the member's decision value per row (higher: more likely positive)
    auroc: float
    ci: tuple[float, float]  # percentile bootstrap, evaluator.metrics.metrics.auroc_ci


@dataclass(frozen=True)
class MemberResult:
    name: str
    params: dict[str, Any]
    cv_auroc: float  # mean over the train folds, at ``params``
    cv_grid: list[dict[str, Any]]  # every grid point: {"params", "cv_auroc"}
    splits: dict[str, SplitScores]
    #: out-of-fold decision values on train at ``params`` (what the ``stack`` member is fit on)
    oof: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    def to_dict(self, split: str, *, scores: bool = False) -> dict[str, Any]:
        s = self.splits[split]
        out: dict[str, Any] = {
            "auroc": round(s.auroc, AUROC_DECIMALS),
            "ci": [round(s.ci[0], AUROC_DECIMALS), round(s.ci[1], AUROC_DECIMALS)],
            "cv_auroc": round(self.cv_auroc, AUROC_DECIMALS),
            "params": dict(self.params),
            "n": len(s.ids),
        }
        if scores:
            out["scores"] = dict(zip(s.ids, s.scores, strict=True))
        return out


@dataclass(frozen=True)
class PanelResult:
    members: dict[str, MemberResult]
    by_cv: str  # the member with the highest cross-validated AUROC on train
    folds: int = CV_FOLDS
    seed: int = PANEL_SEED
    notes: list[str] = field(default_factory=list)

    def strongest(self, split: str = "test") -> str:
        """The member with the highest AUROC on ``split`` (:func:`best_member`, as the committed
        file is read)."""
        found = best_member({n: m.splits[split].auroc for n, m in self.members.items()})
        assert found is not None  # a panel has members
        return found

    def to_dict(self, split: str = "test", *, scores: bool = False) -> dict[str, Any]:
        def brief(name: str) -> dict[str, Any]:
            m = self.members[name]
            return {
                "name": name,
                "auroc": round(m.splits[split].auroc, AUROC_DECIMALS),
                "ci": [
                    round(m.splits[split].ci[0], AUROC_DECIMALS),
                    round(m.splits[split].ci[1], AUROC_DECIMALS),
                ],
                "cv_auroc": round(m.cv_auroc, AUROC_DECIMALS),
            }

        return {
            "split": split,
            "baselines": {name: m.to_dict(split, scores=scores) for name, m in self.members.items()},
            "strongest": brief(self.strongest(split))
            | {"chosen_by": f"highest AUROC on {split} among members each tuned by CV on train"},
            "by_cv": brief(self.by_cv)
            | {"chosen_by": f"highest {self.folds}-fold cross-validated AUROC on train"},
            "cv": {"folds": self.folds, "seed": self.seed, "C_grid": list(C_GRID)},
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------- members


@dataclass(frozen=True)
class Member:
    """One panel member: a grid of hyperparameters and a model built from one grid point. The
    model reads ``inputs(rows)`` (the texts themselves, their embeddings, or texts with meta)."""

    name: str
    grid: list[dict[str, Any]]
    build: Callable[[dict[str, Any]], Any]
    inputs: Callable[[PanelRows], Any] = lambda rows: np.array(rows.texts, dtype=object)


def _text_and_meta(rows: PanelRows) -> np.ndarray:
    """(text, meta) per row, as a 1-d object array (indexable by the CV folds)."""
    out = np.empty(len(rows.texts), dtype=object)
    for i, text in enumerate(rows.texts):
        out[i] = (str(text), rows.meta_of(i))
    return out


def _c_grid() -> list[dict[str, Any]]:
    return [{"C": c} for c in C_GRID]


def panel_members(
    structured: Sequence[StructuredFeature] = (),
    *,
    embed: Embed | None = None,
    entities: Sequence[StructuredEntity] = (),
) -> list[Member]:
    """The panel's members in ``MEMBERS`` order: ``minilm`` only with ``embed``, ``structured`` only
    when features are declared, ``entity_embed`` only when entities are declared and ``embed`` is
    given, ``structured_gbm`` when either the features or (with ``embed``) the entities are."""
    members = [
        Member("length", _c_grid(), length_model),
        Member("word_tfidf", _c_grid(), word_model),
        Member("char_tfidf", _c_grid(), char_model),
    ]
    if embed is not None:
        members.append(
            Member(
                "minilm", _c_grid(), embedding_model, inputs=lambda r: np.asarray(embed(r.texts), np.float64)
            )
        )
    if structured:
        feats = tuple(structured)
        members.append(
            Member(
                "structured",
                [{"degree": d, "C": c} for d in STRUCTURED_DEGREES for c in C_GRID],
                lambda p: StructuredModel(feats, degree=p["degree"], C=p["C"]),
                inputs=_text_and_meta,
            )
        )
    ents = tuple(entities) if embed is not None else ()
    if ents and embed is not None:
        encoder = embed
        members.append(
            Member(
                "entity_embed",
                _c_grid(),
                entity_model,
                inputs=lambda r: entity_embeddings(r, ents, encoder),
            )
        )
    if structured or ents:
        feats = tuple(structured)

        def gbm_inputs(rows: PanelRows) -> np.ndarray:
            cos = (
                entity_pair_cosines(entity_embeddings(rows, ents, embed))
                if ents and embed is not None
                else np.zeros((len(rows.texts), 0))
            )
            out = np.empty(len(rows.texts), dtype=object)
            for i, text in enumerate(rows.texts):
                out[i] = (str(text), rows.meta_of(i), cos[i])
            return out

        members.append(
            Member(
                "structured_gbm",
                [
                    {"max_depth": d, "learning_rate": r, "max_iter": n}
                    for d in GBM_DEPTHS
                    for r in GBM_RATES
                    for n in GBM_ITERS
                ],
                lambda p: StructuredGBM(feats, **p),
                inputs=gbm_inputs,
            )
        )
    return members


def entity_embeddings(rows: PanelRows, entities: Sequence[StructuredEntity], embed: Embed) -> np.ndarray:
    """(n, k, d): the encoder's embedding of each entity each row names (each distinct string
    embedded once; a missing entity is a zero vector)."""
    names = [[e.extract(str(t), rows.meta_of(i)) for e in entities] for i, t in enumerate(rows.texts)]
    distinct = sorted({v for row in names for v in row if v})
    vectors = np.asarray(embed(distinct), dtype=np.float64) if distinct else np.zeros((0, 1))
    at = {v: i for i, v in enumerate(distinct)}
    d = vectors.shape[1]
    out = np.zeros((len(names), len(entities), d), dtype=np.float64)
    for i, row in enumerate(names):
        for j, v in enumerate(row):
            if v:
                out[i, j] = vectors[at[v]]
    return out


# --------------------------------------------------------------------------- fitting


def cv_folds(labels: np.ndarray, groups: Sequence[str], *, folds: int = CV_FOLDS, seed: int = PANEL_SEED):
    """(train index, validation index) pairs: stratified by label, each group within one fold."""
    from sklearn.model_selection import StratifiedGroupKFold

    y = np.asarray(labels)
    n_minor = int(min(y.sum(), y.size - y.sum()))
    if n_minor < folds:
        raise EvaluatorError(
            f"cross-validation needs at least {folds} rows of each class in train; the smaller class has"
            f" {n_minor}"
        )
    splitter = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(y.size), y, groups=list(groups)))


def _cv_auroc(member: Member, params: dict[str, Any], x, y: np.ndarray, folds) -> tuple[float, np.ndarray]:
    """Mean validation-fold AUROC at ``params`` and the out-of-fold decision value of every train
    row (each row scored by the model fit on the other folds)."""

    values = []
    oof = np.zeros(y.size, dtype=np.float64)
    for tr, va in folds:
        model = member.build(params).fit(x[tr], y[tr])
        oof[va] = model.decision_function(x[va])
        if len(set(y[va].tolist())) < 2:
            continue  # a fold without both classes has no AUROC
        values.append(auroc(oof[va], y[va]))
    if not values:
        raise EvaluatorError(f"{member.name}: no cross-validation fold holds both classes")
    return float(np.mean(values)), oof


def fit_member(
    member: Member,
    train: PanelRows,
    scored: dict[str, PanelRows],
    *,
    folds: int = CV_FOLDS,
    seed: int = PANEL_SEED,
) -> MemberResult:
    """Choose the member's hyperparameters by CV on ``train`` only, refit on all of train, score
    every split of ``scored``."""
    y = np.asarray(train.labels, dtype=np.int64)
    x = member.inputs(train)
    splits = cv_folds(y, train.groups, folds=folds, seed=seed)
    grid: list[dict[str, Any]] = []
    oofs: list[np.ndarray] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lbfgs convergence notes at large C change nothing chosen
        for params in member.grid:
            cv, oof = _cv_auroc(member, params, x, y, splits)
            grid.append({"params": dict(params), "cv_auroc": cv})
            oofs.append(oof)
        i_best = max(range(len(grid)), key=lambda i: (grid[i]["cv_auroc"], -i))  # first of equals
        best = grid[i_best]
        model = member.build(best["params"]).fit(x, y)
        out = {
            name: _split_scores(rows, model.decision_function(member.inputs(rows)))
            for name, rows in scored.items()
        }
    return MemberResult(member.name, best["params"], best["cv_auroc"], grid, out, oof=oofs[i_best])


def _split_scores(rows: PanelRows, values) -> SplitScores:

    s = np.asarray(values, dtype=np.float64)
    return SplitScores(
        ids=list(rows.ids),
        scores=[float(v) for v in s],
        auroc=auroc(s, rows.labels),
        ci=auroc_ci(s, rows.labels),
    )


def fit_stack(
    members: dict[str, MemberResult],
    train: PanelRows,
    scored: dict[str, PanelRows],
    *,
    folds: int = CV_FOLDS,
    seed: int = PANEL_SEED,
) -> MemberResult:
    """The ``stack`` member: a logistic regression over the other members' decision values.

    It is fit on the members' out-of-fold values on train (so it never sees a value a member
    produced for a row it was fit on), its C chosen by CV on those values over the same folds;
    on a scored split it reads the members' values from their fits on all of train."""
    names = list(members)
    y = np.asarray(train.labels, dtype=np.int64)
    x = np.column_stack([members[n].oof for n in names])
    stack = Member(STACK, _c_grid(), dense_model)
    splits = cv_folds(y, train.groups, folds=folds, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid: list[dict[str, Any]] = [
            {"params": dict(p), "cv_auroc": _cv_auroc(stack, p, x, y, splits)[0]} for p in stack.grid
        ]
        best = max(grid, key=lambda g: g["cv_auroc"])  # max keeps the first of equals
        model = stack.build(best["params"]).fit(x, y)
        out: dict[str, SplitScores] = {}
        for split, rows in scored.items():
            z = np.column_stack([members[n].splits[split].scores for n in names])
            out[split] = _split_scores(rows, model.decision_function(z))
    params = dict(best["params"]) | {"over": ",".join(names)}
    return MemberResult(STACK, params, best["cv_auroc"], grid, out, oof=np.zeros(0))


def fit_panel(
    train: PanelRows,
    scored: dict[str, PanelRows],
    *,
    members: Sequence[Member],
    folds: int = CV_FOLDS,
    seed: int = PANEL_SEED,
) -> PanelResult:
    """Every member fit on ``train`` (CV on train picks its hyperparameters) and scored on each
    split of ``scored``; ``by_cv`` is the member with the highest CV AUROC (first of equals)."""
    if not members:
        raise EvaluatorError("the text panel has no members")
    results = {m.name: fit_member(m, train, scored, folds=folds, seed=seed) for m in members}
    if len(results) > 1:
        results[STACK] = fit_stack(results, train, scored, folds=folds, seed=seed)
    by_cv = best_member({name: r.cv_auroc for name, r in results.items()})
    assert by_cv is not None
    return PanelResult(results, by_cv, folds=folds, seed=seed)


# --------------------------------------------------------------------------- a registry task


def _rows(split_rows) -> PanelRows:
    return PanelRows(
        ids=list(split_rows.ids),
        texts=list(split_rows.texts),
        labels=np.asarray(split_rows.labels, dtype=np.int64),
        groups=list(split_rows.groups),
        meta=list(split_rows.meta),
    )


def encoder_embed(registry, *, cache_dir, device: str | None = "cpu") -> Embed:
    """Mean-pooled last-layer embeddings of the registry's sentence encoder, through the activation
    cache under ``cache_dir`` (the model is loaded on first use)."""
    # imported when called: tests replace evaluator.core.models.load_model (no model may load)
    from evaluator.core.models import load_model

    def embed(texts: Sequence[str]) -> np.ndarray:
        lm = load_model(ENCODER_ID, registry=registry, cache_dir=cache_dir, device=device)
        x, _, _ = prompt_activations(
            lm,
            list(texts),
            layer=lm.n_layers,
            position="mean",
            cache=ActivationCache(cache_dir),
            all_layers=False,
        )
        return x

    return embed


def task_panel(
    registry,
    task_id: str,
    *,
    model: str | None = None,
    splits: Sequence[str] = ("test", "distshift"),
    embed: Embed | None = None,
) -> PanelResult:
    """The panel of one task (an on-policy task: on ``model``'s own files), fit on train and scored
    on each of ``splits`` the task has. The texts are the prompts the probes read (the task's
    ``single`` template applied to each row's text)."""

    task = registry.task(task_id)
    if task.on_policy and model is None:
        raise EvaluatorError(
            f"task {task_id} is on-policy: its rows are per base model ({', '.join(task.splits_by_model)});"
            " name one with --model"
        )
    available = task.splits_for(model)
    if not available:
        raise EvaluatorError(f"task {task_id} has no split files for base model {model}")
    missing = [s for s in splits if s not in available]
    if "test" in missing or not [s for s in splits if s in available]:
        raise EvaluatorError(
            f"task {task_id} has no {', '.join(missing)} split; it has {', '.join(available)}"
        )

    def rows(split: str) -> PanelRows:
        r = _rows(read_split(registry, task_id, split, model=model if task.on_policy else None))
        return PanelRows(r.ids, render_prompts(task, r.texts, "single"), r.labels, r.groups, r.meta)

    scored = {s: rows(s) for s in splits if s in available}
    members = panel_members(task.structured_baseline, embed=embed, entities=task.structured_entities)
    result = fit_panel(rows("train"), scored, members=members)
    notes = [f"no {s} split: not scored" for s in missing]
    if embed is None:
        notes.append("minilm member left out (no encoder)")
    if not task.structured_baseline and not task.structured_entities:
        notes.append("no structured members: the task card declares no structured_baseline")
    elif not task.structured_baseline:
        notes.append("no structured member: the task card declares entities but no features")
    if task.structured_entities and embed is None:
        notes.append("entity_embed member left out (no encoder)")
    return PanelResult(result.members, result.by_cv, folds=result.folds, seed=result.seed, notes=notes)


def panel_table(result: dict[str, Any]) -> str:
    """The CLI's result as a short table for a terminal."""
    head = f"{result.get('task', '?')}" + (f" · {result['model']}" if result.get("model") else "")
    split = result.get("split", "test")
    lines = [f"{head} · text-only baselines, {split} AUROC (fit on train, C by CV on train)", ""]
    rows = [["member", f"{split} AUROC", "95% CI", "CV AUROC (train)", "params"]]
    for name, b in (result.get("baselines") or {}).items():
        params = ", ".join(
            f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in b["params"].items()
        )
        rows.append(
            [
                name,
                f"{b['auroc']:.3f}",
                f"[{b['ci'][0]:.3f}, {b['ci'][1]:.3f}]",
                f"{b['cv_auroc']:.3f}",
                params,
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    s = result.get("strongest") or {}
    cv = result.get("by_cv") or {}
    lines += [
        "",
        f"strongest on {split} (the bar a probe's lift is measured over): {s.get('name')} · AUROC"
        f" {s.get('auroc', 0):.3f}",
        f"chosen by CV on train: {cv.get('name')} · {split} AUROC {cv.get('auroc', 0):.3f}",
    ]
    lines += [f"note: {n}" for n in result.get("notes") or []]
    return "\n".join(lines) + "\n"
