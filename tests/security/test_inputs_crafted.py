"""Crafted inputs get a 4xx that names the offending field and says what is accepted, never a server
error, and leave nothing behind (no probe, version, submission or run row, no stored file).

Each case was a server error or a silent acceptance before: malformed safetensors headers, files the
official safetensors library refuses, deeply nested or huge JSON, NaN/Infinity, NUL and control
characters in text, a URL longer than its column, unbounded recipe hyperparameters.
"""

import json
import struct

import numpy as np
import pytest
from rest_framework.test import APIClient

from leaderboard.models import Probe
from tests.leaderboard.test_submission_validation import (
    D_MODEL,
    linear_probe_bytes,
    metadata,
    nothing_left_behind,  # noqa: F401 - fixture
    post,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(registry, researcher):
    """The researcher's API client (how a token authenticates is not what these tests are about)."""
    client = APIClient()
    client.force_authenticate(user=researcher)
    return client


def safetensors_bytes(header: dict | bytes, data: bytes) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


WEIGHT = np.ones(D_MODEL, dtype=np.float32).tobytes()
N = len(WEIGHT)

CRAFTED_ARTIFACTS = {
    "a dtype that is not a string": (
        safetensors_bytes({"weight": {"dtype": ["F32"], "shape": [D_MODEL], "data_offsets": [0, N]}}, WEIGHT),
        "dtype",
    ),
    "an absurd rank": (
        safetensors_bytes(
            {"weight": {"dtype": "F32", "shape": [1] * 100 + [D_MODEL], "data_offsets": [0, N]}}, WEIGHT
        ),
        "at most 4 dimensions",
    ),
    "an absurd dimension": (
        safetensors_bytes(
            {"weight": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, N]}}, WEIGHT
        ),
        "invalid shape",
    ),
    "a boolean dimension": (
        safetensors_bytes(
            {"weight": {"dtype": "F32", "shape": [True, D_MODEL], "data_offsets": [0, N]}}, WEIGHT
        ),
        "invalid shape",
    ),
    "a deeply nested header": (
        safetensors_bytes(
            b'{"weight": {"dtype": "F32", "shape": ' + b"[" * 50_000 + b"]" * 50_000 + b"}}", b""
        ),
        "nested",
    ),
    "deeply nested __metadata__": (
        safetensors_bytes(
            b'{"__metadata__": {"a": '
            + b"{" * 200
            + b"}" * 200
            + b'}, "weight": {"dtype": "F32", "shape": ['
            + str(D_MODEL).encode()
            + b'], "data_offsets": [0, '
            + str(N).encode()
            + b"]}}",
            WEIGHT,
        ),
        "nested",
    ),
    "NaN in the header": (
        safetensors_bytes(
            b'{"__metadata__": {"x": NaN}, "weight": {"dtype": "F32", "shape": [576], "data_offsets": [0, 2304]}}',
            WEIGHT,
        ),
        "NaN",
    ),
    "gapped offsets (refused by the safetensors library)": (
        safetensors_bytes(
            {
                "weight": {"dtype": "F32", "shape": [D_MODEL], "data_offsets": [0, N]},
                "bias": {"dtype": "F32", "shape": [], "data_offsets": [N + 4, N + 8]},
            },
            WEIGHT + b"\0" * 8,
        ),
        "safetensors library",
    ),
    "overlapping offsets (refused by the safetensors library)": (
        safetensors_bytes(
            {
                "weight": {"dtype": "F32", "shape": [D_MODEL], "data_offsets": [0, N]},
                "bias": {"dtype": "F32", "shape": [], "data_offsets": [N - 4, N]},
                "mean": {"dtype": "F32", "shape": [1], "data_offsets": [N, N + 4]},
            },
            WEIGHT + b"\0" * 4,
        ),
        "safetensors library",
    ),
}


@pytest.mark.usefixtures("nothing_left_behind")
@pytest.mark.parametrize("case", list(CRAFTED_ARTIFACTS))
def test_a_crafted_safetensors_file_is_a_400_naming_the_artifact(api, case):
    data, says = CRAFTED_ARTIFACTS[case]
    response = post(api, data, metadata())
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["field"] == "artifact"
    assert says in body["error"]


def _deep(n: int) -> str:
    return "[" * n + "]" * n


CRAFTED_METADATA = {
    "metadata nested 100 000 levels deep": (_deep(100_000), "metadata", "nested"),
    "metadata with a deeply nested field": (
        json.dumps(metadata()).replace('"authors": ["Ada"]', '"authors": ' + _deep(5000)),
        "metadata",
        "nested",
    ),
    "NaN where a number is expected": (
        json.dumps(metadata(declared_metrics={"auroc": 0.9})).replace("0.9", "NaN"),
        "metadata",
        "NaN",
    ),
    "Infinity where a number is expected": (
        json.dumps(metadata(declared_metrics={"auroc": 0.9})).replace("0.9", "-Infinity"),
        "metadata",
        "Infinity",
    ),
    "a number that overflows to infinity": (
        json.dumps(metadata(declared_metrics={"auroc": 0.9})).replace("0.9", "1e999"),
        "metadata",
        "out of range",
    ),
    "an integer of 10 000 digits": (
        json.dumps(metadata()).replace('"layer": 15', '"layer": ' + "9" * 10_000),
        "metadata",
        "digits",
    ),
    "a NUL character in the name": (json.dumps(metadata(name="nul\u0000name")), "metadata", "NUL"),
    "a NUL character in a key": (json.dumps({**metadata(), "x\u0000": 1}), "metadata", "NUL"),
    "an unpaired surrogate in the description": (
        json.dumps(metadata(description="\ud800 broken")),
        "metadata",
        "surrogate",
    ),
    "a control character in the name": (json.dumps(metadata(name="bell\u0007name")), "name", "U+0007"),
    "a right-to-left override in the name": (
        json.dumps(metadata(name="probe\u202egnp.exe")),
        "name",
        "U+202E",
    ),
    "a left-to-right mark in an author": (json.dumps(metadata(authors=["Ada\u200e"])), "authors", "U+200E"),
    "an isolate in the description": (
        json.dumps(metadata(description="a \u2066hidden\u2069 part")),
        "description",
        "U+2066",
    ),
    "a name that is not text": (json.dumps(metadata(name={"a": 1})), "name", "must be text"),
    "a name longer than its column": (json.dumps(metadata(name="n" * 161)), "name", "at most 160"),
    "a URL longer than its column": (
        json.dumps(metadata(paper_url="https://example.org/" + "a" * 600)),
        "paper_url",
        "at most 500",
    ),
}


@pytest.mark.usefixtures("nothing_left_behind")
@pytest.mark.parametrize("case", list(CRAFTED_METADATA))
def test_crafted_metadata_is_a_400_naming_the_field(api, case):
    text, field, says = CRAFTED_METADATA[case]
    response = post(api, linear_probe_bytes(seed=7), text)
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["field"] == field
    assert says in body["error"]


def test_a_name_is_stored_in_nfc(api):
    decomposed = "Cafe\u0301 probe"  # "é" as e + combining acute accent
    response = post(api, linear_probe_bytes(seed=8), metadata(name=decomposed))
    assert response.status_code == 201, response.content
    assert Probe.objects.get().name == "Caf\u00e9 probe"


RECIPE = {"method": "mlp", "task": "halueval-qa-v1", "layer": 15, "seed": 0}

CRAFTED_RECIPES = {
    "an MLP hidden size of a million": ({**RECIPE, "hyperparameters": {"hidden": 1_000_000}}, "1..512"),
    "an MLP of a million iterations": ({**RECIPE, "hyperparameters": {"max_iter": 1_000_000}}, "1..1000"),
    "a hidden size that is not an integer": ({**RECIPE, "hyperparameters": {"hidden": 32.5}}, "an integer"),
    "a C of zero": (
        {**RECIPE, "method": "logistic_regression", "hyperparameters": {"C": 0}},
        "a number in 1e-06..1e+06",
    ),
    "a negative learning rate": (
        {**RECIPE, "hyperparameters": {"learning_rate_init": -1}},
        "learning_rate_init",
    ),
    "a flag that is a string": ({**RECIPE, "hyperparameters": {"standardize": "yes"}}, "true or false"),
    "an unknown hyperparameter": ({**RECIPE, "hyperparameters": {"epochs": 10}}, "unknown hyperparameter"),
    "a seed past 2**32": ({**RECIPE, "seed": 2**40}, "seed"),
    "a layer that differs from the probe's": ({**RECIPE, "layer": 3}, "differs from the probe"),
    "an unknown field": ({**RECIPE, "epochs": 3}, "unknown field"),
}


@pytest.mark.usefixtures("nothing_left_behind")
@pytest.mark.parametrize("case", list(CRAFTED_RECIPES))
def test_a_recipe_the_worker_would_refuse_is_refused_at_submission(api, case):
    recipe, says = CRAFTED_RECIPES[case]
    response = post(api, linear_probe_bytes(seed=9), metadata(recipe=recipe))
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["field"] == "recipe"
    assert says in body["error"]


@pytest.mark.usefixtures("nothing_left_behind")
def test_a_deeply_nested_recipe_field_is_a_400(api):
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = api.post(
        "/api/v1/submissions",
        {
            "artifact": SimpleUploadedFile("p.safetensors", linear_probe_bytes(seed=10)),
            "metadata": json.dumps(metadata()),
            "recipe": _deep(100_000),
        },
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "recipe"
    assert "nested" in response.json()["error"]


def test_a_recipe_within_bounds_is_accepted(api):
    recipe = {**RECIPE, "hyperparameters": {"hidden": 64, "max_iter": 200, "alpha": 0.01}}
    assert post(api, linear_probe_bytes(seed=11), metadata(recipe=recipe)).status_code == 201


@pytest.mark.parametrize(
    "url", ["/reevaluations/2026%00Q1/", "/api/v1/reevaluations/2026%00Q1", "/probe/a%00b/", "/%00"]
)
def test_a_nul_character_in_the_url_path_is_a_400_naming_the_path(client, registry, url):
    response = client.get(url)
    assert response.status_code == 400
    if url.startswith("/api/"):
        assert response.json() == {
            "error": "the URL path contains a NUL (0x00) character; paths are plain text without control"
            " characters",
            "field": "path",
        }
    else:
        assert "NUL (0x00)" in response.content.decode()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested 100000 levels deep"),
        ('{"quarter": NaN}', "NaN is not a number JSON accepts"),
        ('{"quarter": "2026Q4\\u0000"}', "NUL"),
    ],
)
def test_a_crafted_json_body_is_a_400(registry, maintainer, body, says):
    client = APIClient()
    client.force_authenticate(user=maintainer)
    response = client.post("/api/v1/maintainer/reevaluations", data=body, content_type="application/json")
    assert response.status_code == 400
    assert says in response.json()["error"]
