"""The other read endpoints: categories, tasks, models, specs, probes, re-evaluations, leakage, queue,
and the OpenAPI schema that documents them."""

import pytest
import yaml
from django.urls import reverse

from leaderboard import models as m
from tests.factories import CycleResultFactory, LeakageRecordFactory, ReevaluationCycleFactory
from tests.leaderboard.board_data import board_owner, ensure_models, ensure_tasks, public_probe


@pytest.fixture
def data(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 2)
    v = public_probe(
        slug="halu",
        name="Halu Probe",
        tasks=tasks,
        auroc=0.84,
        recipe={"method": "diff_of_means", "task": tasks[0].slug},
        extra_measurements={"transfer": {"board-model-b": 0.3}},
    )
    hidden = public_probe(slug="hidden", name="Hidden", status="failed")
    cycle = ReevaluationCycleFactory(
        quarter="2026Q4",
        triggered_by=board_owner(),
        diff={"dropped": ["halu"]},
        holdouts={tasks[0].slug: {"rows": 100, "sha256": "cd" * 32, "ids": ["x-1"]}},
    )
    CycleResultFactory(
        cycle=cycle, probe_version=v, holdout_auroc=0.77, reference_auroc=0.84, outcome="dropped"
    )
    CycleResultFactory(cycle=cycle, probe_version=hidden, outcome="held")
    LeakageRecordFactory(
        probe=v.probe, status="confirmed", summary="trained on test", public_note="confirmed"
    )
    LeakageRecordFactory(probe=v.probe, status="open", summary="under review")
    return {"version": v, "tasks": tasks}


def get(client, name, *args, **params):
    response = client.get(reverse(f"api:{name}", args=args), params)
    assert response.status_code == 200, response.content
    assert "public" in response["Cache-Control"] and response.has_header("ETag")
    return response.json()


def test_categories(client, data):
    body = get(client, "categories")
    assert [c["slug"] for c in body] == list(
        m.Category.objects.order_by("order").values_list("slug", flat=True)
    )
    halu = next(c for c in body if c["slug"] == "hallucination")
    assert halu["n_probes"] == 1 and halu["n_tasks"] >= 2
    assert next(c for c in body if c["slug"] == "refusal")["n_probes"] == 0


def test_tasks_with_splits_and_a_category_filter(client, data):
    body = get(client, "tasks", category="hallucination")
    assert {t["category"] for t in body} == {"hallucination"}
    task = next(t for t in body if t["slug"] == data["tasks"][0].slug)
    assert {s["name"] for s in task["splits"]} == {"train", "test", "distshift", "holdout_pool"}
    assert all(len(s["sha256"]) == 64 for s in task["splits"])
    assert len(get(client, "tasks")) == m.Task.objects.count()


def test_models(client, data):
    body = {b["slug"]: b for b in get(client, "models")}
    assert body["board-model-a"]["n_probes"] == 1 and body["board-model-a"]["d_model"] == 576


def test_specs(client, data):
    body = get(client, "specs")
    assert body[0]["version"] == "v0.0.1" and body[0]["weights"]["auroc"] == 0.30


def test_probe_detail_with_per_task_results(client, data):
    body = get(client, "probe", "halu")
    assert body["slug"] == "halu" and body["spec"] == "v0.0.3" and body["versions"] == [1]
    assert body["score"]["total"] == pytest.approx(data["version"].scores.get(spec="v0.0.3").total)
    assert set(body["score"]["components"]) >= {"auroc", "license"}
    tasks = {t["task"]: t for t in body["tasks"]}
    assert set(tasks) == {t.slug for t in data["tasks"]}
    first = tasks[data["tasks"][0].slug]
    assert first["auroc"] == 0.84 and first["auroc_ci"] == pytest.approx([0.81, 0.87])
    assert first["roc"][0] == [0.0, 0.0] and len(first["reliability"]) == 10
    assert first["baselines"]["random_direction"] == 0.52
    assert body["transfer"][0]["model"] == "board-model-b"
    assert [r["summary"] for r in body["leakage"]] == ["trained on test"]
    assert body["history"][0]["quarter"] == "2026Q4" and body["history"][0]["outcome"] == "dropped"
    assert body["version"]["artifact_url"] == reverse("leaderboard:artifact", args=["halu", 1])
    assert body["version"]["recipe"]["method"] == "diff_of_means"


def test_probe_detail_404_and_400(client, data):
    assert client.get(reverse("api:probe", args=["hidden"])).status_code == 404
    assert client.get(reverse("api:probe", args=["nope"])).status_code == 404
    assert client.get(reverse("api:probe", args=["halu"]), {"spec": "v7"}).status_code == 400
    assert client.get(reverse("api:probe", args=["halu"]), {"version": "x"}).status_code == 400


def test_reevaluations_and_their_diff(client, data):
    index = get(client, "reevaluations")
    assert index[0]["quarter"] == "2026Q4" and index[0]["n_results"] == 1
    assert index[0]["outcome_counts"]["dropped"] == 1
    body = get(client, "reevaluation", "2026Q4")
    assert body["diff"] == {"dropped": ["halu"]}
    assert [r["probe"] for r in body["results"]] == ["halu"]  # the failed submission's result is not public
    holdout = body["holdouts"][data["tasks"][0].slug]
    assert holdout["sha256"] == "cd" * 32 and "ids" not in holdout
    assert client.get(reverse("api:reevaluation", args=["1999Q1"])).status_code == 404


def test_leakage(client, data):
    body = get(client, "leakage")
    assert [r["summary"] for r in body] == ["trained on test"]
    assert body[0]["probe_url"] == "/probes/halu/"


def test_queue_has_no_private_fields(client, data):
    v = public_probe(slug="waiting", name="Waiting", status="queued")
    v.submission.failure_reason = "PRIVATE"
    v.submission.save()
    body = get(client, "queue")
    assert body["review_goal_days"] == 7
    assert [e["probe_name"] for e in body["results"]] == ["Waiting"]
    assert "PRIVATE" not in str(body) and "submitter" not in body["results"][0]


def test_the_read_api_is_read_only(client, data):
    assert client.post(reverse("api:leaderboard"), {}).status_code == 405
    assert client.delete(reverse("api:probe", args=["halu"])).status_code == 405


def test_the_openapi_schema_documents_the_read_endpoints(client, registry):
    response = client.get(reverse("api:schema"))
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    paths = schema["paths"]
    for path in (
        "/api/v1/categories",
        "/api/v1/tasks",
        "/api/v1/models",
        "/api/v1/specs",
        "/api/v1/leaderboard",
        "/api/v1/leaderboard.csv",
        "/api/v1/leaderboard.json",
        "/api/v1/probes/{slug}",
        "/api/v1/reevaluations",
        "/api/v1/reevaluations/{quarter}",
        "/api/v1/leakage",
        "/api/v1/queue",
        "/api/v1/reference-updates",
    ):
        assert "get" in paths[path], path
    board = paths["/api/v1/leaderboard"]["get"]
    assert {p["name"] for p in board["parameters"]} >= {
        "category",
        "spec",
        "model",
        "compare",
        "measured_only",
    }
    row = schema["components"]["schemas"]["LeaderboardRowOutput"]["properties"]
    assert row["components"]["$ref"].endswith("/ComponentsOutput")
    assert set(schema["components"]["schemas"]["ComponentsOutput"]["properties"]) == {
        "auroc",
        "auroc_ea",
        "auroc_ds",
        "calibration",
        "rho_ce",
        "latency",
        "license",
        "goodhart",
    }
    assert "text/csv" in paths["/api/v1/leaderboard.csv"]["get"]["responses"]["200"]["content"]
