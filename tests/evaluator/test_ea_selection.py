"""The shift-aware selection rule of the second eval-awareness reference probes:
leave-one-format-out folds, the worst-fold rule and its tie-breaks on synthetic data with formats,
and the manifest's ``replaces`` / ``selection`` keys on the real registry."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import yaml

from evaluator.axes.ea_selection import (
    MIN_FORMAT_GROUPS,
    RULE,
    Candidate,
    CandidateScore,
    choose,
    format_folds,
    parse_selection,
    rechoose,
    select,
    split_formats,
)
from evaluator.commands.reference_probes.evaluation import read_sidecar
from evaluator.commands.reference_probes.manifest import (
    ea_reference_for,
    ea_reference_probe_dir,
    load_manifest,
    manifest_path,
)
from evaluator.commands.reference_probes.sweep import cv_score, grouped_folds
from evaluator.commands.reference_probes.training import fit_and_score
from evaluator.core.probes import METADATA_NAME
from evaluator.core.recipes import Recipe
from evaluator.data.registry.load import load_registry
from evaluator.errors import EvaluatorError, RegistryError
from tests.evaluator.conftest import GEMMA, PROJECT_ROOT, SMOLLM

BENCH = ("bench0", "bench1", "bench2")
USER = ("user0", "user1")


def synthetic(n_groups: int = 90, seed: int = 0):
    """Each group is one question asked twice: a benchmark format (label 1) and a user frame (0).
    Two views of the same rows:

    - "format": a random embedding of the row's format plus a little noise; separable within seen
      formats, arbitrary on an unseen one (what a probe that memorises layouts reads);
    - "shared": a feature that says benchmark vs user in every format, with noise (it transfers).
    """
    rng = np.random.default_rng(seed)
    groups, formats, labels = [], [], []
    for g in range(n_groups):
        for label, fmt in ((1, BENCH[g % 3]), (0, USER[(g // 3) % 2])):
            groups.append(f"q{g:03d}")
            formats.append(fmt)
            labels.append(label)
    groups.append("q999")  # a rare format: fewer than MIN_FORMAT_GROUPS groups, never held out
    formats.append("user9")
    labels.append(0)
    y = np.array(labels)
    embedding = {name: rng.normal(size=12) for name in [*BENCH, *USER, "user9"]}
    X_format = np.array([embedding[f] for f in formats]) + rng.normal(scale=0.1, size=(y.size, 12))
    shared = (2 * y - 1) * 1.0 + rng.normal(scale=0.8, size=y.size)
    X_shared = np.hstack([shared[:, None], rng.normal(size=(y.size, 9))])
    return y, groups, formats, {"format": X_format, "shared": X_shared}


def recipe(method: str, layer: int = 0, **hp) -> Recipe:
    return Recipe(method=method, task="t", layer=layer, position="last_token", hyperparameters=hp)


# --------------------------------------------------------------------------- folds


def test_format_folds_hold_out_whole_formats_and_whole_groups():
    y, groups, formats, _ = synthetic()
    folds = format_folds(y, groups, formats)
    assert [f.fmt for f in folds] == sorted([*BENCH, *USER])  # user9 covers 1 group < 10
    for fold in folds:
        fit_formats = {formats[i] for i in fold.fit}
        assert fold.fmt not in fit_formats  # the held-out format is never fitted
        assert not {groups[i] for i in fold.fit} & {groups[i] for i in fold.held}
        held_groups = {groups[i] for i in fold.held}
        assert held_groups == {g for g, f in zip(groups, formats, strict=True) if f == fold.fmt}
        assert sorted([*fold.fit, *fold.held]) == list(range(y.size))
        assert 0 < y[fold.held].sum() < fold.held.size and 0 < y[fold.fit].sum() < fold.fit.size
    assert all(formats[-1] == "user9" and len(y) - 1 in f.fit for f in folds)  # the rare one: always fit
    again = format_folds(y, groups, formats)
    assert all((a.fit == b.fit).all() and (a.held == b.held).all() for a, b in zip(folds, again, strict=True))


def test_format_folds_refuse_what_cannot_be_held_out():
    y, groups, formats, _ = synthetic()
    with pytest.raises(EvaluatorError, match="two or more"):
        format_folds(y, groups, formats, min_groups=10_000)
    with pytest.raises(EvaluatorError, match="differ in length"):
        format_folds(y[:-1], groups, formats)
    # a format that holds every positive leaves the fit without that class
    one = ["bench" if label else f"user{i % 2}" for i, label in enumerate(y)]
    with pytest.raises(EvaluatorError, match="one class"):
        format_folds(y, groups, one)
    assert MIN_FORMAT_GROUPS == 10


# --------------------------------------------------------------------------- the rule


def test_the_rule_prefers_what_transfers_to_an_unseen_format_over_what_ordinary_cv_prefers():
    y, groups, formats, views = synthetic()
    # ordinary grouped CV (the first reference probes' sweep): the format-memorising view wins
    ordinary = grouped_folds(y, groups, 5, seed=0)
    memorise = cv_score(recipe("logistic_regression"), views["format"], y, ordinary).auroc
    transfer = cv_score(recipe("logistic_regression"), views["shared"], y, ordinary).auroc
    assert memorise > 0.99 and memorise > transfer
    # held-out formats: the format view is at chance on at least one fold, the shared one is not
    candidates = [
        Candidate("logistic_regression", {"C": 1.0}, "format"),
        Candidate("logistic_regression", {"C": 1.0}, "shared"),
    ]
    folds = format_folds(y, groups, formats)

    def run():
        return select(
            candidates,
            lambda c, layer: Recipe(
                method=c.method,
                task="t",
                layer=layer,
                position="last_token",
                hyperparameters=c.hyperparameters,
            ),
            lambda position, layer: views[position],
            y,
            folds,
            [0],
            fit_score=fit_and_score,
            task_id="t",
            seed=0,
        )

    result = run()
    by = {r["candidate"]: r for r in result.table}
    assert by[0]["worst"] < 0.7 < by[1]["worst"]
    assert result.chosen["position"] == "shared" and result.chosen["candidate"] == 1
    assert result.chosen_layer == 0 and result.best == pytest.approx(by[1]["worst"])
    assert result.rule == RULE and [f["format"] for f in result.folds] == [f.fmt for f in folds]
    assert rechoose(result.table) == (1, 0)
    assert "Test, distshift and holdout splits were not used to choose" in result.sentence("t")
    # deterministic: the same inputs choose the same and record the same numbers
    again = run()
    assert again.to_dict() == result.to_dict()


def test_choose_orders_worst_fold_then_mean_then_log_loss_then_candidate_then_layer():
    def s(c, layer, folds, loss=0.1):
        return CandidateScore(c, layer, list(folds), loss)

    # a higher worst fold beats a higher mean
    assert choose([s(0, 0, [1.0, 0.80]), s(1, 0, [0.85, 0.86])]).candidate == 1
    # equal worst (3 decimals): the higher mean
    assert choose([s(0, 0, [0.9, 0.9]), s(1, 0, [0.9002, 1.0])]).candidate == 1
    # equal worst and mean: the lower log-loss (4 decimals), then the earlier candidate, then the lower layer
    assert choose([s(0, 0, [0.9, 1.0], 0.2), s(1, 0, [0.9, 1.0], 0.1)]).candidate == 1
    assert choose([s(1, 0, [0.9, 1.0], 0.10001), s(0, 3, [0.9, 1.0], 0.1)]).candidate == 0
    assert choose([s(0, 5, [0.9, 1.0]), s(0, 2, [0.9, 1.0])]).layer == 2
    with pytest.raises(EvaluatorError):
        choose([])


def test_parse_selection_builds_the_grid_in_manifest_order_and_refuses_bad_blocks():
    raw = {
        "rule": "held_out_format",
        "positions": ["last_token", "mean"],
        "methods": [{"method": "logistic_regression", "hyperparameters": {"C": 0.01}}, {"method": "lda"}],
    }
    cands = parse_selection(raw, "here")
    assert [(c.method, c.position) for c in cands] == [
        ("logistic_regression", "last_token"),
        ("logistic_regression", "mean"),
        ("lda", "last_token"),
        ("lda", "mean"),
    ]
    assert cands[0].hyperparameters == {"C": 0.01} and cands[2].hyperparameters == {}
    for bad in (
        {**raw, "rule": "layer_sweep"},
        {**raw, "positions": []},
        {**raw, "methods": [{"method": "lda", "layer": 3}]},
        {**raw, "extra": 1},
        {**raw, "methods": [{"method": "lda"}, {"method": "lda"}]},
    ):
        with pytest.raises(RegistryError):
            parse_selection(bad, "here")


# --------------------------------------------------------------------------- the manifest


@pytest.fixture(scope="module")
def real_registry():
    return load_registry(PROJECT_ROOT)


def test_each_replacement_replaces_the_one_before_and_the_last_is_the_current_reference(real_registry):
    entries = load_manifest(real_registry)
    by_slug = {e.slug: e for e in entries}
    for model, old, new in (
        (SMOLLM, "ea-lofo-smollm2", "ea-ctx-smollm2"),
        (GEMMA, "ea-gemma3", "ea-lofo-gemma3"),
    ):
        assert by_slug[new].replaces == old and by_slug[old].role == by_slug[new].role == "eval_awareness"
        assert ea_reference_for(entries, model).slug == new
        assert ea_reference_probe_dir(real_registry, model) == real_registry.root / by_slug[new].path
        assert by_slug[new].candidates and len(by_slug[new].candidates) == 10
        # the replaced probe is listed before its replacement (the demo submits it first)
        assert [e.slug for e in entries].index(old) < [e.slug for e in entries].index(new)
    assert by_slug["ea-lofo-smollm2"].replaces == "ea-smollm2"
    # the third SmolLM2 reference was chosen over the layers that read context (1 and up)
    assert by_slug["ea-ctx-smollm2"].candidate_layers(30) == list(range(1, 31))
    formats = split_formats(real_registry, "benchmark-vs-user-v1", "train", ["benchmark-vs-user-v1-q09670-b"])
    assert formats == ["bench4"]


def _write(tmp_path, data) -> str:
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_the_manifest_refuses_two_current_references_and_bad_replacements(real_registry, tmp_path):
    data = yaml.safe_load(manifest_path(real_registry.root).read_text())
    new = next(p for p in data["probes"] if p["slug"] == "ea-lofo-smollm2")

    two = copy.deepcopy(data)
    next(p for p in two["probes"] if p["slug"] == "ea-lofo-smollm2").pop("replaces")
    with pytest.raises(RegistryError, match="more than one current"):
        load_manifest(real_registry, _write(tmp_path, two))

    for change in (
        {"replaces": "no-such"},
        {"replaces": "ea-gemma3"},
        {"replaces": "halueval-cp-logreg-smollm2"},
    ):
        bad = copy.deepcopy(data)
        next(p for p in bad["probes"] if p["slug"] == "ea-lofo-smollm2").update(change)
        with pytest.raises(RegistryError, match="replaces"):
            load_manifest(real_registry, _write(tmp_path, bad))

    fixed = copy.deepcopy(data)
    next(p for p in fixed["probes"] if p["slug"] == "ea-lofo-smollm2")["recipe"]["method"] = "lda"
    with pytest.raises(RegistryError, match="set by the selection"):
        load_manifest(real_registry, _write(tmp_path, fixed))
    assert new["selection"]["rule"] == "held_out_format"


# --------------------------------------------------------------------------- the committed probes


def _selection_entries(real_registry):
    return [e for e in load_manifest(real_registry) if e.candidates]


def test_the_recorded_selection_chooses_the_committed_recipe(real_registry):
    """reference.json records every candidate × layer on the format folds; re-applying the rule to
    the record gives the committed probe's method, hyperparameters, position and layer."""
    entries = _selection_entries(real_registry)
    assert {e.slug for e in entries} == {"ea-lofo-smollm2", "ea-lofo-gemma3", "ea-ctx-smollm2"}
    for entry in entries:
        directory = entry.directory(real_registry.root)
        sidecar = read_sidecar(directory)
        selection = sidecar["selection"]
        meta = json.loads((directory / METADATA_NAME).read_text(encoding="utf-8"))
        model = real_registry.model(entry.base_model)
        assert selection["rule"] == RULE and selection["min_format_groups"] == MIN_FORMAT_GROUPS
        assert selection["candidates"] == [c.to_dict() for c in entry.candidates]
        assert selection["layers"] == entry.candidate_layers(model.n_layers)
        assert {(r["candidate"], r["layer"]) for r in selection["table"]} == {
            (k, layer) for k in range(len(entry.candidates)) for layer in selection["layers"]
        }
        assert all(len(r["fold_auroc"]) == len(selection["folds"]) for r in selection["table"])
        formats = [f["format"] for f in selection["folds"]]
        assert formats and all(f.startswith(("bench", "user")) for f in formats)
        assert any(f.startswith("bench") for f in formats) and any(f.startswith("user") for f in formats)
        k, layer = rechoose(selection["table"])
        assert (k, layer) == (selection["chosen"]["candidate"], selection["chosen"]["layer"])
        assert entry.candidate_of(meta["recipe"]) == entry.candidates[k] and meta["layer"] == layer
        assert meta["position"] == entry.candidates[k].position
        # measured afterwards, by the usual evaluation: test and distshift
        task = sidecar["evaluation"]["tasks"][entry.task]
        assert task["auroc"] is not None and task["auroc_ds"] is not None


@pytest.mark.model
def test_the_smollm2_selection_refits_to_the_committed_probe_at_its_layer(real_registry, monkeypatch):
    """The selection rerun on SmolLM2's train activations (shared cache; harvested when absent),
    restricted to the committed layer: the same candidate wins and the fit gives the committed
    tensors."""
    from dataclasses import replace
    from functools import partial

    from evaluator.commands.reference_probes import sweep
    from evaluator.commands.reference_probes.check import compare_artifacts
    from evaluator.commands.reference_probes.training import train_reference
    from evaluator.core.activations import ActivationCache
    from evaluator.core.models import load_model
    from evaluator.core.probes import load_probe
    from tests.evaluator.conftest import model_cache_dir

    # a cold cache's harvest stops at the committed layer (8) instead of running all 30 blocks to
    # keep every layer for later probes: the same vectors, about a third of the forward
    monkeypatch.setattr(sweep, "split_activations", partial(sweep.split_activations, all_layers=False))
    entry = ea_reference_for(load_manifest(real_registry), SMOLLM)  # the current one, ea-ctx-smollm2
    committed = load_probe(entry.directory(real_registry.root), registry=real_registry)
    lm = load_model(
        SMOLLM, registry=real_registry, cache_dir=model_cache_dir(), device="cpu", dtype="float32"
    )
    trained = train_reference(
        replace(entry, layers=(committed.layer,)), lm, real_registry, cache=ActivationCache(model_cache_dir())
    )
    check = compare_artifacts(entry.slug, committed.tensors, committed.metadata.to_dict(), trained)
    assert check.ok, check.problems
    recorded = read_sidecar(entry.directory(real_registry.root))["selection"]
    row = next(
        r
        for r in recorded["table"]
        if (r["candidate"], r["layer"]) == (recorded["chosen"]["candidate"], committed.layer)
    )
    got = next(r for r in trained.sweep.table if r["candidate"] == recorded["chosen"]["candidate"])
    assert got["fold_auroc"] == pytest.approx(row["fold_auroc"], abs=1e-9)
