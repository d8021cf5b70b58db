"""A NUL (0x00) character in a query parameter is a 400 that names the parameter, on every page
and endpoint (PostgreSQL refuses NUL in text: before this check, a board filter holding one was a
server error there, found by the API fuzz test)."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/leaderboard.json",
        "/api/v1/leaderboard.csv",
        "/api/v1/leaderboard",
        "/api/v1/tasks",
        "/category/hallucination/",
        "/",
    ],
)
@pytest.mark.parametrize("params", [{"category": "halluc\x00ination"}, {"q": "\x00"}, {"x\x00y": "1"}])
def test_a_nul_character_in_a_query_parameter_is_a_clear_400(registry, client, url, params):
    name = next(iter(params)).replace("\x00", "\\x00")
    response = client.get(url, params)
    assert response.status_code == 400
    if url.startswith("/api/"):
        assert response["Content-Type"].startswith("application/json")
        body = response.json()
        assert body["field"] == name
        message = body["error"]
    else:
        message = response.content.decode()
    assert f"query parameter {name!r} contains a NUL (0x00) character" in message


def test_parameters_without_nul_are_untouched(registry, client):
    assert client.get("/api/v1/leaderboard.json", {"category": "hallucination"}).status_code == 200
