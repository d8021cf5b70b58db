"""A quarterly cycle from start to public diff, on a small real registry with the holdout runs
finished as a worker would store them: thresholds (held / listed / deprecated), the stability
badge, the leakage record of suspicion rule 1, progress and the public pages."""

from __future__ import annotations

import pytest

from leaderboard.models import CycleResult, EvaluationRun, LeakageRecord, Probe, ReevaluationCycle
from leaderboard.services.reevaluation import cycle_advance, outcome_for, reevaluation_start
from tests.leaderboard.reevaluation_data import finish_holdout_runs, run_cycle, scored

pytestmark = pytest.mark.django_db
Outcome = CycleResult.Outcome


@pytest.mark.parametrize(
    ("drop", "outcome"),
    [
        (-3.0, Outcome.HELD),
        (4.0, Outcome.HELD),
        (5.0, Outcome.HELD),
        (5.01, Outcome.DROPPED),
        (7.0, Outcome.DROPPED),
        (10.0, Outcome.DROPPED),
        (10.01, Outcome.DEPRECATED),
        (12.0, Outcome.DEPRECATED),
    ],
)
def test_the_thresholds_are_5_and_10_points(drop, outcome):
    assert outcome_for(drop) == outcome


@pytest.fixture
def three_probes(small_registry):
    return {slug: scored(slug, reference_auroc=0.90) for slug in ("holds", "slips", "falls")}


def test_drops_of_4_7_and_12_points_give_nothing_a_diff_entry_and_a_deprecation(
    three_probes, maintainer, client
):
    cycle = run_cycle("2026Q3", maintainer, {"holds": 0.86, "slips": 0.83, "falls": 0.78})

    assert cycle.status == ReevaluationCycle.Status.COMPLETED
    results = {r.probe_version.probe.slug: r for r in cycle.results.select_related("probe_version__probe")}
    assert {s: (r.outcome, round(r.drop_points, 6)) for s, r in results.items()} == {
        "holds": ("held", 4.0),
        "slips": ("dropped", 7.0),
        "falls": ("deprecated", 12.0),
    }
    assert results["falls"].holdout_auroc == pytest.approx(0.78)
    assert results["falls"].test_auroc == pytest.approx(0.90)

    listed = {e["probe"]: e["outcome"] for e in cycle.diff["dropped"]}
    assert listed == {"slips": "dropped", "falls": "deprecated"}  # 4 points is not listed
    assert [e["probe"] for e in cycle.diff["deprecated"]] == ["falls"]
    assert cycle.diff["counts"] == {"held": 1, "dropped": 1, "deprecated": 1, "failed": 0}

    falls = Probe.objects.get(slug="falls")
    assert falls.status == Probe.Status.DEPRECATED and falls.deprecated_at is not None
    assert "2026Q3" in falls.deprecated_reason and "12.0 points" in falls.deprecated_reason
    assert Probe.objects.get(slug="slips").status == Probe.Status.ACTIVE

    # kept on the board, greyed and unranked, with the reason
    board = client.get("/api/v1/leaderboard", {"category": "hallucination"}).json()
    rows = {r["probe"]: r for r in board["results"]}
    assert set(rows) == {"holds", "slips", "falls"}
    assert rows["falls"]["badges"]["deprecated"] is True and rows["falls"]["rank"] is None
    assert "12.0 points" in rows["falls"]["badges"]["deprecated_reason"]
    assert "12.0 points" in client.get("/probes/falls/").content.decode()


def test_the_diff_is_a_public_page_and_json(three_probes, maintainer, client):
    run_cycle("2026Q3", maintainer, {"holds": 0.86, "slips": 0.83, "falls": 0.78})

    body = client.get("/api/v1/reevaluations/2026Q3").json()
    assert body["status"] == "completed"
    assert body["progress"] == {"total": 3, "done": 3, "failed": 0}
    assert {e["probe"] for e in body["diff"]["dropped"]} == {"slips", "falls"}
    assert {r["probe"]: r["outcome"] for r in body["results"]} == {
        "holds": "held",
        "slips": "dropped",
        "falls": "deprecated",
    }
    assert all("ids" not in h for h in body["holdouts"].values())  # holdout items stay unseen

    html = client.get("/reevaluations/2026Q3/").content.decode()
    assert "Public diff" in html and "3 of 3" in html
    assert "Slips" in html and "Falls" in html


def test_a_drop_over_10_points_opens_a_leakage_record_for_review(three_probes, maintainer):
    run_cycle("2026Q3", maintainer, {"holds": 0.86, "slips": 0.83, "falls": 0.78})

    [record] = LeakageRecord.objects.all()
    assert record.probe.slug == "falls" and record.rule == "test_exceeds_holdout"
    assert record.status == LeakageRecord.Status.OPEN and record.source == LeakageRecord.Source.RULE
    assert record.evidence["test_auroc"] == pytest.approx(0.90)
    assert record.evidence["holdout_auroc"] == pytest.approx(0.78)
    assert "12.0 points" in record.summary


def test_two_consecutive_held_cycles_give_the_stability_badge(small_registry, maintainer, client):
    scored("steady", reference_auroc=0.80)
    scored("wobbly", reference_auroc=0.80)

    first = run_cycle("2026Q1", maintainer, {"steady": 0.79, "wobbly": 0.78})
    assert Probe.objects.get(slug="steady").stability_quarters == 1
    assert first.diff["stability"] == []  # one cycle is not yet a badge

    second = run_cycle("2026Q2", maintainer, {"steady": 0.82, "wobbly": 0.72})
    assert Probe.objects.get(slug="steady").stability_quarters == 2
    assert Probe.objects.get(slug="wobbly").stability_quarters == 0  # dropped 8 points: the streak ends
    assert second.diff["stability"] == [{"probe": "steady", "quarters_held": 2}]
    detail = client.get("/api/v1/probes/steady").json()
    assert detail["stable"] is True and detail["stability_quarters"] == 2

    run_cycle("2026Q3", maintainer, {"steady": 0.80, "wobbly": 0.80})
    assert Probe.objects.get(slug="steady").stability_quarters == 3
    assert Probe.objects.get(slug="wobbly").stability_quarters == 1


def test_a_failed_holdout_run_breaks_the_streak_and_is_reported(small_registry, maintainer):
    scored("steady", reference_auroc=0.80)
    run_cycle("2026Q1", maintainer, {"steady": 0.80})
    cycle = run_cycle("2026Q2", maintainer, {"steady": None})
    [entry] = cycle.diff["entries"]
    assert entry["outcome"] == "failed" and entry["note"] == "a holdout run failed"
    assert Probe.objects.get(slug="steady").stability_quarters == 0
    assert Probe.objects.get(slug="steady").status == Probe.Status.ACTIVE


def test_a_new_version_starts_its_own_streak(small_registry, maintainer):
    from leaderboard.models import ProbeVersion

    v1 = scored("steady", reference_auroc=0.80)
    run_cycle("2026Q1", maintainer, {"steady": 0.80})
    run_cycle("2026Q2", maintainer, {"steady": 0.80})
    assert Probe.objects.get(slug="steady").stability_quarters == 2
    v2 = scored("steady-v2", reference_auroc=0.80, probe=v1.probe, number=2)
    assert ProbeVersion.objects.filter(probe=v1.probe).count() == 2
    cycle = run_cycle("2026Q3", maintainer, {"steady": 0.80})
    assert cycle.results.get().probe_version == v2
    assert Probe.objects.get(slug="steady").stability_quarters == 1


def test_deprecated_probes_are_not_rerun(three_probes, maintainer):
    run_cycle("2026Q3", maintainer, {"holds": 0.86, "slips": 0.83, "falls": 0.78})
    cycle = reevaluation_start(quarter="2026Q4", by=maintainer, dispatch=False)
    assert {r.probe_version.probe.slug for r in cycle.results.all()} == {"holds", "slips"}


def test_progress_is_visible_while_the_cycle_runs(three_probes, maintainer, client):
    cycle = reevaluation_start(quarter="2026Q3", by=maintainer, dispatch=False)
    assert cycle.status == ReevaluationCycle.Status.RUNNING
    assert client.get("/api/v1/reevaluations/2026Q3").json()["progress"] == {
        "total": 3,
        "done": 0,
        "failed": 0,
    }
    assert "0 of 3" in client.get("/reevaluations/2026Q3/").content.decode()

    run = cycle.runs.first()
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.SUCCEEDED)
    assert cycle_advance(cycle_id=cycle.pk) is None  # two runs still queued
    assert "1 of 3" in client.get("/reevaluations/2026Q3/").content.decode()

    finish_holdout_runs(cycle, {"holds": 0.9, "slips": 0.9, "falls": 0.9})
    assert cycle_advance(cycle_id=cycle.pk) is not None
    assert cycle_advance(cycle_id=cycle.pk) is None  # idempotent
    assert ReevaluationCycle.objects.get(pk=cycle.pk).status == ReevaluationCycle.Status.COMPLETED


def test_the_reconciler_completes_a_cycle_whose_last_message_was_lost(three_probes, maintainer):
    from leaderboard.services.lifecycle import evaluation_runs_reconcile

    cycle = reevaluation_start(quarter="2026Q3", by=maintainer, dispatch=False)
    finish_holdout_runs(cycle, {"holds": 0.9, "slips": 0.9, "falls": 0.9})  # nobody called cycle_advance
    report = evaluation_runs_reconcile(dispatch=lambda run_id: None)
    assert report["cycles_completed"] == 1
    assert ReevaluationCycle.objects.get(pk=cycle.pk).status == ReevaluationCycle.Status.COMPLETED
