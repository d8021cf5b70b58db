"""The API keeps the contract its OpenAPI schema states: an unknown path under /api/ answers the one
JSON error body (pages keep their HTML 404); ``limit`` and ``offset`` out of range or not integers
are a 400 naming the parameter; the submissions list is documented as the paginated object it
answers; each input constraint the server enforces is stated in the schema; every operation
documents the error statuses its view answers."""

from __future__ import annotations

import re

import pytest
from django.urls.converters import SlugConverter
from rest_framework.test import APIClient

from leaderboard.api.pagination import MAX_LIMIT, MAX_OFFSET
from leaderboard.inputs import MAX_VERSION
from tests.leaderboard.test_api_errors import assert_error_shape

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client):
    response = client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def parameter(schema: dict, path: str, name: str, method: str = "get") -> dict:
    found = [p for p in schema["paths"][path][method].get("parameters", []) if p["name"] == name]
    assert found, f"{method.upper()} {path} documents no parameter {name!r}"
    return found[0]


# --------------------------------------------------------------------------- unknown paths


UNKNOWN = [
    ("get", "/api/v1/no-such-endpoint"),
    ("post", "/api/v1/no-such-endpoint"),
    ("delete", "/api/v1/no-such-endpoint"),
    ("put", "/api/v1/submissions/1/cancel"),
    ("get", "/api/v1/categories/"),  # the routes have no trailing slash
    ("get", "/api/v1/probes/not%20a%20slug"),  # the slug converter does not match
    ("get", "/api/v1/submissions/-1"),  # nor the int converter
    ("get", "/api/v2/leaderboard"),
    ("get", "/api/no-such-thing/"),
]


def test_an_unknown_api_path_is_a_json_404_whatever_the_method(registry, researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    for method, path in UNKNOWN:
        response = getattr(client, method)(path)
        body = assert_error_shape(response, 404)
        assert body["field"] is None
        assert method.upper() in body["error"] and "/api/docs/" in body["error"], body


def test_pages_keep_their_html_404_and_the_api_its_slash_redirects(registry, client):
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
    assert "<h1>Page not found</h1>" in page.content.decode()
    redirect = client.get("/api/schema")
    assert redirect.status_code == 301 and redirect["Location"] == "/api/schema/"


# --------------------------------------------------------------------------- limit and offset

LIMIT_ERROR = f"limit: must be an integer between 1 and {MAX_LIMIT}"
OFFSET_ERROR = f"offset: must be an integer between 0 and {MAX_OFFSET}"
BAD_LIMITS = ["abc", "", "0", "-1", "1.5", " 5", "\u00b2", str(MAX_LIMIT + 1), "99999999999999999999"]
BAD_OFFSETS = ["abc", "", "-1", "1e3", "null", str(MAX_OFFSET + 1), "9" * 40]


def paginated_client(researcher) -> APIClient:
    client = APIClient()
    client.force_authenticate(researcher)
    return client


@pytest.mark.parametrize("path", ["/api/v1/leaderboard", "/api/v1/submissions"])
def test_a_limit_or_offset_not_an_integer_in_range_is_a_400_naming_it(registry, researcher, path):
    client = paginated_client(researcher)
    for value in BAD_LIMITS:
        response = client.get(path, {"limit": value})
        assert assert_error_shape(response, 400) == {"error": LIMIT_ERROR, "field": "limit"}, value
    for value in BAD_OFFSETS:
        response = client.get(path, {"offset": value})
        assert assert_error_shape(response, 400) == {"error": OFFSET_ERROR, "field": "offset"}, value


@pytest.mark.parametrize("path", ["/api/v1/leaderboard", "/api/v1/submissions"])
def test_a_repeated_parameter_is_checked_in_each_value(registry, researcher, path):
    response = paginated_client(researcher).get(f"{path}?offset=null&offset=0")
    assert assert_error_shape(response, 400)["field"] == "offset"


@pytest.mark.parametrize("path", ["/api/v1/leaderboard", "/api/v1/submissions"])
def test_the_bounds_themselves_are_accepted(registry, researcher, path):
    client = paginated_client(researcher)
    for params in ({"limit": 1}, {"limit": MAX_LIMIT}, {"offset": 0}, {"offset": MAX_OFFSET}, {}):
        response = client.get(path, params)
        assert response.status_code == 200, (params, response.content[:300])
        assert isinstance(response.json()["results"], list)


# --------------------------------------------------------------------------- the submissions list


def test_the_submissions_list_is_documented_as_the_paginated_object_it_answers(registry, researcher, schema):
    ok = schema["paths"]["/api/v1/submissions"]["get"]["responses"]["200"]
    ref = ok["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    page = schema["components"]["schemas"][ref]
    assert page["type"] == "object"
    assert set(page["properties"]) == {"count", "next", "previous", "results"}
    assert page["properties"]["results"]["type"] == "array"
    assert page["properties"]["results"]["items"]["$ref"].endswith("/SubmissionOutput")

    answered = paginated_client(researcher).get("/api/v1/submissions").json()
    assert set(answered) == set(page["properties"])


# --------------------------------------------------------------------------- constraints in the schema


def test_the_schema_states_the_constraints_the_server_enforces(schema):
    slug = parameter(schema, "/api/v1/probes/{slug}", "slug")["schema"]
    assert slug["pattern"] == f"^{SlugConverter.regex}$"
    version = parameter(schema, "/api/v1/probes/{slug}", "version")["schema"]
    assert (version["type"], version["minimum"], version["maximum"]) == ("integer", 1, MAX_VERSION)

    submission_id = parameter(schema, "/api/v1/submissions/{id}", "id")["schema"]
    assert (submission_id["type"], submission_id["minimum"]) == ("integer", 1)
    probe = parameter(schema, "/api/v1/submissions", "probe")["schema"]
    assert re.fullmatch(probe["pattern"], "my-probe.v2_x") and not re.fullmatch(probe["pattern"], "a b")

    for path in ("/api/v1/leaderboard", "/api/v1/submissions"):
        limit = parameter(schema, path, "limit")["schema"]
        assert (limit["type"], limit["minimum"], limit["maximum"]) == ("integer", 1, MAX_LIMIT)
        offset = parameter(schema, path, "offset")["schema"]
        assert (offset["type"], offset["minimum"], offset["maximum"]) == ("integer", 0, MAX_OFFSET)

    for path in ("/api/v1/leaderboard", "/api/v1/leaderboard.csv", "/api/v1/leaderboard.json"):
        assert set(parameter(schema, path, "status")["schema"]["enum"]) == {"", "active", "deprecated"}
        assert set(parameter(schema, path, "dir")["schema"]["enum"]) == {"", "asc", "desc"}
        assert "score" in parameter(schema, path, "sort")["schema"]["enum"]

    for name in ("a", "b"):
        side = parameter(schema, "/api/v1/compare", name)
        assert side["required"] and side["schema"]["minLength"] == 1

    body = schema["components"]["schemas"]["SubmissionInputRequest"]
    assert set(body["required"]) == {"artifact", "metadata"}
    quarter = schema["paths"]["/api/v1/maintainer/reevaluations"]["post"]["requestBody"]
    ref = quarter["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert schema["components"]["schemas"][ref]["properties"]["quarter"]["pattern"] == r"^20\d\dQ[1-4]$"


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/v1/probes/some-probe", {"version": "0x1"}, "version"),
        ("/api/v1/probes/some-probe", {"version": "\u00b2"}, "version"),  # a digit to str.isdigit()
        ("/api/v1/probes/some-probe", {"version": str(MAX_VERSION + 1)}, "version"),
        ("/api/v1/submissions", {"probe": "a b"}, "probe"),
        ("/api/v1/submissions", {"probe": "x" * 201}, "probe"),
        ("/api/v1/compare", {"a": "", "b": "x"}, "a"),
        ("/api/v1/leaderboard", {"status": "gone"}, "status"),
    ],
)
def test_input_outside_the_stated_constraints_is_a_400_naming_the_field(
    registry, researcher, path, params, field
):
    response = paginated_client(researcher).get(path, params)
    assert assert_error_shape(response, 400)["field"] == field


def test_the_probe_page_answers_a_non_ascii_digit_version_with_its_404(registry, client):
    # the page reads its query with the API's parser; int() refuses what str.isdigit() takes
    response = client.get("/probes/some-probe/", {"version": "\u00b2"})
    assert response.status_code == 404
    assert "<h1>Page not found</h1>" in response.content.decode()


# --------------------------------------------------------------------------- documented statuses


def _documented(schema: dict, path: str, method: str) -> dict:
    return schema["paths"][path][method]["responses"]


@pytest.mark.parametrize(
    ("method", "path", "codes"),
    [
        ("get", "/api/v1/leaderboard", {"400", "406", "429"}),
        ("get", "/api/v1/probes/{slug}", {"400", "404", "406", "429"}),
        ("get", "/api/v1/compare", {"400", "404", "406", "429"}),
        ("get", "/api/v1/submissions", {"400", "401", "406"}),
        ("get", "/api/v1/submissions/{id}", {"400", "401", "404", "406", "429"}),
        ("post", "/api/v1/submissions", {"400", "401", "403", "406", "409", "413", "415", "429"}),
        ("post", "/api/v1/maintainer/reevaluations", {"400", "401", "403", "409", "413", "415", "429"}),
    ],
)
def test_each_operation_documents_the_error_statuses_it_answers(schema, method, path, codes):
    responses = _documented(schema, path, method)
    assert codes <= set(responses), sorted(codes - set(responses))
    for code in codes:
        assert responses[code]["content"]["application/json"]["schema"]["$ref"].endswith("/Error"), code
    assert "Retry-After" in responses.get("429", {"headers": {"Retry-After": 1}})["headers"]


def test_a_public_read_documents_no_authentication_errors(schema):
    # the read endpoints authenticate nobody: 401 and 403 never come from them
    assert not {"401", "403"} & set(_documented(schema, "/api/v1/leaderboard", "get"))
