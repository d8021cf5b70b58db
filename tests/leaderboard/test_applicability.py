"""A probe is planned only on the tasks it can read (evaluator.core.applicability), and the planner agrees
with what the evaluator refuses at the start of a run: every committed reference probe is
submitted through the normal path against the whole registry, and each planned run passes the
evaluator's own input check (template, split files of the model, layer, position) without a model;
each task of its category left out fails that check. The others are shown as "not applicable" with
the reason on the probe page and in the probe API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from django.urls import reverse

from evaluator.core.harvest import run_inputs_check
from evaluator.data.builders.onpolicy import CITY_COUNTRY_ID
from evaluator.data.registry.load import load_registry
from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.errors import EvaluatorError
from leaderboard import models as m
from tests.leaderboard.board_data import public_probe

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "registry" / "reference_probes" / "manifest.yaml"
Run = m.EvaluationRun
SMOL = "smollm2-135m-instruct"


def _entries() -> list[dict]:
    return yaml.safe_load(MANIFEST.read_text())["probes"]


@pytest.fixture
def reference_set(registry, settings, tmp_path):
    """Every reference probe of the manifest submitted as the demo does, the eval-awareness ones
    first and marked scored, so the others' reference runs are planned too. No run executes."""
    from leaderboard.management.commands.install_reference_probes import submit_entries, system_user
    from leaderboard.registry_sync import registry_sync

    settings.DATA_DIR = tmp_path
    settings.ARTIFACT_ROOT = tmp_path / "artifacts"
    settings.ENABLED_MODELS = sorted(load_registry().models)  # the models loaded on request too
    registry_sync(verify_hashes=False)
    system_user()
    entries = _entries()
    first = [e for e in entries if e.get("role") == EVAL_AWARENESS]
    ids = submit_entries(first, ROOT, write=lambda _: None)
    m.Submission.objects.filter(pk__in=ids).update(status=m.Submission.Status.SCORED)
    ids += submit_entries([e for e in entries if e.get("role") != EVAL_AWARENESS], ROOT, write=lambda _: None)
    assert len(ids) == len(entries)
    return entries


def _check(reg, run: Run) -> None:
    """The evaluator's own refusal at the start of this run (no model is loaded)."""
    version = run.probe_version
    recipe = version.recipe or {}
    model = reg.model(run.base_model_id)
    common = {"model_id": model.id, "n_layers": model.n_layers}
    if run.kind in (Run.Kind.SCORE, Run.Kind.REFERENCE, "sae"):
        # an SAE probe's baselines read the same activations as its score runs
        reads = {"layers": [version.layer], "position": version.position, "input_kind": version.input}
    elif run.kind in (Run.Kind.REPRODUCE, Run.Kind.TRANSFER):
        reads = {
            # a transfer re-fit chooses its layer on the target model
            "layers": [version.layer] if run.kind == Run.Kind.REPRODUCE else [],
            "position": recipe.get("position") or version.position,
            "input_kind": recipe.get("input") or version.input,
        }
    else:  # steer: the task's readout for the model's family, on the model's own test rows
        readout = reg.task(run.task_id).readout
        assert readout is not None and readout.template_for(model.family) is not None, run
        reads = {"layers": [version.layer], "position": version.position, "input_kind": "single"}
    run_inputs_check(reg, run.task_id, run.split, **common, **reads)


def test_every_planned_reference_run_passes_the_evaluators_input_check(reference_set):
    reg = load_registry()
    runs = list(Run.objects.select_related("probe_version__probe"))
    assert len({r.probe_version_id for r in runs if r.kind == Run.Kind.SCORE}) == len(reference_set)
    assert {r.kind for r in runs} >= {Run.Kind.SCORE, Run.Kind.REFERENCE, Run.Kind.TRANSFER}
    for run in runs:
        _check(reg, run)  # raises on a run that could not start


def test_every_task_left_out_is_one_the_evaluator_would_refuse(reference_set):
    reg = load_registry()
    planned = set(
        Run.objects.filter(kind=Run.Kind.SCORE, split="test").values_list("probe_version_id", "task_id")
    )
    left_out = 0
    for version in m.ProbeVersion.objects.select_related("probe"):
        model = reg.model(version.probe.base_model_id)
        for task in reg.active_tasks(version.probe.category_id):
            if (version.pk, task.id) in planned:
                continue
            left_out += 1
            with pytest.raises(EvaluatorError):
                run_inputs_check(
                    reg,
                    task.id,
                    "test",
                    model_id=model.id,
                    n_layers=model.n_layers,
                    layers=[version.layer],
                    position=version.position,
                    input_kind=version.input,
                )
    assert left_out  # the contrast-pair probes on the on-policy task, the encoder on on-policy tasks


def _versions(entries: list[dict]) -> list[int]:
    """The probe versions of manifest entries (by their artifact's SHA-256)."""
    from leaderboard.artifacts import sha256_bytes

    shas = [sha256_bytes((ROOT / e["path"] / "probe.safetensors").read_bytes()) for e in entries]
    return list(m.ProbeVersion.objects.filter(artifact_sha256__in=shas).values_list("pk", flat=True))


def test_contrast_pair_reference_probes_get_no_run_on_the_on_policy_city_task(reference_set):
    def reads(entry):
        return json.loads((ROOT / entry["path"] / "probe.json").read_text())["input"]

    contrast = [e for e in reference_set if reads(e) == "contrast_pair"]
    assert "cities-cp-logreg-smollm2" in {e["slug"] for e in contrast}
    runs = Run.objects.filter(probe_version__in=_versions(contrast))
    assert runs.filter(kind=Run.Kind.SCORE, task_id="cities-truth-v1").exists()
    assert not runs.filter(task_id=CITY_COUNTRY_ID).exists()
    # the single-input probes of the category are still measured on it
    single = [e for e in reference_set if e["slug"] == "repeval-pca-cities-smollm2"]
    assert Run.objects.filter(
        probe_version__in=_versions(single), kind=Run.Kind.SCORE, task_id=CITY_COUNTRY_ID
    ).exists()


def test_the_probe_page_and_api_say_why_a_task_is_not_applicable(client, registry):
    tasks = list(m.Task.objects.filter(slug__in=["cities-truth-v1", "halueval-qa-v1"]))
    public_probe(slug="pair-probe", base_model=SMOL, tasks=tasks, input="contrast_pair", layer=18)
    html = client.get(reverse("leaderboard:probe", args=["pair-probe"])).content.decode()
    assert "Not applicable" in html
    assert CITY_COUNTRY_ID in html and "no contrast_pair template" in html
    body = client.get("/api/v1/probes/pair-probe").json()
    assert set(body["not_applicable"]) == {CITY_COUNTRY_ID}
    assert "no contrast_pair template" in body["not_applicable"][CITY_COUNTRY_ID]
