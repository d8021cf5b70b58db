"""CSV and JSON exports of the board: they parse, and they match the API row for row."""

import csv
import io
import json

import pytest

from evaluator.registry import COMPONENTS
from tests.factories import LeakageRecordFactory
from tests.leaderboard.board_data import add_spec, ensure_models, ensure_tasks, public_probe, score_for


@pytest.fixture
def board(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 2)
    versions = [
        public_probe(
            slug="alpha",
            name='Alpha, "quoted" probe',
            auroc=0.91,
            auroc_ea=0.88,
            tasks=tasks,
            authors=["Ada Lovelace", "Grace Hopper"],
            reproduced=True,
            declared_gaps={"auroc": {"declared": 0.99, "measured": 0.91, "gap": -0.08}},
        ),
        public_probe(slug="beta", name="Beta\nprobe", auroc=0.83, tasks=tasks, license="closed"),
        public_probe(slug="gamma", name="Gamma", auroc=0.75, tasks=tasks, license="MIT"),
    ]
    LeakageRecordFactory(probe=versions[2].probe, status="confirmed")
    return versions


def api_rows(client, **params) -> dict:
    response = client.get("/api/v1/leaderboard", params | {"limit": 1000})
    assert response.status_code == 200
    return response.json()


def csv_rows(client, **params) -> list[dict]:
    response = client.get("/api/v1/leaderboard.csv", params)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"] and ".csv" in response["Content-Disposition"]
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def as_float(text: str) -> float | None:
    return float(text) if text != "" else None


def as_bool(text: str) -> bool | None:
    return {"true": True, "false": False, "": None}[text]


@pytest.mark.parametrize(
    "params", [{"category": "hallucination"}, {}, {"measured_only": "1", "sort": "auroc"}]
)
def test_csv_parses_and_matches_the_api(client, board, params):
    api = api_rows(client, **params)
    records = csv_rows(client, **params)
    assert len(records) == api["count"] == len(api["results"])
    for rec, row in zip(records, api["results"], strict=True):
        assert rec["probe"] == row["probe"] and rec["name"] == row["name"]
        assert rec["spec"] == api["spec"]
        assert (int(rec["rank"]) if rec["rank"] else None) == row["rank"]
        assert as_float(rec["total"]) == row["total"]
        assert as_float(rec["measured_total"]) == row["measured_total"]
        assert rec["authors"] == "; ".join(row["authors"])
        assert [as_float(rec["auroc_ci_lo"]), as_float(rec["auroc_ci_hi"])] == (
            row["auroc_ci"] or [None, None]
        )
        for name in COMPONENTS:
            comp = row["components"][name]
            assert as_float(rec[f"{name}_value"]) == comp["value"]
            assert as_float(rec[f"{name}_weight"]) == comp["weight"]
            assert as_float(rec[f"{name}_contribution"]) == comp["contribution"]
            assert as_bool(rec[f"{name}_imputed"]) == comp["imputed"]
            assert as_float(rec[f"{name}_raw"]) == comp["raw"]
        badges = row["badges"]
        assert as_bool(rec["reproduced"]) == badges["reproduced"]
        assert as_bool(rec["leakage"]) == badges["leakage"]
        assert as_bool(rec["deprecated"]) == badges["deprecated"]
        assert int(rec["stability_quarters"]) == badges["stability_quarters"]
        assert (json.loads(rec["declared_gaps"]) if rec["declared_gaps"] else {}) == badges["declared_gaps"]
        assert rec["url"] == row["url"]


def test_csv_quotes_awkward_names(client, board):
    names = [r["name"] for r in csv_rows(client, category="hallucination")]
    assert 'Alpha, "quoted" probe' in names and "Beta\nprobe" in names


def test_csv_with_a_compared_spec(client, board):
    add_spec("v0.0.2")
    for v in board:
        score_for(v, spec="v0.0.2", auroc=v.scores.get().measurements["auroc"])
    records = csv_rows(client, category="hallucination", spec="v0.0.2", compare="v0.0.1")
    api = api_rows(client, category="hallucination", spec="v0.0.2", compare="v0.0.1")
    assert {r["compare_spec"] for r in records} == {"v0.0.1"}
    assert [(r["probe"], int(r["compare_rank"])) for r in records] == [
        (r["probe"], r["compare_rank"]) for r in api["results"]
    ]


def test_json_export_is_the_whole_board(client, board):
    response = client.get("/api/v1/leaderboard.json", {"category": "hallucination"})
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")
    assert "attachment" in response["Content-Disposition"]
    export = response.json()
    api = api_rows(client, category="hallucination")
    assert export["results"] == api["results"]
    assert export["count"] == 3 and export["next"] is None


def test_an_empty_board_exports_a_header(client, registry):
    response = client.get("/api/v1/leaderboard.csv", {"category": "refusal"})
    lines = response.content.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spec,rank,probe,name")


def test_exports_are_cacheable(client, board):
    response = client.get("/api/v1/leaderboard.csv")
    assert "public" in response["Cache-Control"]
    assert client.get("/api/v1/leaderboard.csv", HTTP_IF_NONE_MATCH=response["ETag"]).status_code == 304
