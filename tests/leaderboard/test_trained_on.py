"""``trained_on``: what a probe without a recipe was trained on, required and checked, so that its
scores can be split into in-domain and cross-domain (evaluator.metrics.in_domain)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from evaluator.metrics.in_domain import in_domain_tasks
from leaderboard.models import Probe, ProbeVersion
from leaderboard.services.tokens import api_token_create
from tests.leaderboard.test_submission_validation import linear_probe_bytes, metadata, post

pytestmark = pytest.mark.django_db
RECIPE = {"method": "logistic_regression", "task": "halueval-qa-v1", "layer": 15, "position": "last_token"}
HASH = "ab" * 32


@pytest.fixture
def api(registry, researcher):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher)}")
    return client


def refused(response, *words: str) -> str:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == "trained_on", body
    for word in words:
        assert word in body["error"], (word, body["error"])
    assert not Probe.objects.exists()
    return body["error"]


@pytest.mark.parametrize(
    ("trained_on", "words"),
    [
        (None, ["required for a probe without a recipe", "registry task ids", '"external"']),
        ([], ["required"]),
        (["nope-v1"], ["unknown task id(s) 'nope-v1'", "registry task ids"]),
        (["cities-truth-v1", "nope-v1", "gone-v2"], ["'nope-v1', 'gone-v2'"]),
        (5, ["got int"]),
        ({"tasks": ["cities-truth-v1"]}, ["got dict"]),
        ([["cities-truth-v1"]], ["got list"]),
        (["cities-truth-v1\x07"], ["control character U+0007"]),
        (["cities-truth-v1"] * 101, ["lists 101 entries; at most 100"]),
        (["x" * 121], ["at most 120"]),
        ("external", ["training_data.text_sha256", "text-hashes"]),
    ],
    ids=[
        "missing",
        "empty",
        "unknown",
        "several unknown",
        "a number",
        "an object",
        "nested",
        "a control character",
        "too many",
        "too long",
        "external without hashes",
    ],
)
def test_a_bad_trained_on_is_a_400_naming_the_field(api, trained_on, words):
    refused(post(api, linear_probe_bytes(seed=301), metadata(trained_on=trained_on)), *words)


def test_a_nul_is_refused_whichever_way_it_comes(api):
    from leaderboard.errors import ValidationFailed
    from leaderboard.validation import metadata_validate

    with pytest.raises(ValidationFailed) as caught:  # an object already parsed (the web form's way)
        metadata_validate(metadata(trained_on=["cities-truth-v1\x00"]))
    assert caught.value.field == "trained_on" and "U+0000" in caught.value.message
    response = post(api, linear_probe_bytes(seed=307), metadata(trained_on=["cities-truth-v1\x00"]))
    assert response.status_code == 400 and "NUL" in response.json()["error"]  # refused as JSON already


def test_registry_tasks_are_stored_and_read_as_the_in_domain_tasks(api):
    meta = metadata(trained_on=["cities-truth-v1", "halueval-qa-v1", "cities-truth-v1"])
    response = post(api, linear_probe_bytes(seed=302), meta)
    assert response.status_code == 201, response.content
    version = ProbeVersion.objects.get()
    assert version.metadata["trained_on"] == ["cities-truth-v1", "halueval-qa-v1"]
    assert in_domain_tasks(version) == {"cities-truth-v1", "halueval-qa-v1"}


def test_external_data_declared_by_its_hashes_is_accepted_and_in_domain_nowhere(api):
    meta = metadata(trained_on="external", training_data={"text_sha256": [HASH], "external": "forum posts"})
    response = post(api, linear_probe_bytes(seed=303), meta)
    assert response.status_code == 201, response.content
    version = ProbeVersion.objects.get()
    assert version.metadata["trained_on"] == ["external"]
    assert in_domain_tasks(version) == set()


def test_a_recipe_names_the_task_itself(api):
    data = {
        "artifact": SimpleUploadedFile("probe.safetensors", linear_probe_bytes(seed=304)),
        "metadata": json.dumps(metadata(trained_on=None)),
        "recipe": json.dumps(RECIPE),
    }
    response = api.post("/api/v1/submissions", data, format="multipart")
    assert response.status_code == 201, response.content
    version = ProbeVersion.objects.get()
    assert "trained_on" not in version.metadata and in_domain_tasks(version) == {"halueval-qa-v1"}


def test_a_trained_on_that_contradicts_the_recipe_is_refused(api):
    meta = metadata(trained_on=["cities-truth-v1"], recipe=RECIPE)
    refused(post(api, linear_probe_bytes(seed=305), meta), "the recipe trains on 'halueval-qa-v1' only")


def test_the_web_form_asks_for_it_next_to_the_field(client, registry, researcher):
    client.force_login(researcher)
    meta = metadata(trained_on=None)
    form = {k: v for k, v in meta.items() if k not in ("authors", "training_data")} | {"authors": "Ada"}
    form["artifact"] = SimpleUploadedFile("probe.safetensors", linear_probe_bytes(seed=306))
    response = client.post(reverse("submit:new"), form)
    assert response.status_code == 400
    assert "required for a probe without a recipe" in " ".join(response.context["form"].errors["trained_on"])
    form |= {
        "trained_on_external": "on",
        "training_text_sha256": HASH,
        "artifact": SimpleUploadedFile("probe.safetensors", linear_probe_bytes(seed=306)),
    }
    response = client.post(reverse("submit:new"), form)
    assert response.status_code == 302, response.context["form"].errors
    version = ProbeVersion.objects.get()
    assert version.metadata["trained_on"] == ["external"]
    assert version.training_data["text_sha256"] == [HASH]
