"""Comparing two probes: per task, both AUROCs, ΔAUROC with its paired interval and DeLong's
p-value on the rows both were scored on (also across base models), the other metrics side by
side; as a page and as ``GET /api/v1/compare``."""

from __future__ import annotations

import pytest
from django.test import Client

from evaluator.metrics.compare import rows_compare
from leaderboard import models as m
from tests.leaderboard.board_data import MODEL_B, ensure_models, ensure_tasks
from tests.leaderboard.rank_data import twins_and_leader, worker_scored

pytestmark = pytest.mark.django_db


@pytest.fixture
def tasks(registry):
    ensure_models()
    return ensure_tasks("hallucination", 2)


@pytest.fixture
def board(tasks, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        return twins_and_leader(tasks)


@pytest.fixture
def client():
    return Client()


def test_the_api_compares_two_probes_per_task_on_their_shared_rows(board, tasks, client):
    response = client.get("/api/v1/compare", {"a": "strong", "b": "twin-a"})
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["a"]["probe"] == "strong" and data["b"]["probe"] == "twin-a"
    assert data["a"]["rank_interval"]["rank_ci"] == [1, 1]
    assert [t["task"] for t in data["tasks"]] == sorted(t.slug for t in tasks)
    for t in data["tasks"]:
        runs = {
            v.probe.slug: m.EvaluationRun.objects.get(probe_version=v, task_id=t["task"], split="test")
            for v in (board["strong"], board["twin-a"])
        }
        expected = rows_compare(
            a={e["id"]: (e["label"], e["score"]) for e in runs["strong"].example_scores},
            b={e["id"]: (e["label"], e["score"]) for e in runs["twin-a"].example_scores},
        )
        paired = t["paired"]
        assert paired["n_shared"] == 160 and t["reason"] == ""
        assert paired["auroc_a"] == pytest.approx(expected["auroc_a"])
        assert paired["delta"] == pytest.approx(expected["delta"])
        assert paired["delta_ci"] == pytest.approx(expected["delta_ci"])
        assert paired["p_value"] == pytest.approx(expected["p_value"])
        assert paired["delta_ci"][0] > 0 and paired["p_value"] < 0.001  # the leader is clearly better
        assert set(t["metrics"]) >= {
            "ece",
            "recall_at_1pct_fpr",
            "fpr_at_1pct_threshold",
            "threshold_1pct_fpr",
        }
        assert t["metrics"]["ece"]["a"] is not None and t["metrics"]["ece"]["b"] is not None


def test_twins_that_differ_by_noise_only_are_not_told_apart(board, client):
    data = client.get("/api/v1/compare", {"a": "twin-a", "b": "twin-b"}).json()
    for t in data["tasks"]:
        lo, hi = t["paired"]["delta_ci"]
        assert lo < 0 < hi and t["paired"]["p_value"] > 0.05


def test_probes_on_different_base_models_are_paired_on_the_rows_they_share(
    board, tasks, client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        other = worker_scored("other-model", signal=2.0, seed=7, tasks=tasks[:1], base_model=MODEL_B)
    # the other model's run covers only part of the task's rows
    run = m.EvaluationRun.objects.get(probe_version=other, task=tasks[0], split="test")
    run.example_scores = run.example_scores[:100]
    run.save(update_fields=["example_scores"])
    m.Score.objects.filter(probe_version=other).update(computed_at=run.finished_at)  # a fresh cache key
    data = client.get("/api/v1/compare", {"a": "strong", "b": "other-model"}).json()
    by_task = {t["task"]: t for t in data["tasks"]}
    first = by_task[tasks[0].slug]["paired"]
    assert (first["n_shared"], first["n_a"], first["n_b"]) == (100, 160, 100)
    missing = by_task[tasks[1].slug]
    assert missing["paired"] is None and "was not measured on this task" in missing["reason"]


def test_an_on_policy_task_cannot_pair_probes_on_different_base_models(
    board, tasks, client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        worker_scored("other-model", signal=2.0, seed=7, tasks=tasks, base_model=MODEL_B)
    m.Task.objects.filter(pk=tasks[1].pk).update(on_policy=True)
    data = client.get("/api/v1/compare", {"a": "strong", "b": "other-model"}).json()
    by_task = {t["task"]: t for t in data["tasks"]}
    assert by_task[tasks[0].slug]["paired"] is not None
    on_policy = by_task[tasks[1].slug]
    assert on_policy["paired"] is None and "on-policy task" in on_policy["reason"]
    # two probes on the same base model read the same generated rows: they are paired
    same = client.get("/api/v1/compare", {"a": "strong", "b": "twin-a"}).json()
    assert all(t["paired"] is not None for t in same["tasks"])


def test_the_page_shows_the_comparison_with_overlaid_roc_curves(board, client):
    response = client.get("/compare/", {"a": "strong", "b": "twin-a"})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="compare-tasks"' in html and "p (DeLong)" in html
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart"') == 2  # one per task
    assert "A · Strong" in html and "B · Twin-A" in html
    assert "tied for first" not in html  # the leader is alone at the top


def test_the_board_checkboxes_lead_to_the_comparison(board, client):
    board_html = client.get("/category/hallucination/").content.decode()
    assert 'id="compare-form"' in board_html and 'name="p" value="twin-b"' in board_html
    response = client.get("/compare/", {"p": ["twin-a", "twin-b"], "spec": "v0.0.1"})
    assert response.status_code == 200 and "Twin-A" in response.content.decode()
    one = client.get("/compare/", {"p": ["twin-a"]})
    assert one.status_code == 400 and b"tick exactly two probes" in one.content


@pytest.mark.parametrize(
    ("params", "status", "message"),
    [
        ({"a": "strong"}, 400, "b is missing"),
        ({"a": "strong", "b": "strong"}, 400, "the same probe"),
        ({"a": "strong", "b": "nobody"}, 404, "no public probe 'nobody'"),
        ({"a": "strong", "b": "twin-a", "spec": "v9"}, 400, "unknown weights spec"),
    ],
)
def test_bad_requests_say_what_is_wrong(board, client, params, status, message):
    api = client.get("/api/v1/compare", params)
    assert api.status_code == status and message in api.content.decode()
    page = client.get("/compare/", params)
    assert page.status_code == status
