"""The board shows what the data can tell apart: rank intervals, tie groups and "tied for first"
on the page, the probe page, the API and the exports; recall at 1% FPR is a sortable column; the
probe page shows the operating point (threshold, recall and test FPR)."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

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


def api_rows(client, **params) -> dict[str, dict]:
    response = client.get("/api/v1/leaderboard", {"category": "hallucination", **params})
    assert response.status_code == 200, response.content
    return {r["probe"]: r for r in response.json()["results"]}


def test_the_api_gives_each_entry_its_rank_interval_and_tie_group(board, client):
    rows = api_rows(client)
    assert [rows[s]["rank"] for s in ("strong",)] == [1]
    strong, a, b = (
        rows["strong"]["rank_interval"],
        rows["twin-a"]["rank_interval"],
        rows["twin-b"]["rank_interval"],
    )
    assert strong["rank_ci"] == [1, 1] and strong["tie_group"] == 1 and not strong["tied_for_first"]
    assert a["rank_ci"] == b["rank_ci"] == [2, 3]
    assert a["tie_group"] == b["tie_group"] == 2
    lo, hi = strong["score_ci"]
    assert lo < rows["strong"]["total"] < hi
    assert a["n_entries"] == 3


def test_the_board_page_shows_rank_intervals_and_tied_for_first(
    tasks, client, django_capture_on_commit_callbacks
):
    import numpy as np

    rng = np.random.default_rng(5)
    shared = {t.slug: 2 * rng.normal(size=160) for t in tasks}
    with django_capture_on_commit_callbacks(execute=True):
        worker_scored("lead-a", signal=1.5, seed=11, tasks=tasks, shared=shared)
        worker_scored("lead-b", signal=1.5, seed=12, tasks=tasks, shared=shared)
        worker_scored("trailing", signal=0.1, seed=13, tasks=tasks)
    html = client.get("/category/hallucination/").content.decode()
    assert html.count(">tied for first</span>") == 2
    assert 'class="rank-ci"' in html and "1–2</small>" in html
    assert "tie-group" in html
    rows = api_rows(client)
    assert (
        rows["lead-a"]["rank_interval"]["tied_for_first"]
        and rows["lead-b"]["rank_interval"]["tied_for_first"]
    )
    assert not rows["trailing"]["rank_interval"]["tied_for_first"]


def test_a_filtered_view_does_not_show_intervals_of_another_ranking(
    board, tasks, client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        worker_scored("other-model", signal=2.0, seed=7, tasks=tasks, base_model=MODEL_B)
    rows = api_rows(client, model=MODEL_B)
    assert rows["other-model"]["rank"] == 1  # first among this model's entries ...
    assert rows["other-model"]["rank_interval"] is None  # ... but its interval is about the whole board
    full = api_rows(client)
    assert full["other-model"]["rank_interval"]["rank_ci"][0] >= 1


def test_recall_at_1pct_fpr_is_a_sortable_column(board, client):
    rows = api_rows(client)
    recalls = {slug: r["recall_at_1pct_fpr"] for slug, r in rows.items()}
    stored = {
        v.probe.slug: m.Score.objects.get(probe_version=v, spec_id="v0.0.1").measurements[
            "recall_at_1pct_fpr"
        ]
        for v in board.values()
    }
    assert recalls == stored
    ascending = client.get(
        "/api/v1/leaderboard", {"category": "hallucination", "sort": "recall", "dir": "asc"}
    )
    order = [r["probe"] for r in ascending.json()["results"]]
    assert order == sorted(stored, key=stored.get)
    page = client.get("/category/hallucination/", {"sort": "recall"}).content.decode()
    assert 'data-sort="recall"' in page and 'aria-sort="descending"' in page
    assert page.index(">strong</a>".replace(">strong", ">Strong")) < page.index(">Twin-A</a>")


def test_the_exports_carry_the_intervals_and_the_operating_point(board, client):
    text = client.get("/api/v1/leaderboard.csv", {"category": "hallucination"}).content.decode()
    records = {r["probe"]: r for r in csv.DictReader(io.StringIO(text))}
    strong = records["strong"]
    assert (strong["rank_ci_lo"], strong["rank_ci_hi"], strong["tie_group"], strong["tied_for_first"]) == (
        "1",
        "1",
        "1",
        "false",
    )
    assert float(strong["score_ci_lo"]) < float(strong["total"]) < float(strong["score_ci_hi"])
    assert records["twin-a"]["tie_group"] == records["twin-b"]["tie_group"] == "2"
    assert 0 <= float(strong["recall_at_1pct_fpr"]) <= 1
    exported = client.get("/api/v1/leaderboard.json", {"category": "hallucination"}).json()["results"]
    assert {r["probe"]: r["rank_interval"]["tie_group"] for r in exported} == {
        "strong": 1,
        "twin-a": 2,
        "twin-b": 2,
    }


def test_the_probe_page_shows_the_operating_point_and_the_rank_interval(board, client):
    score = m.Score.objects.get(probe_version=board["strong"], spec_id="v0.0.1")
    task, result = sorted(score.per_task.items())[0]
    assert result["threshold_1pct_fpr"] is not None and result["fpr_at_1pct_threshold"] is not None
    html = client.get("/probes/strong/").content.decode()
    assert "Threshold (train, 1% FPR)" in html and "Test FPR" in html
    assert f"{result['threshold_1pct_fpr']:.4g}" in html
    assert f"{result['fpr_at_1pct_threshold']:.3f}" in html
    assert 'id="rank-interval"' in html and "95% rank interval 1–1" in html
    detail = client.get("/api/v1/probes/strong").json()
    assert detail is not None


def test_the_methodology_page_explains_the_bootstrap(client, registry):
    html = client.get("/methodology/").content.decode()
    assert 'id="uncertainty"' in html
    assert "1,000" in html and "held fixed" in html and "DeLong" in html
    assert "AUROC" in html and "Latency" in html  # the resampled and fixed components, by name
