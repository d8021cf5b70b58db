"""Quarterly diff pages, the public leakage page and the submission queue."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.factories import CycleResultFactory, LeakageRecordFactory, ReevaluationCycleFactory
from tests.leaderboard.board_data import board_owner, ensure_models, public_probe


@pytest.fixture
def cycle(registry):
    ensure_models()
    held = public_probe(slug="holds", name="Holds Probe")
    dropped = public_probe(slug="drops", name="Drops Probe")
    gone = public_probe(slug="falls", name="Falls Probe")
    hidden = public_probe(slug="hidden", name="Hidden Probe", status="rejected")
    cycle = ReevaluationCycleFactory(
        quarter="2026Q4",
        triggered_by=board_owner(),
        holdouts={"board-hallucination-0-v1": {"rows": 120, "sha256": "ab" * 32, "ids": ["secret-id"]}},
        diff={"dropped": ["drops"], "deprecated": ["falls"]},
    )
    CycleResultFactory(
        cycle=cycle, probe_version=held, reference_auroc=0.8, holdout_auroc=0.78, outcome="held"
    )
    CycleResultFactory(
        cycle=cycle, probe_version=dropped, reference_auroc=0.8, holdout_auroc=0.73, outcome="dropped"
    )
    CycleResultFactory(
        cycle=cycle, probe_version=gone, reference_auroc=0.8, holdout_auroc=0.65, outcome="deprecated"
    )
    CycleResultFactory(
        cycle=cycle, probe_version=hidden, reference_auroc=0.8, holdout_auroc=0.5, outcome="deprecated"
    )
    return cycle


def test_the_cycle_index_counts_outcomes(client, cycle):
    html = client.get(reverse("leaderboard:reevaluations")).content.decode()
    assert "2026Q4" in html and reverse("leaderboard:reevaluation", args=["2026Q4"]) in html
    # 3 public results: held 1, dropped 1, deprecated 1 (the rejected probe's result is not public)
    assert '<td class="num">3</td>' in html


def test_the_quarterly_diff_page(client, cycle):
    html = client.get(reverse("leaderboard:reevaluation", args=["2026Q4"])).content.decode()
    diff = html[html.index("Public diff") : html.index("Every result")]
    assert "Drops Probe" in diff and "Falls Probe" in diff and "Holds Probe" not in diff
    assert "7.0" in diff and "15.0" in diff
    assert "Holds Probe" in html
    assert "Hidden Probe" not in html
    assert "ab" * 32 in html and "secret-id" not in html


def test_a_failed_cycle_shows_its_error(client, registry):
    ReevaluationCycleFactory(
        quarter="2027Q1",
        triggered_by=board_owner(),
        status="failed",
        error="split hash mismatch: registry/splits/x/test.jsonl",
    )
    html = client.get(reverse("leaderboard:reevaluation", args=["2027Q1"])).content.decode()
    assert "split hash mismatch" in html
    assert client.get(reverse("leaderboard:reevaluation", args=["1999Q1"])).status_code == 404


def test_empty_cycle_index(client, registry):
    assert "No re-evaluation has run yet" in client.get(reverse("leaderboard:reevaluations")).content.decode()


def test_the_leakage_page_lists_confirmed_records_only(client, registry):
    ensure_models()
    v = public_probe(slug="leaky", name="Leaky Probe")
    LeakageRecordFactory(
        probe=v.probe,
        status="confirmed",
        summary="overlap with the test split",
        public_note="120 test items in the training data",
        reviewed_at=timezone.now(),
    )
    LeakageRecordFactory(probe=v.probe, status="open", summary="still under review")
    LeakageRecordFactory(probe=v.probe, status="dismissed", summary="a false alarm")
    html = client.get(reverse("leaderboard:leakage")).content.decode()
    assert "overlap with the test split" in html and "120 test items" in html
    assert reverse("leaderboard:probe", args=["leaky"]) in html
    assert "still under review" not in html and "a false alarm" not in html


def test_empty_leakage_page(client, registry):
    assert "No leakage has been confirmed" in client.get(reverse("leaderboard:leakage")).content.decode()


def test_the_queue_shows_open_submissions_with_their_age(client, registry):
    ensure_models()
    old = public_probe(slug="old-one", name="Old Submission", status="queued")
    sub = old.submission
    sub.created_at = timezone.now() - timedelta(days=9)
    sub.failure_reason = "PRIVATE: worker host gpu-7 ran out of memory"
    sub.save()
    public_probe(slug="new-one", name="New Submission", status="running")
    failed = public_probe(slug="failed-one", name="Failed Submission", status="failed")
    failed.submission.failure_reason = "PRIVATE failure reason"
    failed.submission.save()
    public_probe(slug="done", name="Scored Submission")
    html = client.get(reverse("leaderboard:queue")).content.decode()
    assert "Old Submission" in html and "New Submission" in html
    assert html.index("Old Submission") < html.index("New Submission")  # oldest first
    assert "Failed Submission" not in html and "Scored Submission" not in html
    assert "PRIVATE" not in html and "board-owner" not in html
    assert "overdue" in html and "9.0 days" in html
    assert "goal: 7 days" in html


def test_empty_queue(client, registry):
    assert "The queue is empty" in client.get(reverse("leaderboard:queue")).content.decode()


def test_a_submission_page_is_private_to_its_submitter(client, registry):
    """Submission.get_absolute_url is the submitter's own status page: a stranger gets a login
    redirect or 404, never the details."""
    ensure_models()
    v = public_probe(slug="mine", status="queued")
    response = client.get(v.submission.get_absolute_url())
    assert response.status_code in (302, 404)


def test_reference_update_diffs_are_public(client, registry):
    from leaderboard.models import ReferenceUpdate

    ensure_models()
    old = public_probe(slug="ea-ref", name="EA Reference", category="eval_awareness")
    new = public_probe(slug="ea-ref", probe=old.probe, number=2, category="eval_awareness")
    dependent = public_probe(slug="dependent", name="Dependent")
    entry = {
        "probe": "dependent",
        "version": 1,
        "spec": "v0.0.1",
        "auroc_ea_before": 0.7,
        "auroc_ea_after": 0.65,
        "auroc_ea_imputed_after": False,
        "total_before": 0.71,
        "total_after": 0.70,
    }
    update = ReferenceUpdate.objects.create(
        base_model=dependent.probe.base_model,
        old_version=old,
        new_version=new,
        status="completed",
        diff=[entry],
        finished_at=timezone.now(),
    )
    ReferenceUpdate.objects.create(
        base_model=dependent.probe.base_model, new_version=dependent, status="running"
    )
    html = client.get(reverse("leaderboard:reevaluations")).content.decode()
    assert reverse("leaderboard:reference_update", args=[update.pk]) in html and "v1 → v2" in html
    html = client.get(reverse("leaderboard:reference_update", args=[update.pk])).content.decode()
    assert "0.700" in html and "0.650" in html and "-0.010" in html
    body = client.get(reverse("api:reference-updates")).json()
    assert len(body) == 1 and body[0]["diff"] == [entry] and body[0]["reference_probe"] == "ea-ref"
    assert body[0]["old_version"] == 1 and body[0]["new_version"] == 2
