"""An SAE-feature probe through the submission API and the web form: accepted when its header names a
registered SAE of its base model and layer, refused with a 400 naming the field at fault otherwise,
leaving nothing behind."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from safetensors.numpy import save

from evaluator.core.sae_probe import SAE_HASH_KEY
from leaderboard.models import ProbeVersion, Submission
from tests.evaluator.sae_registry import LAYER, SAE_ID, WIDTH, project_root_with_sae
from tests.leaderboard.test_submission_validation import api, metadata, nothing_left_behind, post  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def sae_sha(registry, settings, tmp_path):
    """The project's registry with a synthetic SAE of SmolLM2 at layer 15 registered."""
    root, _, sha = project_root_with_sae(tmp_path / "root")
    settings.REGISTRY_ROOT = root
    return sha


def sae_probe_bytes(sha: str | None, seed: int = 0, **overrides) -> bytes:
    rng = np.random.default_rng(seed)
    tensors = {
        "latents": np.array([3, 17, 40], dtype=np.int64),
        "weight": rng.normal(size=3).astype(np.float32),
        "bias": np.zeros((), dtype=np.float32),
    }
    tensors.update(overrides)
    return save(tensors, metadata=None if sha is None else {SAE_HASH_KEY: sha})


def sae_recipe(**changes) -> dict:
    recipe = {"method": "sae_topk_meandiff", "task": "cities-truth-v1", "layer": LAYER}
    return recipe | {"hyperparameters": {"sae": SAE_ID, "k": 16}} | changes


def test_an_sae_probe_is_accepted_and_recorded_as_its_kind(api, sae_sha):  # noqa: F811
    response = post(api, sae_probe_bytes(sae_sha), metadata(recipe=sae_recipe()))
    assert response.status_code == 201, response.content
    version = Submission.objects.get(pk=response.json()["id"]).probe_version
    assert version.kind == "sae_features" and version.recipe["hyperparameters"]["sae"] == SAE_ID


def bad_uploads(sha: str) -> dict[str, tuple[bytes, dict, str, str]]:
    """case → (artifact, metadata, field, words of the message)."""
    return {
        "no header metadata": (sae_probe_bytes(None), metadata(), "artifact", "has no __metadata__"),
        "an unregistered SAE": (
            sae_probe_bytes("f" * 64),
            metadata(),
            "artifact",
            "no registered SAE has weights SHA-256 ffffffffffff… (sae_weights_sha256 of the artifact's"
            f" __metadata__); registered (registry/saes.yaml): {SAE_ID} ({sha[:12]}…)",
        ),
        "another base model": (
            sae_probe_bytes(sha),
            metadata(base_model="gemma-3-270m"),
            "base_model",
            "the probe's base_model is gemma-3-270m",
        ),
        "another layer": (sae_probe_bytes(sha), metadata(layer=14), "layer", "accepted: layer 15"),
        "mean position": (sae_probe_bytes(sha), metadata(position="mean"), "position", "last_token only"),
        "contrast pair": (
            sae_probe_bytes(sha),
            metadata(input="contrast_pair"),
            "input",
            "single input only",
        ),
        "65 latents": (
            sae_probe_bytes(sha, latents=np.arange(65), weight=np.ones(65, dtype=np.float32)),
            metadata(),
            "artifact",
            "1 ≤ k ≤ 64",
        ),
        "an index past the width": (
            sae_probe_bytes(sha, latents=np.array([3, WIDTH, 5])),
            metadata(),
            "artifact",
            f"accepted: 0..{WIDTH - 1}",
        ),
        "float latents": (
            sae_probe_bytes(sha, latents=np.array([3.0, 4.0, 5.0], dtype=np.float32)),
            metadata(),
            "artifact",
            "accepted: I64 or I32",
        ),
        "a recipe at another layer": (
            sae_probe_bytes(sha),
            metadata(recipe=sae_recipe(layer=14), layer=14),
            "recipe",
            "layer 14 is not the layer of SAE test-sae; accepted: 15",
        ),
        "a recipe reading a mean": (
            sae_probe_bytes(sha),
            metadata(recipe=sae_recipe(position="mean"), position="mean"),
            "recipe",
            "reads last_token of a single input",
        ),
        "a recipe without its SAE": (
            sae_probe_bytes(sha),
            metadata(recipe=sae_recipe(hyperparameters={"k": 16})),
            "recipe",
            "needs hyperparameter(s) sae",
        ),
        "a neuron recipe wider than the model": (
            sae_probe_bytes(sha),
            metadata(recipe=sae_recipe(method="neuron_topk_meandiff", hyperparameters={"k": 577})),
            "recipe",
            "k = 577 exceeds the d_model of smollm2-135m-instruct",
        ),
    }


CASES = list(bad_uploads("0" * 64))


@pytest.mark.parametrize("case", CASES, ids=CASES)
def test_a_bad_sae_probe_is_a_400_naming_its_field(api, sae_sha, nothing_left_behind, case):  # noqa: F811
    artifact, meta, field, words = bad_uploads(sae_sha)[case]
    response = post(api, artifact, meta)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == field and words in body["error"], body


def test_the_web_form_accepts_an_sae_probe_and_shows_a_refusal_at_its_field(client, researcher, sae_sha):
    client.force_login(researcher)
    fields = {
        "name": "An SAE probe",
        "category": "hallucination",
        "base_model": "smollm2-135m-instruct",
        "layer": LAYER,
        "position": "mean",
        "input": "single",
        "output": "logit",
        "license": "MIT",
        "trained_on": "cities-truth-v1",
    }

    def artifact():
        return SimpleUploadedFile("probe.safetensors", sae_probe_bytes(sae_sha))

    response = client.post(reverse("submit:new"), fields | {"artifact": artifact()})
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert "last_token only" in " ".join(errors.get("position", [])), errors
    response = client.post(reverse("submit:new"), fields | {"position": "last_token", "artifact": artifact()})
    assert response.status_code == 302, response.context["form"].errors
    assert ProbeVersion.objects.get().kind == "sae_features"
