"""Every /api/v1 error has one shape, {"error": "<message>", "field": "<field or null>"}, from one
exception handler: bad input to every write endpoint, missing credentials, wrong permissions,
unknown resources, wrong methods and service conflicts all answer it with a 4xx."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from leaderboard.errors import Conflict

pytestmark = pytest.mark.django_db
WRITE_METHODS = ("post", "put", "patch", "delete")


def _walk(patterns, prefix=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p.callback


def write_endpoints() -> list[tuple[str, str]]:
    """(method, path) of every /api/v1 endpoint that accepts a write, found from the URL conf."""
    found = []
    for route, callback in _walk(get_resolver().url_patterns):
        view = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
        if not route.startswith("api/v1/") or view is None or "<" in route:
            continue
        found += [(m, "/" + route) for m in WRITE_METHODS if hasattr(view, m)]
    return sorted(found)


def assert_error_shape(response, status: int | tuple[int, ...]) -> dict:
    codes = (status,) if isinstance(status, int) else status
    assert response.status_code in codes, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert {"error", "field"} <= set(body), body
    assert isinstance(body["error"], str) and body["error"].strip(), body
    assert body["field"] is None or isinstance(body["field"], str), body
    return body


def client_for(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def test_the_write_endpoints_are_found():
    endpoints = write_endpoints()
    assert ("post", "/api/v1/submissions") in endpoints
    assert ("post", "/api/v1/maintainer/reevaluations") in endpoints


@pytest.mark.parametrize(("method", "path"), write_endpoints())
def test_bad_input_to_every_write_endpoint_is_a_400_naming_the_field(registry, maintainer, method, path):
    response = getattr(client_for(maintainer), method)(path, {"unexpected": "\u2603"}, format="multipart")
    body = assert_error_shape(response, 400)
    assert body["field"], body  # the input serializer names what was missing or wrong


@pytest.mark.parametrize(("method", "path"), write_endpoints())
def test_every_write_endpoint_refuses_an_anonymous_caller_in_the_same_shape(registry, method, path):
    response = getattr(client_for(), method)(path, {}, format="multipart")
    body = assert_error_shape(response, 401)
    assert body["field"] is None
    assert response.has_header("WWW-Authenticate")


def test_each_write_endpoints_own_errors_have_the_shape(registry, researcher, maintainer):
    submit = client_for(researcher).post(
        "/api/v1/submissions", {"artifact": "not a file", "metadata": "{}"}, format="multipart"
    )
    body = assert_error_shape(submit, 400)
    assert body == {"error": "artifact: must be an uploaded file (multipart)", "field": "artifact"}

    missing = assert_error_shape(
        client_for(researcher).post("/api/v1/submissions", {}, format="multipart"), 400
    )
    assert missing["field"] == "artifact" and "missing field(s): artifact, metadata" in missing["error"]

    forbidden = client_for(researcher).post("/api/v1/maintainer/reevaluations", {"quarter": "2026Q4"})
    assert assert_error_shape(forbidden, 403)["field"] is None

    malformed = client_for(maintainer).post("/api/v1/maintainer/reevaluations", {"quarter": "2026-Q4"})
    assert assert_error_shape(malformed, 400) == {
        "error": "quarter: must look like 2026Q4",
        "field": "quarter",
    }


def test_a_service_error_keeps_its_status_field_and_extra_keys(registry, maintainer, monkeypatch):
    def refuse(**kwargs):
        raise Conflict("a cycle is running", field="quarter", extra={"url": "/reevaluations/2026Q3/"})

    monkeypatch.setattr("leaderboard.api.maintainers.reevaluation_start", refuse)
    response = client_for(maintainer).post("/api/v1/maintainer/reevaluations", {"quarter": "2026Q4"})
    body = assert_error_shape(response, 409)
    assert body == {"error": "a cycle is running", "field": "quarter", "url": "/reevaluations/2026Q3/"}


@pytest.mark.parametrize(
    ("method", "path", "params", "status", "field"),
    [
        ("get", "/api/v1/leaderboard", {"sort": "nope"}, 400, "sort"),
        ("get", "/api/v1/leaderboard", {"spec": "v9"}, 400, "spec"),
        ("get", "/api/v1/probes/no-such-probe", {}, 404, None),
        ("get", "/api/v1/reevaluations/1999Q1", {}, 404, None),
        ("get", "/api/v1/submissions/999999", {}, 401, None),
        ("post", "/api/v1/leaderboard", {}, 405, None),
        ("delete", "/api/v1/probes/no-such-probe", {}, 405, None),
    ],
)
def test_read_endpoints_answer_errors_in_the_same_shape(registry, method, path, params, status, field):
    response = getattr(client_for(), method)(path, params)
    assert assert_error_shape(response, status)["field"] == field


def test_a_missing_submission_is_a_404_in_the_same_shape(registry, researcher):
    response = client_for(researcher).get("/api/v1/submissions/999999")
    assert assert_error_shape(response, 404) == {"error": "no such submission", "field": None}


def test_the_schema_documents_the_error_body_on_every_operation(registry, client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    error = schema["components"]["schemas"]["Error"]
    assert {"error", "field"} <= set(error["properties"])
    operations = [
        (path, op)
        for path, ops in schema["paths"].items()
        if path.startswith("/api/v1/")
        for op in ops.values()
    ]
    assert len(operations) >= 10
    for path, op in operations:
        assert "4XX" in op["responses"], path
        assert op["responses"]["4XX"]["content"]["application/json"]["schema"]["$ref"].endswith("/Error")
