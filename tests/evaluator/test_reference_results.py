"""The committed per-task results of the reference probes (registry/reference_probes/results.json,
written by ``bench/reference_lifts.py`` from a board a real worker filled): every reference probe on
a default base model is there, every task it was scored on says which side it is on (the task it
was trained on, or another of its category), and every task with a text panel has its lift and its
controlled AUROC with their intervals; each lift is the probe's AUROC minus the bar it names."""

from __future__ import annotations

import hashlib
import json

import pytest

from evaluator.commands.reference_probes.manifest import load_manifest
from evaluator.data.registry.load import load_registry
from tests.evaluator.conftest import PROJECT_ROOT

RESULTS = PROJECT_ROOT / "registry" / "reference_probes" / "results.json"


@pytest.fixture(scope="module")
def results():
    data = json.loads(RESULTS.read_text())
    assert data["format"] == 1
    return {p["artifact_sha256"]: p for p in data["probes"]}


@pytest.fixture(scope="module")
def registry():
    return load_registry(PROJECT_ROOT)


def _default_entries(registry):
    on_request = {m for m, spec in registry.models.items() if spec.on_request}
    return [e for e in load_manifest(registry) if e.base_model not in on_request]


def _sha(entry) -> str:
    return hashlib.sha256((PROJECT_ROOT / entry.path / "probe.safetensors").read_bytes()).hexdigest()


def test_every_reference_probe_on_a_default_model_has_its_per_task_results(results, registry):
    entries = _default_entries(registry)
    assert len(entries) >= 39
    missing = [e.slug for e in entries if _sha(e) not in results]
    assert not missing, f"not in {RESULTS.name}: {missing} (rerun bench/reference_lifts.py on a filled board)"
    for e in entries:
        record = results[_sha(e)]
        assert record["base_model"] == e.base_model, e.slug
        trained_on = {e.recipe["task"]}
        assert record["tasks"], e.slug
        for task_id, t in record["tasks"].items():
            assert t["in_domain"] is (task_id in trained_on), (e.slug, task_id)
            assert 0.0 <= t["auroc"] <= 1.0


def test_every_task_with_a_text_panel_has_a_lift_and_a_controlled_auroc(results, registry):
    checked = 0
    for e in _default_entries(registry):
        for task_id, t in results[_sha(e)]["tasks"].items():
            task = registry.task(task_id)
            if task.text_panel_sha256(e.base_model) is None:
                continue
            checked += 1
            assert t["text_baseline_auroc"] is not None, (e.slug, task_id)
            assert t["lift_over_text"] == pytest.approx(t["auroc"] - t["text_baseline_auroc"], abs=1e-6)
            lo, hi = t["lift_over_text_ci"]
            assert lo <= t["lift_over_text"] <= hi, (e.slug, task_id)
            assert t["controlled_auroc"] is not None and len(t["controlled_auroc_ci"]) == 2, (e.slug, task_id)
    assert checked >= 60
