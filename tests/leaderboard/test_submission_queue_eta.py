"""A submission's queue position and ETA in ``GET /api/v1/submissions/{id}``, read by the token's
owner: the runs a worker takes before its next one (primary runs before secondary ones, the
maintainers' work first, then round-robin across submitters), and an ETA until it is scored made of
the measured mean run time of each kind."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from leaderboard.models import EvaluationRun, Submission
from leaderboard.selectors.submissions import queued_in_worker_order
from leaderboard.services import runs
from leaderboard.services.tokens import api_token_create
from tests.factories import EvaluationRunFactory, SubmissionFactory, TaskFactory, UserFactory

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
def queue(registry, researcher, system_account):
    """Finished runs that measure the run times (score: 60, 120, 90 s; transfer: 30 s), a reference
    probe's submission ahead (the maintainers' work: one run running for 30 s, two queued), ada's,
    and someone else's queued after."""
    done = SubmissionFactory(status=Submission.Status.SCORED)
    for took in (60, 120, 90):
        run(done, status=Status.SUCCEEDED, queued_s_ago=3600, started_s_ago=3000, took_s=took)
    run(done, kind=Kind.TRANSFER, status=Status.SUCCEEDED, queued_s_ago=3600, started_s_ago=3000, took_s=30)
    ahead = SubmissionFactory(status=Submission.Status.RUNNING, probe_version__probe__owner=system_account)
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
    assert body["queue_position"] == 3  # the reference probe's two queued runs start first
    assert body["queue"]["runs_ahead"] == 2
    assert body["queue"]["run_seconds"]["score"] == {"mean_s": 90.0, "runs": 3}
    # until it is scored: 2 × 90 ahead + 60 left of the running one + ada's score run's 90, over the
    # one busy worker; its transfer run waits behind every queued primary run, after it is scored
    assert body["eta_seconds"] == pytest.approx(330, abs=5)
    assert body["page"].endswith(f"/my/submissions/{queue.pk}/")
    assert body["category"] == "hallucination"


def test_the_eta_is_null_while_a_kind_it_is_scored_on_has_never_finished_a_run(queue, researcher):
    run(queue, kind=Kind.REFERENCE, queued_s_ago=300)
    body = token_client(researcher).get(f"/api/v1/submissions/{queue.pk}").json()
    assert body["queue_position"] == 3 and body["eta_seconds"] is None
    assert "reference" not in body["queue"]["run_seconds"]


def test_secondary_runs_queued_earlier_do_not_count_ahead_of_a_primary_run(queue, researcher):
    """The demo filling: hundreds of secondary runs (transfer, steer) of the reference probes were
    queued before ada's score run, and steer has never finished one. A worker takes every queued
    primary run first, so none of them is ahead of it, and the ETA is made of the primary kinds."""
    filled = SubmissionFactory(status=Submission.Status.SCORED, probe_version__probe__owner=queue.submitter)
    for i in range(20):
        run(filled, kind=Kind.TRANSFER, queued_s_ago=1000 + i)
        run(filled, kind=Kind.STEER, queued_s_ago=1000 + i)
    body = token_client(researcher).get(f"/api/v1/submissions/{queue.pk}").json()
    assert body["queue_position"] == 3 and body["queue"]["runs_ahead"] == 2
    assert body["eta_seconds"] == pytest.approx(330, abs=5)
    assert "steer" not in body["queue"]["run_seconds"]

    # once its score run has started, nothing of it waits in the queue: no position, and its
    # transfer run (a secondary one) is not counted until it is scored
    EvaluationRun.objects.filter(submission=queue, kind=Kind.SCORE).update(
        status=Status.RUNNING, started_at=timezone.now()
    )
    body = token_client(researcher).get(f"/api/v1/submissions/{queue.pk}").json()
    assert body["queue_position"] is None and body["queue"]["runs_ahead"] is None
    # what is left of the two running runs (60 s and ada's 90 s), over the two busy workers
    assert body["eta_seconds"] == pytest.approx((60 + 90) / 2, abs=5)


def test_the_position_is_where_the_worker_takes_the_run(registry, researcher, system_account):
    """The estimate's order is the order a worker claims the runs in (services.runs): secondary
    runs last, the maintainers' work first, then one run per submitter in turn."""
    bob, cy = UserFactory(), UserFactory()
    reference = SubmissionFactory(status=Submission.Status.QUEUED, probe_version__probe__owner=system_account)
    deep = SubmissionFactory(status=Submission.Status.QUEUED, probe_version__probe__owner=bob)
    mine = SubmissionFactory(status=Submission.Status.QUEUED, probe_version__probe__owner=researcher)
    late = SubmissionFactory(status=Submission.Status.QUEUED, probe_version__probe__owner=cy)
    first = run(deep, kind=Kind.TRANSFER, queued_s_ago=900)
    for i in range(4):
        run(deep, queued_s_ago=800 - i)
    run(mine, queued_s_ago=700)
    run(mine, kind=Kind.STEER, queued_s_ago=700)
    run(late, queued_s_ago=600)
    run(reference, kind=Kind.REFERENCE, queued_s_ago=10)
    predicted = [pk for pk, _ in queued_in_worker_order()]

    taken = []
    for queue in ("primary", "secondary"):
        token = EvaluationRun.objects.filter(status=Status.QUEUED, kind__in=runs.queue_kinds(queue)).first()
        while (claimed := runs.evaluation_run_claim_next(run_id=token.pk, worker="w")) is not None:
            EvaluationRun.objects.filter(pk=claimed.pk).update(status=Status.SUCCEEDED)
            taken.append(claimed.pk)
    assert predicted == taken
    kinds = [EvaluationRun.objects.get(pk=pk).kind for pk in taken]
    owners = [EvaluationRun.objects.get(pk=pk).probe_version.probe.owner for pk in taken]
    assert kinds[0] == Kind.REFERENCE and owners[0] == system_account  # queued last, taken first
    assert owners[1:4] == [bob, researcher, cy]  # then one run per submitter in turn
    assert set(kinds[-2:]) == {Kind.TRANSFER, Kind.STEER} and taken[-2] == first.pk


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
