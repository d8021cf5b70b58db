"""Fair shares of the workers: within a queue, runs are taken round-robin across submitters (the
maintainers' own work first); each account's queued work is capped in estimated run-seconds
(429 past it, nothing stored); the public queue page shows each submitter's share."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from evaluator.errors import InfrastructureError
from leaderboard import artifacts, axes
from leaderboard.models import EvaluationRun, Probe, ProbeVersion, Submission
from leaderboard.policy import MAX_ATTEMPTS, PRIMARY_QUEUE, RUN_RETRY_BACKOFF_MAX_S, SECONDARY_QUEUE
from leaderboard.presentation import duration_text
from leaderboard.selectors.submissions import queue_shares, queued_work
from leaderboard.services import runs
from leaderboard.services.submissions import submission_create
from leaderboard.tasks import evaluation_run_execute_task
from tests.factories import (
    EvaluationRunFactory,
    ProbeVersionFactory,
    ReevaluationCycleFactory,
    SubmissionFactory,
    UserFactory,
)
from tests.leaderboard.test_submission_validation import linear_probe_bytes, metadata, post, stored_files

pytestmark = pytest.mark.django_db
Run = EvaluationRun
T0 = timezone.now() - timedelta(days=1)


def queued(version, n: int, *, at: int, kind: str = Run.Kind.SCORE, **fields) -> list[Run]:
    """``n`` queued runs of ``version``, queued at T0 + at, at + 1, ... seconds."""
    return [
        EvaluationRunFactory(
            probe_version=version,
            kind=kind,
            status=Run.Status.QUEUED,
            queued_at=T0 + timedelta(seconds=at + i),
            **fields,
        )
        for i in range(n)
    ]


def take_all(token: int, *, clock: list[int]) -> list[Run]:
    """Claim runs one after the other with messages for ``token`` as a worker would, each started
    a minute after the one before (``clock``) and finished at once; the runs in the order taken."""
    taken = []
    while (run := runs.evaluation_run_claim_next(run_id=token, worker="w")) is not None:
        clock[0] += 1
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.SUCCEEDED,
            started_at=T0 + timedelta(hours=1, minutes=clock[0]),
            finished_at=T0 + timedelta(hours=1, minutes=clock[0], seconds=30),
        )
        taken.append(run)
    return taken


# --------------------------------------------------------------------------- the order runs are taken in


def test_runs_are_taken_round_robin_across_submitters_not_first_in_first_out(registry):
    ada, bob, cy = (ProbeVersionFactory(probe__owner=UserFactory()) for _ in range(3))
    deep = queued(ada, 12, at=0)  # ada was first, 12 deep
    queued(bob, 3, at=100)
    queued(cy, 1, at=200)
    order = take_all(deep[0].pk, clock=[0])
    owners = {ada.pk: "ada", bob.pk: "bob", cy.pk: "cy"}
    assert [owners[r.probe_version_id] for r in order] == (
        ["ada", "bob", "cy", "ada", "bob", "ada", "bob"] + ["ada"] * 9
    )
    # within one submitter, first in, first out
    assert [r.pk for r in order if r.probe_version_id == ada.pk] == [r.pk for r in deep]


def test_the_submitter_served_longest_ago_goes_next(registry):
    ada, bob = ProbeVersionFactory(), ProbeVersionFactory()
    first = queued(ada, 2, at=0)
    queued(bob, 2, at=10)
    # ada's latest run started an hour ago, bob's a minute ago
    EvaluationRunFactory(probe_version=ada, started_at=timezone.now() - timedelta(hours=1))
    EvaluationRunFactory(probe_version=bob, started_at=timezone.now() - timedelta(minutes=1))
    assert runs.evaluation_run_next(queue=PRIMARY_QUEUE) == first[0].pk
    Run.objects.filter(probe_version=ada).update(started_at=timezone.now())  # ada served just now
    nxt = runs.evaluation_run_next(queue=PRIMARY_QUEUE)
    assert Run.objects.get(pk=nxt).probe_version_id == bob.pk


def test_reference_probes_and_the_reevaluation_go_before_the_submitters(registry, system_account):
    ada = ProbeVersionFactory()
    waiting = queued(ada, 3, at=0)
    reference = queued(ProbeVersionFactory(probe__owner=system_account), 1, at=500, kind=Run.Kind.REFERENCE)
    cycle = ReevaluationCycleFactory(status="running")
    holdout = queued(ProbeVersionFactory(), 1, at=400, kind=Run.Kind.HOLDOUT, cycle=cycle)
    order = take_all(waiting[0].pk, clock=[0])
    # the maintainers' own work in its own order (oldest first), then the submitters'
    assert [r.pk for r in order] == [holdout[0].pk, reference[0].pk] + [r.pk for r in waiting]


def test_a_message_takes_only_a_run_of_its_own_queue(registry):
    ada, bob = ProbeVersionFactory(), ProbeVersionFactory()
    secondary = queued(ada, 1, at=0, kind=Run.Kind.TRANSFER)
    primary = queued(bob, 1, at=10)
    assert runs.evaluation_run_next(queue=PRIMARY_QUEUE) == primary[0].pk
    assert runs.evaluation_run_next(queue=SECONDARY_QUEUE) == secondary[0].pk
    # a secondary run's message never takes the primary run (a worker given only `primary`
    # measures the board's numbers and nothing else), and vice versa
    assert runs.evaluation_run_claim_next(run_id=secondary[0].pk, worker="w").pk == secondary[0].pk
    assert runs.evaluation_run_claim_next(run_id=secondary[0].pk, worker="w") is None
    assert Run.objects.get(pk=primary[0].pk).status == Run.Status.QUEUED


def test_a_duplicate_message_finds_nothing_and_claims_nothing_twice(registry):
    (run,) = queued(ProbeVersionFactory(), 1, at=0)
    first = runs.evaluation_run_claim_next(run_id=run.pk, worker="a")
    assert first is not None and first.attempts == 1
    assert runs.evaluation_run_claim_next(run_id=run.pk, worker="b") is None
    assert runs.evaluation_run_claim_next(run_id=10**9, worker="b") is None  # no such run
    assert Run.objects.get(pk=run.pk).worker_host == "a"


def test_a_run_put_back_after_an_infrastructure_fault_waits_for_its_own_retry(registry):
    ada, bob = ProbeVersionFactory(), ProbeVersionFactory()
    (faulted,) = queued(ada, 1, at=0, error_kind="infrastructure", attempts=1)
    Run.objects.filter(pk=faulted.pk).update(queued_at=timezone.now())  # put back just now
    (other,) = queued(bob, 1, at=10)
    assert runs.evaluation_run_next(queue=PRIMARY_QUEUE) == other.pk
    # its retry message claims it first, whoever's turn it is
    retried = runs.evaluation_run_claim_next(run_id=faulted.pk, worker="w", retry=True)
    assert retried.pk == faulted.pk and retried.attempts == 2
    # after the longest backoff any message may take a run left so
    Run.objects.filter(pk=faulted.pk).update(
        status=Run.Status.QUEUED,
        error_kind="infrastructure",
        queued_at=timezone.now() - timedelta(seconds=RUN_RETRY_BACKOFF_MAX_S + 1),
    )
    Run.objects.filter(pk=other.pk).update(status=Run.Status.SUCCEEDED)
    assert runs.evaluation_run_next(queue=PRIMARY_QUEUE) == faulted.pk


def test_the_run_task_retries_the_run_that_faulted_not_the_one_its_message_names(registry, monkeypatch):
    from probebench.celery import app

    monkeypatch.setattr(app.conf, "task_eager_propagates", False)  # eager retries run inline
    ada, bob = ProbeVersionFactory(), ProbeVersionFactory()
    (named,) = queued(ada, 1, at=0)
    (fair,) = queued(bob, 1, at=10)
    EvaluationRunFactory(probe_version=ada, started_at=timezone.now())  # ada was served last

    def no_disk(*, run, progress):
        raise InfrastructureError("No space left on device")

    monkeypatch.setattr(axes, "run_execute", no_disk)
    assert evaluation_run_execute_task.delay(named.pk).get() == "failed"
    fair.refresh_from_db()
    named.refresh_from_db()
    assert fair.status == Run.Status.FAILED and fair.attempts == MAX_ATTEMPTS, fair.error
    assert "No space left on device" in fair.error
    assert named.status == Run.Status.QUEUED and named.attempts == 0


# --------------------------------------------------------------------------- the queue cap


def test_queued_work_counts_measured_means_and_defaults(registry, researcher):
    sub = SubmissionFactory(submitter=researcher, probe_version__probe__owner=researcher)
    version = sub.probe_version
    queued(version, 2, at=0, submission=sub)
    queued(version, 1, at=5, kind=Run.Kind.TRANSFER, submission=sub)
    now = timezone.now()
    EvaluationRunFactory(
        probe_version=ProbeVersionFactory(), started_at=now - timedelta(seconds=1000), finished_at=now
    )
    EvaluationRunFactory(
        probe_version=version,
        kind=Run.Kind.REPRODUCE,
        status=Run.Status.RUNNING,
        started_at=now - timedelta(seconds=20),
        submission=sub,
    )
    work = queued_work(submitter=researcher, now=now)
    # two score runs at the measured 1000 s, a transfer at its default 300 s, a reproduce run
    # running for 20 s of its default 120 s
    assert (work.queued, work.running) == (3, 1)
    assert work.seconds == pytest.approx(2 * 1000 + 300 + 100)
    assert queued_work(submitter=UserFactory(), now=now).seconds == 0


@pytest.fixture
def api(registry, researcher):
    client = APIClient()
    client.force_authenticate(user=researcher)
    return client


def test_a_submission_over_the_queue_cap_is_429_and_stores_nothing(api, researcher, settings):
    settings.MAX_QUEUED_RUN_SECONDS = 60
    first = post(api, linear_probe_bytes(seed=71), metadata(name="First"))
    assert first.status_code == 201, first.content  # nothing queued: one is always accepted
    planned = Run.objects.filter(submission__submitter=researcher).count()
    assert planned > 1

    before = (
        Probe.objects.count(),
        ProbeVersion.objects.count(),
        Submission.objects.count(),
        Run.objects.count(),
    )
    files = sorted(stored_files())
    data = linear_probe_bytes(seed=72)
    response = post(api, data, metadata(name="Second"))
    assert response.status_code == 429, response.content
    body = response.json()
    assert body["field"] == "artifact"
    assert (
        "PROBEBENCH_MAX_QUEUED_RUN_SECONDS" in body["error"] and "Submit it again in about" in body["error"]
    )
    # no run has finished: each score run counts its default 60 s; none runs, so the wait is the
    # whole of the first submission's work
    assert body["retry_after_s"] == planned * 60 == int(response["Retry-After"])
    assert duration_text(planned * 60) in body["error"]
    assert (
        Probe.objects.count(),
        ProbeVersion.objects.count(),
        Submission.objects.count(),
        Run.objects.count(),
    ) == before
    assert sorted(stored_files()) == files
    assert not artifacts.artifact_abspath(artifacts.artifact_relpath(artifacts.sha256_bytes(data))).exists()

    # once the queued work has drained, the same upload is accepted
    Run.objects.update(status=Run.Status.SUCCEEDED)
    assert post(api, data, metadata(name="Second")).status_code == 201


def test_the_cap_counts_only_the_account_s_own_work(api, researcher, stranger, settings):
    settings.MAX_QUEUED_RUN_SECONDS = 60
    other = APIClient()
    other.force_authenticate(user=stranger)
    assert post(other, linear_probe_bytes(seed=73), metadata(name="Theirs")).status_code == 201
    assert post(api, linear_probe_bytes(seed=74), metadata(name="Mine")).status_code == 201


def test_the_system_account_is_not_capped(registry, system_account, settings):
    settings.MAX_QUEUED_RUN_SECONDS = 60
    for seed in (75, 76):
        sub = submission_create(
            user=system_account,
            artifact=SimpleUploadedFile("probe.safetensors", linear_probe_bytes(seed=seed)),
            metadata=metadata(name=f"Maintainers' {seed}"),
            via="seed",
        )
        assert sub.status == Submission.Status.QUEUED


def test_the_web_form_shows_the_queue_cap_on_the_form(client, api, researcher, settings):
    settings.MAX_QUEUED_RUN_SECONDS = 60
    assert post(api, linear_probe_bytes(seed=77), metadata(name="Via the API")).status_code == 201
    client.force_login(researcher)
    meta = metadata(name="Via the form")
    form = {k: v for k, v in meta.items() if k not in ("authors", "training_data")} | {"authors": "Ada"}
    form["artifact"] = SimpleUploadedFile("probe.safetensors", linear_probe_bytes(seed=78))
    response = client.post(reverse("submit:new"), form)
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    errors = " ".join(response.context["form"].errors["artifact"])
    assert "PROBEBENCH_MAX_QUEUED_RUN_SECONDS" in errors and "Submit it again in about" in errors
    assert not Probe.objects.filter(name="Via the form").exists()


# --------------------------------------------------------------------------- the queue page


def test_the_queue_page_shows_each_submitter_s_share_without_names(client, registry, system_account):
    ada, bob = UserFactory(username="ada-lovelace"), UserFactory(username="bob-builder")
    a_sub = SubmissionFactory(probe_version__probe__owner=ada, status="running")
    b_sub = SubmissionFactory(probe_version__probe__owner=bob, status="queued")
    queued(a_sub.probe_version, 2, at=0, submission=a_sub)
    EvaluationRunFactory(
        probe_version=a_sub.probe_version,
        submission=a_sub,
        status=Run.Status.RUNNING,
        started_at=timezone.now(),
        kind=Run.Kind.TRANSFER,
    )
    queued(b_sub.probe_version, 1, at=10, submission=b_sub)
    queued(ProbeVersionFactory(probe__owner=system_account), 1, at=20, kind=Run.Kind.REFERENCE)

    shares = {s.label: s for s in queue_shares()}
    a_share = shares[f"The submitter of #{a_sub.pk}"]
    assert (a_share.work.queued, a_share.work.running) == (2, 1)
    assert a_share.work.seconds == pytest.approx(2 * 60 + 300, abs=2)  # the transfer just started
    b_share = shares[f"The submitter of #{b_sub.pk}"]
    assert (b_share.work.queued, b_share.work.running, b_share.work.seconds) == (1, 0, 60)
    assert shares["Reference probes (maintainers)"].work.queued == 1
    assert sum(s.share for s in shares.values()) == pytest.approx(1.0)

    html = client.get(reverse("leaderboard:queue")).content.decode()
    assert f"The submitter of #{a_sub.pk}" in html and f"The submitter of #{b_sub.pk}" in html
    assert "Reference probes (maintainers)" in html
    assert "ada-lovelace" not in html and "bob-builder" not in html
    assert (
        html.index("Reference probes (maintainers)")
        < html.index(f"The submitter of #{a_sub.pk}")
        < html.index(f"The submitter of #{b_sub.pk}")
    )  # the maintainers' work first, then the most work


def test_durations_read_as_words():
    assert [duration_text(s) for s in (None, 0, 45, 60, 61, 3600, 7260)] == [
        "—",
        "0 s",
        "45 s",
        "1 min",
        "2 min",
        "1 h 00 min",
        "2 h 01 min",
    ]
