"""A hostile JSON text costs linear time wherever the site reads JSON, and the depth check stays exact.

The depth scan removed strings with a regular expression that, on an unterminated string of escaped
quotes (``'"' + '\\"' * N``), tried every quote as a string start and scanned to the end from each:
quadratic, holding the GIL (32 KB of metadata took 12 s; 96 KB got a gunicorn worker killed). Each
shape below is 1 MB and must be refused or parsed in well under a second of this process's CPU time
(CPU time, so that a busy machine does not make the test flaky), through the scan itself and through
every way a text reaches it: the metadata and recipe fields of the API, the web form's recipe, a
safetensors header and a JSON request body.
"""

from __future__ import annotations

import contextlib
import json
import struct
import time
from collections.abc import Callable

import pytest

from evaluator.strict_json import JsonRejected, _depth, json_loads_strict

MB = 1 << 20
#: Well under a second; the old scan took hours on the first shape.
BUDGET_S = 0.5

HOSTILE = {
    "an unterminated string of escaped quotes": b'"' + b'\\"' * (MB // 2),
    "a list holding one unterminated string of escaped quotes": b'["' + b'\\"' * (MB // 2),
    "a run of backslashes": b'"' + b"\\" * MB,
    "a run of backslashes before a quote": b'["' + b"\\" * (MB - 1) + b'"]',
    "many escaped backslashes, then a quote": b'["' + b"\\\\" * (MB // 2) + b'"]',
    "quotes only": b'"' * MB,
    "an unterminated string of brackets": b'"' + b"[" * MB,
    "deep nesting outside strings": b"[" * MB + b"]" * MB,
    "deep nesting inside a string": b'["' + b"[{" * (MB // 2) + b'"]',
    "alternating escaped quotes and brackets": b'["' + b'\\"[' * (MB // 3),
}


def _cpu_seconds(call: Callable[[], object]) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def _parse_or_refuse(raw: bytes, *, max_bytes: int = 4 * MB, max_depth: int = 8) -> None:
    with contextlib.suppress(JsonRejected):
        json_loads_strict(raw, max_bytes=max_bytes, max_depth=max_depth)


@pytest.mark.parametrize("shape", list(HOSTILE))
def test_a_hostile_megabyte_is_refused_or_parsed_in_well_under_a_second(shape):
    raw = HOSTILE[shape]
    assert len(raw) >= MB - 4
    assert _cpu_seconds(lambda: _parse_or_refuse(raw)) < BUDGET_S


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        (rb'["\\"]', 1),  # an escaped backslash, then the closing quote
        (rb'["\\", ["a"]]', 2),
        (rb'["\""]', 1),  # an escaped quote does not close the string
        (rb'["\\\"[", [[]]]', 3),  # backslash, escaped quote, bracket: all inside the string
        (rb'{"a": "[[[{{"}', 1),
        (rb'[ "]" , [ "[" ] ]', 2),
        (rb'{"k\\": [[1]]}', 3),  # a key ending in an escaped backslash
        (rb'"\\\\\\\\"', 0),
        (b"[]", 1),
        (b"", 0),
    ],
)
def test_the_depth_is_exact_on_escapes_and_brackets_inside_strings(text, depth):
    assert _depth(text) == depth
    if text:
        assert json.loads(text) is not None


def test_a_valid_megabyte_of_escapes_parses_to_what_it_says():
    text = json.dumps({"a": ['"\\' * (MB // 6), "[{"]})
    value = json_loads_strict(text, max_bytes=4 * MB, max_depth=2)
    assert value["a"][0] == '"\\' * (MB // 6)


# --------------------------------------------------------------------------- entry points


ESCAPED_QUOTES = '"' + '\\"' * (MB // 2)


def _timed_answer(send: Callable[[str], object]):
    """Send a harmless text first (the first request of a process imports and compiles what it
    needs), then the hostile one; return its answer and the CPU seconds it took."""
    send("[]")
    answer: dict = {}
    seconds = _cpu_seconds(lambda: answer.setdefault("r", send(ESCAPED_QUOTES)))
    return answer["r"], seconds


@pytest.fixture
def api(registry, researcher):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user=researcher)
    return client


def _multipart(api, **fields):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.leaderboard.test_submission_validation import linear_probe_bytes

    data = {"artifact": SimpleUploadedFile("p.safetensors", linear_probe_bytes(seed=21)), **fields}
    return api.post("/api/v1/submissions", data, format="multipart")


@pytest.mark.django_db
def test_the_metadata_field_refuses_a_hostile_text_quickly(api):
    answer, seconds = _timed_answer(lambda text: _multipart(api, metadata=text))
    assert seconds < BUDGET_S
    assert answer.status_code == 400
    assert answer.json()["field"] == "metadata"


@pytest.mark.django_db
def test_the_recipe_field_refuses_a_hostile_text_quickly(api):
    from tests.leaderboard.test_submission_validation import metadata

    meta = json.dumps(metadata())
    answer, seconds = _timed_answer(lambda text: _multipart(api, metadata=meta, recipe=text))
    assert seconds < BUDGET_S
    assert answer.status_code == 400
    assert answer.json()["field"] == "recipe"


@pytest.mark.django_db
def test_the_web_form_refuses_a_hostile_recipe_quickly(client, registry, researcher):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.leaderboard.test_submission_validation import linear_probe_bytes

    client.force_login(researcher)

    def send(recipe: str):
        form = {
            "artifact": SimpleUploadedFile("p.safetensors", linear_probe_bytes(seed=22)),
            "name": "A hostile recipe",
            "category": "hallucination",
            "base_model": "smollm2-135m-instruct",
            "layer": 15,
            "position": "last_token",
            "input": "single",
            "output": "logit",
            "license": "MIT",
            "recipe": recipe,
        }
        return client.post("/submit/", form)

    answer, seconds = _timed_answer(send)
    assert seconds < BUDGET_S
    assert answer.status_code == 400
    assert "recipe: not valid JSON" in answer.content.decode()


@pytest.mark.django_db
def test_a_safetensors_header_refuses_a_hostile_text_quickly(api):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from evaluator.core.probes import MAX_HEADER_BYTES
    from tests.leaderboard.test_submission_validation import metadata

    def send(text: str):
        header = ('{"__metadata__": {"a": ' + text[: MAX_HEADER_BYTES - 32]).encode()
        artifact = struct.pack("<Q", len(header)) + header
        data = {"artifact": SimpleUploadedFile("p.safetensors", artifact), "metadata": json.dumps(metadata())}
        return api.post("/api/v1/submissions", data, format="multipart")

    answer, seconds = _timed_answer(send)
    assert seconds < BUDGET_S
    assert answer.status_code == 400
    assert answer.json()["field"] == "artifact"


@pytest.mark.django_db
def test_a_json_request_body_refuses_a_hostile_text_quickly(registry, maintainer):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user=maintainer)

    def send(text: str):
        body = '{"quarter": ' + text
        return client.post("/api/v1/maintainer/reevaluations", data=body, content_type="application/json")

    answer, seconds = _timed_answer(send)
    assert seconds < BUDGET_S
    assert answer.status_code == 400
    assert "JSON body refused" in answer.json()["error"]
