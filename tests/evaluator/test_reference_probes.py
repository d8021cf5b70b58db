"""The reference probes of registry/reference_probes/.

Fast (default): the manifest is valid, eval-awareness reference probes come first and exist for
every base model, every artifact loads and validates against its base model, its metadata is
exactly the submission metadata (and passes the submission validation), the recorded layer is the
one the recorded train-only sweep chooses, and the SmolLM2 eval-awareness probe re-evaluates to
its recorded test metrics (activation cache: ``$PROBEBENCH_TEST_CACHE`` or ``var/cache``).

Slow (``-m slow``): every probe re-evaluated with evaluate_probe against its recorded metrics, and
every probe retrained from the manifest (layer sweep included) against its committed artifact.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evaluator.commands.reference_probes.evaluation import SIDECAR, read_sidecar
from evaluator.commands.reference_probes.manifest import (
    ea_reference_for,
    ea_reference_probe_dir,
    load_manifest,
)
from evaluator.commands.reference_probes.stale import record_problems
from evaluator.commands.reference_probes.sweep import SWEEP_RULE, choose_layer, grouped_folds
from evaluator.commands.reference_probes.training import AUTHORS, LICENSE
from evaluator.core.probes import ARTIFACT_NAME, METADATA_NAME, load_probe
from evaluator.data.registry.load import load_registry
from leaderboard.validation import KNOWN_FIELDS
from tests.evaluator.conftest import PROJECT_ROOT, SMOLLM, model_cache_dir

#: metrics recomputed from the same cached activations are identical; this tolerance allows a
#: re-harvest on another machine (different BLAS) to differ in the last digits
METRIC_TOLERANCE = 0.01
SUBMISSION_FIELDS = KNOWN_FIELDS - {"probe"}  # a first version names no earlier probe


@pytest.fixture(scope="module")
def real_registry():
    return load_registry(PROJECT_ROOT)


@pytest.fixture(scope="module")
def entries(real_registry):
    return load_manifest(real_registry)


def _ids(entries) -> list[str]:
    return [e.slug for e in entries]


# --------------------------------------------------------------------------- manifest and artifacts


def test_the_manifest_puts_an_eval_awareness_reference_probe_first_for_every_base_model(
    entries, real_registry
):
    roles = [e.role for e in entries]
    n_ea = roles.count("eval_awareness")
    assert roles[:n_ea] == ["eval_awareness"] * n_ea and "eval_awareness" not in roles[n_ea:]
    # every base model the manifest has probes on (a model loaded on request may have none yet:
    # its probes' auroc_ea is imputed, flagged, until it has its reference)
    on_models = {e.base_model for e in entries}
    assert {m for m, spec in real_registry.models.items() if not spec.on_request} <= on_models
    for model_id in on_models:
        ea = ea_reference_for(entries, model_id)
        assert ea is not None, f"no eval-awareness reference probe for {model_id}"
        assert real_registry.task(ea.task).category == "eval_awareness"
        assert (ea.directory(real_registry.root) / ARTIFACT_NAME).is_file()
    for entry in entries:
        assert entry.why and "\n" not in entry.why


def test_every_category_with_a_task_has_a_reference_probe(entries, real_registry):
    covered = {real_registry.task(e.task).category for e in entries}
    with_tasks = {t.category for t in real_registry.tasks.values() if t.is_active}
    assert with_tasks <= covered


def test_every_artifact_loads_and_validates_against_its_base_model(entries, real_registry):
    for entry in entries:
        directory = entry.directory(real_registry.root)
        probe = load_probe(directory, registry=real_registry)  # shapes, finiteness, layer, recipe
        model = real_registry.model(entry.base_model)
        assert probe.base_model == entry.base_model
        assert probe.d_model == model.d_model
        assert 0 <= probe.layer <= model.n_layers
        sidecar = read_sidecar(directory)
        assert sidecar["artifact_sha256"] == probe.sha256, (
            f"{entry.slug}: artifact changed since it was evaluated"
        )
        assert sidecar["slug"] == entry.slug


def test_probe_json_is_exactly_the_submission_metadata(entries, real_registry):
    for entry in entries:
        directory = entry.directory(real_registry.root)
        meta = json.loads((directory / METADATA_NAME).read_text(encoding="utf-8"))
        assert set(meta) <= SUBMISSION_FIELDS, entry.slug
        assert 3 <= len(meta["name"]) <= 160
        assert meta["category"] == real_registry.task(entry.task).category
        assert meta["license"] == LICENSE and meta["authors"] == list(AUTHORS)
        assert meta["training_data"] == {"tasks": [entry.task], "external": ""}
        assert meta["output"] == "logit"
        recipe = meta["recipe"]
        candidate = entry.candidate_of(recipe)
        assert (candidate is not None) == bool(entry.candidates), entry.slug
        assert recipe == {**entry.recipe_at(meta["layer"], real_registry, candidate).to_dict()}
        assert (recipe["position"], recipe["input"]) == (meta["position"], meta["input"])
        if candidate is not None:
            how = f"{candidate.label()} at layer {meta['layer']} was chosen on the {entry.task} train split only"
        elif recipe["method"] == "sae_topk_meandiff":  # its layer is its SAE's: nothing to sweep
            how = f"It reads layer {meta['layer']}, the layer of its SAE. On the {entry.task} train split"
        else:
            how = f"Layer {meta['layer']} was chosen by a layer sweep on the {entry.task} train split only"
        assert how in meta["description"], entry.slug
        recorded = read_sidecar(directory)["evaluation"]["aggregate"]
        for key, value in meta["declared_metrics"].items():
            assert recorded[key] == pytest.approx(value, abs=1e-4), (entry.slug, key)


@pytest.mark.django_db
def test_probe_json_passes_the_submission_validation(entries, real_registry, settings):
    """What the web pipeline runs on every upload (leaderboard.validation.metadata_validate), with
    every base model turned on (a model loaded on request is accepted only where it runs)."""
    from leaderboard.registry_sync import registry_sync
    from leaderboard.validation import metadata_validate

    settings.ENABLED_MODELS = sorted(real_registry.models)
    registry_sync(verify_hashes=False)
    for entry in entries:
        meta = json.loads((entry.directory(real_registry.root) / METADATA_NAME).read_text(encoding="utf-8"))
        clean = metadata_validate(meta)
        assert clean.layer == meta["layer"]


def test_the_recorded_sweep_chooses_the_committed_layer(entries, real_registry):
    for entry in entries:
        directory = entry.directory(real_registry.root)
        if entry.candidates:  # held-out-format selection: tests/evaluator/test_ea_selection.py
            continue
        sweep = read_sidecar(directory)["layer_sweep"]
        meta = json.loads((directory / METADATA_NAME).read_text(encoding="utf-8"))
        model = real_registry.model(entry.base_model)
        assert sweep["layers"] == entry.candidate_layers(model.n_layers)
        assert sweep["rule"] == SWEEP_RULE
        assert choose_layer(sweep["layers"], sweep["cv_auroc"], sweep["cv_log_loss"]) == meta["layer"]
        assert sweep["chosen_layer"] == meta["layer"]


# --------------------------------------------------------------------------- the sweep itself (pure)


def test_choose_layer_prefers_auroc_then_log_loss_then_the_lower_layer():
    assert choose_layer([0, 1, 2], [0.7, 0.9, 0.8], [0.1, 0.5, 0.2]) == 1
    assert choose_layer([0, 1, 2, 3], [0.9, 1.0, 0.99995, 1.0], [0.1, 0.02, 0.001, 0.001]) == 2
    assert choose_layer([3, 4], [1.0, 1.0], [0.00001, 0.00002]) == 3


def test_grouped_folds_keep_groups_whole_and_classes_in_every_fold():
    rng = np.random.default_rng(0)
    groups = [f"g{k // 2}" for k in range(200)]
    labels = np.array([k % 2 for k in range(200)])
    rng.shuffle(labels)
    folds = grouped_folds(labels, groups, 5, seed=0)
    again = grouped_folds(labels, groups, 5, seed=0)
    assert all((a == c).all() and (b == d).all() for (a, b), (c, d) in zip(folds, again, strict=True))
    held = np.concatenate([h for _, h in folds])
    assert sorted(held.tolist()) == list(range(200))
    for fit, h in folds:
        assert not {groups[i] for i in fit} & {groups[i] for i in h}
        assert 0 < labels[h].sum() < h.size


# --------------------------------------------------------------------------- re-evaluation


def _recorded(entry, root: Path) -> dict:
    return read_sidecar(entry.directory(root))["evaluation"]


def test_every_committed_record_is_current(entries, real_registry):
    """Each reference.json was measured on the committed artifact, the split files and model weights
    pinned today, against the eval-awareness reference probe `python -m evaluator evaluate` uses by
    default; probe.json declares what the record measured. Fix: `python -m evaluator
    reference-probes --reevaluate --only SLUG`."""
    stale = {e.slug: p for e in entries if (p := record_problems(e, entries, real_registry))}
    assert not stale, stale


def test_a_record_measured_against_another_reference_or_file_is_named_stale(entries, real_registry, tmp_path):
    import dataclasses
    import shutil

    entry = next(e for e in entries if e.role != "eval_awareness" and e.base_model == SMOLLM)
    copy = tmp_path / entry.slug
    shutil.copytree(entry.directory(real_registry.root), copy)
    moved = dataclasses.replace(entry, path=str(copy))  # an absolute path: the registry root is not prefixed
    others = [moved if e.slug == entry.slug else e for e in entries]
    assert record_problems(moved, others, real_registry) == []
    # a newer eval-awareness reference for the model makes every auroc_ea of it stale
    current = ea_reference_for(entries, SMOLLM)
    newer = dataclasses.replace(
        current, slug="ea-next", path="registry/reference_probes/ea-next", replaces=current.slug
    )
    (problem,) = record_problems(moved, [*others, newer], real_registry)
    assert (
        "the current eval-awareness reference of smollm2-135m-instruct is registry/reference_probes/ea-next"
        in problem
    )
    # another split file, other artifact bytes, other declared metrics
    sidecar = json.loads((copy / SIDECAR).read_text())
    task_id = next(iter(sidecar["evaluation"]["tasks"]))
    sidecar["evaluation"]["tasks"][task_id]["split_sha256"]["test"] = "0" * 64
    (copy / SIDECAR).write_text(json.dumps(sidecar))
    (copy / ARTIFACT_NAME).write_bytes((copy / ARTIFACT_NAME).read_bytes() + b" ")
    meta = json.loads((copy / METADATA_NAME).read_text())
    meta["declared_metrics"]["auroc"] = 0.123
    (copy / METADATA_NAME).write_text(json.dumps(meta))
    problems = record_problems(moved, others, real_registry)
    assert any(p.startswith("artifact is ") for p in problems)
    assert f"{task_id}/test was measured on a split file that is no longer pinned" in problems
    assert "probe.json's declared_metrics are not the record's measured aggregate" in problems


@pytest.mark.model
def test_the_smollm2_eval_awareness_probe_reevaluates_to_its_recorded_test_metrics(entries, real_registry):
    """One run on benchmark-vs-user-v1/test (activations from the cache when present)."""
    from evaluator.axes.run import execute_run
    from evaluator.metrics import metrics as m

    entry = ea_reference_for(entries, SMOLLM)
    recorded = _recorded(entry, real_registry.root)["tasks"][entry.task]
    run = execute_run(
        entry.directory(real_registry.root),
        task_id=entry.task,
        split="test",
        registry=real_registry,
        cache_dir=model_cache_dir(),
        device="cpu",
        dtype="float32",
    )
    ex = run.examples
    assert run.n == recorded["n_test"]
    assert m.auroc(ex.scores, ex.labels) == pytest.approx(recorded["auroc"], abs=METRIC_TOLERANCE)
    assert m.ece(ex.probs, ex.labels) == pytest.approx(recorded["ece"], abs=METRIC_TOLERANCE)
    assert m.brier(ex.probs, ex.labels) == pytest.approx(recorded["brier"], abs=METRIC_TOLERANCE)


@pytest.mark.slow
@pytest.mark.model
def test_every_reference_probe_reevaluates_to_its_recorded_metrics(entries, real_registry):
    from evaluator.axes.evaluate import evaluate_probe

    for entry in entries:
        recorded = _recorded(entry, real_registry.root)
        # the reference probe `python -m evaluator evaluate` reads by default, not the recorded one
        result = evaluate_probe(
            entry.directory(real_registry.root),
            registry=real_registry,
            cache_dir=model_cache_dir(),
            reference_probe=ea_reference_probe_dir(real_registry, entry.base_model),
            compute_transfer=False,
            compute_reproduction=False,
            latency_reps=5,
            device="cpu",
            dtype="float32",
        )
        for task_id, r in recorded["tasks"].items():
            got = result.tasks[task_id].metrics
            for key in ("auroc", "auroc_ds", "ece", "brier"):
                assert getattr(got, key) == pytest.approx(r[key], abs=METRIC_TOLERANCE), (
                    entry.slug,
                    task_id,
                    key,
                )
            assert got.auroc_ea_status == r["auroc_ea_status"]
            if r["auroc_ea"] is not None:
                assert got.auroc_ea == pytest.approx(r["auroc_ea"], abs=METRIC_TOLERANCE), (
                    entry.slug,
                    task_id,
                )


@pytest.mark.slow
@pytest.mark.model
def test_every_reference_probe_retrains_to_its_committed_artifact(entries, real_registry):
    """``python -m evaluator reference-probes --check``: the sweep picks the same layer and the
    fit gives the same tensors (within the check's tolerance)."""
    from evaluator.commands.reference_probes.check import compare_artifacts
    from evaluator.commands.reference_probes.training import train_reference
    from evaluator.core.activations import ActivationCache
    from evaluator.core.models import load_model

    cache = ActivationCache(model_cache_dir())
    for entry in entries:
        lm = load_model(
            entry.base_model,
            registry=real_registry,
            cache_dir=model_cache_dir(),
            device="cpu",
            dtype="float32",
        )
        trained = train_reference(entry, lm, real_registry, cache=cache)
        committed = load_probe(entry.directory(real_registry.root), registry=real_registry)
        check = compare_artifacts(entry.slug, committed.tensors, committed.metadata.to_dict(), trained)
        assert check.ok, check.problems


def test_sidecars_exist_only_for_manifest_entries(entries, real_registry):
    base = real_registry.root / "registry" / "reference_probes"
    on_disk = {p.parent.name for p in base.glob(f"*/{SIDECAR}")}
    assert on_disk == {Path(e.path).name for e in entries}
