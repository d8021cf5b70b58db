"""Every bad upload gets its status code and a specific message, and leaves nothing behind:
no probe, version or submission row, no stored file."""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from rest_framework.test import APIClient
from safetensors.numpy import save

from leaderboard.models import EvaluationRun, Probe, ProbeVersion, Submission
from leaderboard.services.tokens import api_token_create

pytestmark = pytest.mark.django_db
D_MODEL = 576  # smollm2-135m-instruct


def linear_probe_bytes(seed: int = 0, d: int = D_MODEL, **overrides) -> bytes:
    rng = np.random.default_rng(seed)
    tensors = {"weight": rng.normal(size=d).astype(np.float32), "bias": np.zeros((), dtype=np.float32)}
    tensors.update(overrides)
    return save(tensors)


def metadata(**overrides) -> dict:
    meta = {
        "name": "A test probe",
        "category": "hallucination",
        "base_model": "smollm2-135m-instruct",
        "layer": 15,
        "position": "last_token",
        "input": "single",
        "output": "logit",
        "license": "MIT",
        "authors": ["Ada"],
        "training_data": {"tasks": [], "external": ""},
        "trained_on": ["cities-truth-v1"],
    }
    if overrides.get("recipe") and "trained_on" not in overrides:
        del meta["trained_on"]  # a recipe names the task it trains on
    meta.update(overrides)
    return {k: v for k, v in meta.items() if v is not None}


@pytest.fixture
def api(registry, researcher):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher)}")
    return client


def post(api, artifact: bytes | None, meta: dict | str | None, name: str = "probe.safetensors"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = {}
    if artifact is not None:
        data["artifact"] = SimpleUploadedFile(name, artifact, content_type="application/octet-stream")
    if meta is not None:
        data["metadata"] = meta if isinstance(meta, str) else json.dumps(meta)
    return api.post("/api/v1/submissions", data, format="multipart")


def stored_files() -> list[Path]:
    root = Path(settings.ARTIFACT_ROOT)
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


@pytest.fixture
def nothing_left_behind():
    before = (
        Probe.objects.count(),
        ProbeVersion.objects.count(),
        Submission.objects.count(),
        EvaluationRun.objects.count(),
        len(stored_files()),
    )
    yield
    after = (
        Probe.objects.count(),
        ProbeVersion.objects.count(),
        Submission.objects.count(),
        EvaluationRun.objects.count(),
        len(stored_files()),
    )
    assert after == before, "a rejected upload left rows or files behind"


BAD_UPLOADS = {
    "pickle renamed .safetensors": (
        lambda: pickle.dumps({"weight": np.ones(D_MODEL)}),
        metadata(),
        400,
        "safetensors",
    ),
    "truncated file": (lambda: linear_probe_bytes()[:700], metadata(), 400, "artifact:"),
    "NaN weights": (
        lambda: linear_probe_bytes(weight=np.full(D_MODEL, np.nan, dtype=np.float32)),
        metadata(),
        400,
        "finite",
    ),
    "wrong shape": (lambda: linear_probe_bytes(d=384), metadata(), 400, "576"),
    "unknown tensor": (
        lambda: linear_probe_bytes(extra=np.zeros(3, dtype=np.float32)),
        metadata(),
        400,
        "extra",
    ),
    "layer out of range": (
        lambda: linear_probe_bytes(),
        metadata(layer=99),
        400,
        "layer: 99 is out of range for smollm2-135m-instruct: accepted 0..30",
    ),
    "unknown license": (
        lambda: linear_probe_bytes(),
        metadata(license="WTFPL"),
        400,
        "license: 'WTFPL' is not in the license registry; accepted: Apache-2.0",
    ),
    "missing field": (lambda: linear_probe_bytes(), metadata(name=None), 400, "name: this field is required"),
    "unknown position": (
        lambda: linear_probe_bytes(),
        metadata(position="middle"),
        400,
        "position: 'middle' is not accepted; accepted: last_token, mean, max",
    ),
    "unknown category": (
        lambda: linear_probe_bytes(),
        metadata(category="vibes"),
        400,
        "unknown category 'vibes'",
    ),
    "unknown base model": (
        lambda: linear_probe_bytes(),
        metadata(base_model="gpt-5"),
        400,
        "unknown base model 'gpt-5'",
    ),
    "metadata not JSON": (lambda: linear_probe_bytes(), "{name: oops", 400, "metadata: not valid JSON"),
    "no artifact": (lambda: None, metadata(), 400, "missing field(s): artifact"),
}


@pytest.mark.parametrize("case", list(BAD_UPLOADS), ids=list(BAD_UPLOADS))
def test_a_bad_upload_is_rejected_with_its_message(api, nothing_left_behind, case):
    make, meta, code, message = BAD_UPLOADS[case]
    response = post(api, make(), meta)
    assert response.status_code == code, response.content
    assert message in response.json()["error"]


def test_an_oversize_artifact_is_413(api, settings, nothing_left_behind):
    settings.MAX_ARTIFACT_BYTES = 1024
    response = post(api, linear_probe_bytes(), metadata())
    assert response.status_code == 413
    assert "limit is 1024 bytes" in response.json()["error"]


def test_a_duplicate_artifact_is_409_pointing_at_the_existing_probe(api):
    data = linear_probe_bytes(seed=7)
    first = post(api, data, metadata())
    assert first.status_code == 201, first.content
    counts = (ProbeVersion.objects.count(), Submission.objects.count(), len(stored_files()))
    second = post(api, data, metadata(name="The same bytes again"))
    assert second.status_code == 409
    body = second.json()
    assert "already submitted" in body["error"] and body["existing_probe"] == "a-test-probe"
    assert (ProbeVersion.objects.count(), Submission.objects.count(), len(stored_files())) == counts


def test_an_unauthenticated_submit_is_401(registry):
    response = post(APIClient(), linear_probe_bytes(), metadata())
    assert response.status_code == 401


def test_a_good_upload_is_201_and_queued_with_its_runs(api):
    files_before = len(stored_files())
    response = post(api, linear_probe_bytes(seed=3), metadata())
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "queued" and body["url"].endswith(f"/api/v1/submissions/{body['id']}")
    sub = Submission.objects.get(pk=body["id"])
    assert sub.runs.filter(kind="score", split="test").exists()
    assert len(stored_files()) == files_before + 1


def test_a_max_pooled_probe_is_accepted_and_its_version_reads_max(api):
    response = post(api, linear_probe_bytes(seed=5), metadata(position="max"))
    assert response.status_code == 201, response.content
    version = Submission.objects.get(pk=response.json()["id"]).probe_version
    assert version.position == ProbeVersion.Position.MAX == "max"


def test_another_users_submission_is_404(api, stranger):
    sub_id = post(api, linear_probe_bytes(seed=4), metadata()).json()["id"]
    client = APIClient()
    client.force_authenticate(stranger)
    assert client.get(f"/api/v1/submissions/{sub_id}").status_code == 404
    assert api.get(f"/api/v1/submissions/{sub_id}").status_code == 200
    assert client.get("/api/v1/submissions").json()["count"] == 0
    assert api.get("/api/v1/submissions").json()["count"] == 1
