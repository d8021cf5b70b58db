"""Rank intervals are computed from the stored per-example scores when scores change, stored, and
kept in step with the board (a new version, a deprecation)."""

from __future__ import annotations

import pytest

from leaderboard import models as m
from leaderboard.services.rank_intervals import (
    board_rank_intervals_write,
    rank_intervals_reconcile,
    rank_intervals_refresh,
)
from tests.leaderboard.board_data import ensure_models, ensure_tasks
from tests.leaderboard.rank_data import twins_and_leader, worker_scored

pytestmark = pytest.mark.django_db


def interval(version: m.ProbeVersion, spec: str = "v0.0.1") -> m.RankInterval:
    return m.RankInterval.objects.get(score__probe_version=version, score__spec_id=spec)


@pytest.fixture
def tasks(registry):
    ensure_models()
    return ensure_tasks("hallucination", 2)


@pytest.fixture
def board(tasks, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        return twins_and_leader(tasks)


def test_scoring_computes_and_stores_the_rank_intervals_of_the_board(board):
    strong, twin_a, twin_b = board["strong"], board["twin-a"], board["twin-b"]
    assert m.RankInterval.objects.filter(score__spec_id="v0.0.1").count() == 3
    top = interval(strong)
    assert (top.rank, top.rank_lo, top.rank_hi, top.tie_group) == (1, 1, 1, 1)
    assert not top.tied_for_first  # alone at the top
    assert top.score_lo < m.Score.objects.get(probe_version=strong, spec_id="v0.0.1").total < top.score_hi
    a, b = interval(twin_a), interval(twin_b)
    assert a.tie_group == b.tie_group == 2  # noise only: they cannot be told apart
    assert {a.rank, b.rank} == {2, 3} and (a.rank_lo, a.rank_hi) == (b.rank_lo, b.rank_hi) == (2, 3)
    assert a.n_entries == 3 and a.n_resamples == 1000


def test_a_current_board_is_not_recomputed(board):
    # every weights spec has its own board, each current
    assert rank_intervals_refresh(category_id="hallucination") == {
        "v0.0.1": None,
        "v0.0.2": None,
        "v0.0.3": None,
    }
    assert rank_intervals_reconcile() == 0
    assert board_rank_intervals_write(category_id="hallucination", spec_id="v0.0.1", force=True) == 3


def test_a_new_version_replaces_the_old_entry(board, tasks, django_capture_on_commit_callbacks):
    old = board["twin-b"]
    with django_capture_on_commit_callbacks(execute=True):
        new = worker_scored("twin-b", signal=6.0, seed=9, tasks=tasks, probe=old.probe, number=2)
    assert not m.RankInterval.objects.filter(score__probe_version=old).exists()
    assert interval(new).rank == 1 and interval(new).tie_group == 1
    assert interval(board["strong"]).rank == 2


def test_a_deprecated_probe_leaves_the_board_and_the_reconciler_recomputes_it(board):
    m.Probe.objects.filter(slug="strong").update(status=m.Probe.Status.DEPRECATED)
    assert rank_intervals_reconcile() == 3  # its board under each of the three weights specs
    assert not m.RankInterval.objects.filter(score__probe_version=board["strong"]).exists()
    a, b = interval(board["twin-a"]), interval(board["twin-b"])
    assert a.n_entries == 2 and a.tied_for_first and b.tied_for_first


def test_the_borda_rank_and_the_holdout_rank_delta_are_stored_and_shown(board, client, django_user_model):
    import csv
    import io

    strong, twin_a, twin_b = board["strong"], board["twin-a"], board["twin-b"]
    assert interval(strong).borda_rank == 1 and {
        interval(twin_a).borda_rank,
        interval(twin_b).borda_rank,
    } <= {2, 3}
    assert 0.5 < interval(strong).borda_score <= 1.0
    assert interval(strong).rank_delta is None and interval(strong).rank_delta_quarter == ""  # no cycle yet

    # a completed cycle in which the leader fell to last on its holdout
    staff = django_user_model.objects.create_user("maint", is_staff=True)
    cycle = m.ReevaluationCycle.objects.create(
        quarter="2026Q4", triggered_by=staff, status=m.ReevaluationCycle.Status.COMPLETED
    )
    for version, holdout, test in ((strong, 0.60, 0.99), (twin_a, 0.80, 0.90), (twin_b, 0.75, 0.89)):
        m.CycleResult.objects.create(
            cycle=cycle, probe_version=version, holdout_auroc=holdout, test_auroc=test
        )
    for spec_id in ("v0.0.1", "v0.0.2", "v0.0.3"):
        assert board_rank_intervals_write(category_id="hallucination", spec_id=spec_id, force=True) == 3
    assert [interval(v).rank_delta for v in (strong, twin_a, twin_b)] == [3 - 1, 1 - 2, 2 - 3]
    assert interval(strong).rank_delta_quarter == "2026Q4"

    rows = {
        r["probe"]: r
        for r in client.get("/api/v1/leaderboard", {"category": "hallucination"}).json()["results"]
    }
    assert (
        rows["strong"]["borda_rank"],
        rows["strong"]["rank_delta"],
        rows["strong"]["rank_delta_quarter"],
    ) == (
        1,
        2,
        "2026Q4",
    )
    by_delta = client.get("/api/v1/leaderboard", {"category": "hallucination", "sort": "delta"}).json()[
        "results"
    ]
    assert [r["probe"] for r in by_delta] == ["twin-a", "twin-b", "strong"]  # climbed first, fell last
    exported = list(
        csv.DictReader(
            io.StringIO(client.get("/api/v1/leaderboard.csv", {"category": "hallucination"}).content.decode())
        )
    )
    assert {r["probe"]: r["rank_delta"] for r in exported} == {"strong": "2", "twin-a": "-1", "twin-b": "-1"}
    page = client.get("/category/hallucination/").content.decode()
    assert ">Borda<" in page or "Borda</" in page
    strong_row = page[page.index("/probes/strong/") :].split("</tr>", 1)[0]
    assert 'class="num delta"' in strong_row and ">+2</td>" in strong_row
