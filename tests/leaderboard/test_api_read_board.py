"""GET /api/v1/leaderboard: rows with every component, badges and intervals; filters, spec, compare."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluator.data.registry.weights import COMPONENTS
from tests.factories import LeakageRecordFactory
from tests.leaderboard.board_data import (
    MODEL_B,
    add_spec,
    ensure_models,
    ensure_tasks,
    public_probe,
    score_for,
)

URL = "/api/v1/leaderboard"


@pytest.fixture
def board(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 2)
    strong = public_probe(
        slug="strong",
        name="Strong Probe",
        auroc=0.93,
        auroc_ea=0.9,
        auroc_ds=0.85,
        rho_ce=0.7,
        tasks=tasks,
        reproduced=True,
    )
    middle = public_probe(slug="middle", name="Middle Probe", auroc=0.85, tasks=tasks, license="MIT")
    weak = public_probe(
        slug="weak",
        name="Weak Probe",
        auroc=0.70,
        latency_ms=1.0,
        tasks=tasks,
        base_model=MODEL_B,
        authors=["Grace Hopper"],
    )
    public_probe(slug="ea", name="EA Probe", category="eval_awareness")
    public_probe(slug="rejected", name="Rejected Probe", status="rejected")
    return {"strong": strong, "middle": middle, "weak": weak, "tasks": tasks}


def rows(client, **params):
    response = client.get(URL, params)
    assert response.status_code == 200, response.content
    return response.json()


def test_the_route_is_under_v1():
    assert reverse("api:leaderboard") == URL


def test_rows_carry_every_component_badges_and_intervals(client, board):
    data = rows(client, category="hallucination")
    # the newest weights spec is the board's default
    assert data["spec"] == "v0.0.3" and data["category"] == "hallucination" and data["count"] == 3
    assert data["weights"]["auroc"] == 0.25
    assert [r["probe"] for r in data["results"]] == ["strong", "middle", "weak"]
    first = data["results"][0]
    assert first["rank"] == 1 and first["version"] == 1 and first["url"] == "/probes/strong/"
    score = board["strong"].scores.get(spec="v0.0.3")
    assert first["total"] == pytest.approx(score.total)
    assert set(first["components"]) == set(COMPONENTS)
    for name in COMPONENTS:
        stored, shown = score.components[name], first["components"][name]
        for key in ("value", "weight", "contribution", "imputed", "raw", "note"):
            assert shown[key] == stored[key], (name, key)
    assert first["auroc_ci"] == pytest.approx([0.9, 0.96]) and first["auroc_ci_kind"] == "mean-of-tasks"
    assert first["badges"]["reproduced"] is True and first["badges"]["leakage"] is False
    middle = data["results"][1]
    assert middle["components"]["auroc_ea"]["imputed"] is True
    assert "0.85" in middle["components"]["auroc_ea"]["note"]


def test_rejected_and_other_categories_are_not_listed(client, board):
    everything = rows(client)
    slugs = {r["probe"] for r in everything["results"]}
    assert slugs == {"strong", "middle", "weak", "ea"}
    ea = next(r for r in everything["results"] if r["probe"] == "ea")
    assert ea["components"]["auroc_ea"]["note"].startswith("n/a")


def test_filters_and_sort(client, board):
    assert [r["probe"] for r in rows(client, category="hallucination", model=MODEL_B)["results"]] == ["weak"]
    assert [r["probe"] for r in rows(client, category="hallucination", license="MIT")["results"]] == [
        "middle"
    ]
    assert [r["probe"] for r in rows(client, q="hopper")["results"]] == ["weak"]
    by_latency = rows(client, category="hallucination", sort="latency")["results"]
    assert by_latency[0]["probe"] == "weak"
    asc = rows(client, category="hallucination", sort="auroc", dir="asc")
    assert [r["probe"] for r in asc["results"]] == ["weak", "middle", "strong"] and asc["dir"] == "asc"


def test_status_filter_and_deprecated_entries(client, board):
    probe = board["middle"].probe
    probe.status, probe.deprecated_reason = "deprecated", "dropped 11 points"
    probe.save()
    data = rows(client, category="hallucination")
    assert [r["probe"] for r in data["results"]] == ["strong", "weak", "middle"]
    middle = data["results"][-1]
    assert middle["rank"] is None and middle["badges"]["deprecated"] is True
    assert middle["badges"]["deprecated_reason"] == "dropped 11 points"
    assert [r["probe"] for r in rows(client, category="hallucination", status="active")["results"]] == [
        "strong",
        "weak",
    ]


def test_confirmed_leakage_and_declared_gaps_are_badges(client, board):
    LeakageRecordFactory(probe=board["weak"].probe, status="confirmed")
    v = board["middle"]
    v.declared_gaps = {
        "auroc": {"declared": 0.95, "measured": 0.85, "gap": -0.1, "flagged": True},
        "ece": {"declared": 0.05, "measured": 0.05, "gap": 0.0, "flagged": False},
    }
    v.save()
    data = {r["probe"]: r for r in rows(client, category="hallucination")["results"]}
    assert data["weak"]["badges"]["leakage"] is True and data["strong"]["badges"]["leakage"] is False
    assert set(data["middle"]["badges"]["declared_gaps"]) == {"auroc"}


def test_measured_only(client, board):
    data = rows(client, category="hallucination", measured_only="true")
    assert data["measured_only"] is True
    totals = [r["measured_total"] for r in data["results"]]
    assert totals == sorted(totals, reverse=True)


def test_spec_and_compare(client, board):
    add_spec(
        "v0.0.9",
        auroc=0.10,
        auroc_ea=0.10,
        auroc_ds=0.10,
        calibration=0.10,
        rho_ce=0.10,
        latency=0.30,
        license=0.20,
    )
    for key in ("strong", "middle", "weak"):
        m = board[key].scores.get(spec="v0.0.2").measurements
        score_for(
            board[key],
            spec="v0.0.9",
            auroc=m["auroc"],
            latency_ms=m["latency_ms"],
            auroc_ea=m.get("auroc_ea"),
            auroc_ds=m.get("auroc_ds"),
            rho_ce=m.get("rho_ce"),
            tasks=board["tasks"],
        )
    latest = rows(client, category="hallucination")
    assert latest["spec"] == "v0.0.9" and latest["weights"]["latency"] == 0.30
    data = rows(client, category="hallucination", spec="v0.0.9", compare="v0.0.1")
    assert data["compare"] == "v0.0.1"
    weak = next(r for r in data["results"] if r["probe"] == "weak")
    assert weak["rank"] == 1 and weak["compare_rank"] == 3 and weak["rank_change"] == 2
    assert weak["compare_total"] == pytest.approx(board["weak"].scores.get(spec="v0.0.1").total)
    assert weak["total"] == pytest.approx(board["weak"].scores.get(spec="v0.0.9").total)


def test_bad_parameters_are_400_with_the_accepted_values(client, board):
    response = client.get(URL, {"spec": "v9"})
    assert response.status_code == 400
    assert response.json()["field"] == "spec" and "v0.0.1" in response.json()["error"]
    for param, value in (("sort", "nope"), ("measured_only", "maybe"), ("category", "nope")):
        response = client.get(URL, {param: value})
        assert response.status_code == 400
        assert response.json()["field"] == param and value in response.json()["error"]


def test_pagination(client, board):
    data = rows(client, category="hallucination", limit=2)
    assert data["count"] == 3 and len(data["results"]) == 2 and data["next"]
    rest = client.get(data["next"]).json()
    assert [r["probe"] for r in rest["results"]] == ["weak"] and rest["results"][0]["rank"] == 3


def test_cache_headers_and_etag(client, board):
    response = client.get(URL, {"category": "hallucination"})
    assert "public" in response["Cache-Control"] and "max-age" in response["Cache-Control"]
    assert (
        client.get(URL, {"category": "hallucination"}, HTTP_IF_NONE_MATCH=response["ETag"]).status_code == 304
    )


def _queries(client, params) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(URL, params).status_code == 200
    return len(ctx.captured_queries)


def test_a_constant_number_of_queries(client, registry, django_assert_max_num_queries):
    ensure_models()
    tasks = ensure_tasks("hallucination", 2)
    params = {"category": "hallucination", "compare": "v0.0.1", "limit": 1000}
    search = params | {"q": "bulk", "sort": "auroc"}
    for i in range(5):
        public_probe(slug=f"bulk-{i}", auroc=0.5 + i / 200, tasks=tasks)
    few, few_search = _queries(client, params), _queries(client, search)
    for i in range(5, 50):
        public_probe(slug=f"bulk-{i}", auroc=0.5 + i / 200, tasks=tasks)
    assert _queries(client, params) == few
    assert _queries(client, search) == few_search
    with django_assert_max_num_queries(few):
        client.get(URL, params)
