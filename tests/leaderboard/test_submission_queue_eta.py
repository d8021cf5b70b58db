"""A submission's queue position and ETA in ``GET /api/v1/submissions/{id}``, read by the token's
owner: the runs ahead of it, and an ETA made of the measured mean run time of each kind."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from leaderboard.models import EvaluationRun, Submission
from leaderboard.services.tokens import api_token_create
from tests.factories import EvaluationRunFactory, SubmissionFactory, TaskFactory

pytestmark = pytest.mark.django_db

Kind, Status = EvaluationRun.Kind, EvaluationRun.Status


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client


def run(sub, *, kind=Kind.SCORE, status=Status.QUEUED, queued_s_ago=0.0, started_s_ago=None, took_s=None):
    now = timezone.now()
    started = now - timedelta(seconds=started_s_ago) if started_s_ago is not None else None
    return EvaluationRunFactory(
        probe_version=sub.probe_version,
        submission=sub,
        task=TaskFactory(),
        kind=kind,
        status=status,
        queued_at=now - timedelta(seconds=queued_s_ago),
        started_at=started,
        finished_at=started + timedelta(seconds=took_s) if took_s is not None else None,
    )


@pytest.fixture
def queue(registry, researcher):
    """Finished runs that measure the run times (score: 60, 120, 90 s; transfer: 30 s), someone
    else's submission ahead (one run running for 30 s, two queued), ada's, and one queued after."""
    done = SubmissionFactory(status=Submission.Status.SCORED)
    for took in (60, 120, 90):
        run(done, status=Status.SUCCEEDED, queued_s_ago=3600, started_s_ago=3000, took_s=took)
    run(done, kind=Kind.TRANSFER, status=Status.SUCCEEDED, queued_s_ago=3600, started_s_ago=3000, took_s=30)
    ahead = SubmissionFactory(status=Submission.Status.RUNNING)
    run(ahead, status=Status.RUNNING, queued_s_ago=600, started_s_ago=30)
    run(ahead, queued_s_ago=600)
    run(ahead, queued_s_ago=590)
    mine = SubmissionFactory(status=Submission.Status.QUEUED, probe_version__probe__owner=researcher)
    run(mine, queued_s_ago=300)
    run(mine, kind=Kind.TRANSFER, queued_s_ago=300)
    after = SubmissionFactory(status=Submission.Status.QUEUED)
    run(after, queued_s_ago=10)
    return mine


def test_the_owner_sees_the_queue_position_and_an_eta_from_measured_run_times(queue, researcher):
    body = token_client(researcher).get(f"/api/v1/submissions/{queue.pk}").json()
    assert body["queue_position"] == 3  # two queued runs of the other submission start first
    assert body["queue"]["runs_ahead"] == 2
    assert body["queue"]["run_seconds"]["score"] == {"mean_s": 90.0, "runs": 3}
    # 2 × 90 ahead + 60 left of the running one + ada's 90 + 30, over the one busy worker
    assert body["eta_seconds"] == pytest.approx(360, abs=5)
    assert body["page"].endswith(f"/my/submissions/{queue.pk}/")
    assert body["category"] == "hallucination"


def test_the_eta_is_null_while_a_kind_it_needs_has_never_finished_a_run(queue, researcher):
    run(queue, kind=Kind.REPRODUCE, queued_s_ago=300)
    body = token_client(researcher).get(f"/api/v1/submissions/{queue.pk}").json()
    assert body["queue_position"] == 3 and body["eta_seconds"] is None
    assert "reproduce" not in body["queue"]["run_seconds"]


def test_a_final_submission_has_no_position_and_no_eta(queue, researcher):
    Submission.objects.filter(pk=queue.pk).update(status=Submission.Status.FAILED)
    body = token_client(researcher).get(f"/api/v1/submissions/{queue.pk}").json()
    assert body["queue_position"] is None and body["eta_seconds"] is None


def test_someone_elses_token_sees_nothing(queue, stranger):
    assert token_client(stranger).get(f"/api/v1/submissions/{queue.pk}").status_code == 404


def test_the_list_filters_by_probe_and_refuses_a_probe_that_is_not_an_id(queue, researcher):
    client = token_client(researcher)
    slug = queue.probe_version.probe.slug
    listed = client.get("/api/v1/submissions", {"probe": slug}).json()
    assert [s["id"] for s in listed["results"]] == [queue.pk]
    assert client.get("/api/v1/submissions", {"probe": "other"}).json()["results"] == []
    refused = client.get("/api/v1/submissions", {"probe": "x\x00y"})
    assert refused.status_code == 400 and refused.json()["field"] == "probe"
