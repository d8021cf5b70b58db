"""What a newcomer sees while the board fills: the pages say what is being measured, the public
queue shows a failed reference probe with its reason, the terminal's estimate is made from measured
run durations; and what keeps the numbers right and the runs moving when the demo stops and starts
(the runs a stopped worker held, a probe still measured when its eval-awareness reference is scored)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from evaluator.errors import EvaluatorError
from leaderboard.management.commands.demo import DemoLock
from leaderboard.models import EvaluationRun, Submission, Task
from leaderboard.selectors.progress import pending_by_category, runs_progress
from leaderboard.selectors.shared import submission_runs
from leaderboard.services import runs
from leaderboard.services.lifecycle import evaluation_runs_release
from leaderboard.services.reference_updates import reference_update_start
from tests.factories import EvaluationRunFactory, ProbeFactory, ProbeVersionFactory, SubmissionFactory

Run = EvaluationRun
Status = Submission.Status
pytestmark = pytest.mark.django_db


def submission(*, category="refusal", status=Status.QUEUED, is_reference=True, reason="", **probe):
    if is_reference:  # reference probes are the system account's, as the install makes them
        from leaderboard.services.accounts import system_account_get_or_create

        probe.setdefault("owner", system_account_get_or_create())
    version = ProbeVersionFactory(  # layer 3: one every base model has (MiniLM has 6)
        probe=ProbeFactory(category_id=category, is_reference=is_reference, **probe), layer=3
    )
    return SubmissionFactory(probe_version=version, status=status, failure_reason=reason)


# --------------------------------------------------------------------------- the pages


def test_a_category_with_reference_probes_in_the_queue_says_so_instead_of_open_slot(client, registry):
    submission(status=Status.QUEUED)
    submission(status=Status.RUNNING)
    page = client.get(reverse("leaderboard:category", args=["refusal"])).content.decode()
    assert "2 reference probes are being measured (1 running, 1 queued)" in page
    assert "Open slot" not in page
    index = client.get(reverse("leaderboard:index")).content.decode()
    assert "2 reference probes are being measured" in index
    # a category with nothing pending is still an open slot
    assert "Open slot" in client.get(reverse("leaderboard:category", args=["sandbagging"])).content.decode()


def test_a_researchers_pending_probe_is_counted_without_calling_it_a_reference(registry):
    submission(is_reference=False)
    assert str(pending_by_category()["refusal"]) == "1 probe is being measured (0 running, 1 queued)"


def test_the_public_queue_shows_a_failed_reference_probe_with_its_reason_but_not_a_researchers(
    client, registry
):
    submission(status=Status.FAILED, reason="onpolicy-city-country-v1/test: unknown template", name="Ref")
    submission(status=Status.FAILED, is_reference=False, reason="my secret layer", name="Private")
    page = client.get(reverse("leaderboard:queue")).content.decode()
    assert "Failed reference probes" in page
    assert "onpolicy-city-country-v1/test: unknown template" in page and "Ref v1" in page
    assert "my secret layer" not in page and "Private" not in page


# --------------------------------------------------------------------------- the estimate


def test_the_estimate_covers_the_phase_in_progress_and_names_the_running_run(registry):
    now = timezone.now()
    version = ProbeVersionFactory()
    EvaluationRunFactory(probe_version=version, status=Run.Status.QUEUED, kind=Run.Kind.SCORE)
    EvaluationRunFactory(probe_version=version, status=Run.Status.QUEUED, kind=Run.Kind.REFERENCE)
    EvaluationRunFactory(probe_version=version, status=Run.Status.QUEUED, kind=Run.Kind.STEER)
    progress = runs_progress(now=now)
    assert progress.phase == "primary" and progress.eta_s is None and progress.later == 1
    assert progress.eta_text().startswith("unknown (no primary run has finished yet), then 1 secondary")

    for seconds in (20, 40):  # score runs measured: 30 s on average; no reference run yet
        EvaluationRunFactory(
            probe_version=version,
            kind=Run.Kind.SCORE,
            started_at=now - timedelta(seconds=seconds + 100),
            finished_at=now - timedelta(seconds=100),
        )
    progress = runs_progress(now=now)
    # the reference run is counted at the phase's mean: never unknown once one primary run finished
    assert progress.eta_s == pytest.approx(30 + 30) and progress.unmeasured == ["reference"]
    assert (
        progress.eta_text()
        == "~1m for the primary runs, reference at the phase's mean, then 1 secondary run(s)"
    )

    # the primary phase done: the secondary one, with the run being executed named
    Run.objects.filter(status=Run.Status.QUEUED, kind__in=["score", "reference"]).update(
        status=Run.Status.SUCCEEDED
    )
    EvaluationRunFactory(
        probe_version=version,
        kind=Run.Kind.STEER,
        started_at=now - timedelta(seconds=700),
        finished_at=now - timedelta(seconds=100),
    )
    EvaluationRunFactory(
        probe_version=version,
        status=Run.Status.RUNNING,
        kind=Run.Kind.STEER,
        task_id="cities-truth-v1",
        split="test",
        started_at=now - timedelta(seconds=200),
    )
    progress = runs_progress(now=now)
    assert progress.phase == "secondary" and progress.eta_s == pytest.approx(600 + 400)
    assert f"running: steer of {version.probe.slug} on cities-truth-v1/test" in progress.eta_text()
    assert runs_progress(now=now, workers=2).eta_s == pytest.approx((600 + 400) / 2)


# --------------------------------------------------------------------------- stops and starts


def test_the_runs_a_stopped_worker_held_go_back_to_the_queue_at_once(registry):
    mine = runs.evaluation_run_claim(
        run_id=EvaluationRunFactory(status=Run.Status.QUEUED).pk, worker="demo-1@h"
    )
    other = runs.evaluation_run_claim(run_id=EvaluationRunFactory(status=Run.Status.QUEUED).pk, worker="w2@h")
    dispatched: list[int] = []
    assert evaluation_runs_release(worker_host="demo-1@h", dispatch=dispatched.append) == [mine.pk]
    assert dispatched == [mine.pk]
    mine.refresh_from_db()
    assert mine.status == Run.Status.QUEUED and mine.worker_host == "" and "stopped" in mine.step
    assert Run.objects.get(pk=other.pk).status == Run.Status.RUNNING  # another worker's run is left alone
    again = runs.evaluation_run_claim(run_id=mine.pk, worker="demo-1@h")
    assert again.attempts == 2
    # a late write of the stopped attempt can never match the next one
    assert runs.run_held(mine).update(status=Run.Status.SUCCEEDED) == 0


def test_a_second_demo_on_the_same_data_directory_is_refused_and_a_stale_lock_taken_over(tmp_path):
    from django.core.management.base import CommandError

    first = DemoLock(tmp_path).acquire(host="127.0.0.1", port="8123")
    with pytest.raises(CommandError, match=r"pid \d+, serving http://127.0.0.1:8123/"):
        DemoLock(tmp_path).acquire(host="127.0.0.1", port="8124")
    first.release()
    # a lock file left by a demo that was killed (its pid no longer holds the flock)
    (tmp_path / "demo.lock").write_text('{"pid": 999999, "host": "127.0.0.1", "port": "8000"}')
    lock = DemoLock(tmp_path).acquire(host="127.0.0.1", port="8125")
    assert lock.stale == {"pid": 999999, "host": "127.0.0.1", "port": "8000"}
    lock.release()


# --------------------------------------------------------------------------- the numbers


def test_a_probe_still_measured_when_its_ea_reference_is_scored_waits_for_the_reference_runs(registry):
    """Planned before its base model had a scored eval-awareness reference, the probe has no
    reference run on its tasks: the reference update plans them, so its auroc_ea is measured."""
    ea = submission(category="eval_awareness", status=Status.SCORED, reference_role="eval_awareness")
    dependent = submission(category="hallucination", status=Status.QUEUED, is_reference=False)
    EvaluationRunFactory(
        probe_version=dependent.probe_version,
        submission=dependent,
        task_id="halueval-qa-v1",
        split="test",
        status=Run.Status.SUCCEEDED,
    )
    reference_update_start(new_version=ea.probe_version, dispatch=False)
    reference = Run.objects.get(probe_version=ea.probe_version, kind=Run.Kind.REFERENCE)
    assert reference.task_id == "halueval-qa-v1" and reference.status == Run.Status.QUEUED
    # the submission now waits on it (it is not scored with auroc_ea imputed)
    assert reference in submission_runs(dependent)


def test_a_probe_submitted_while_its_ea_reference_is_measured_gets_the_reference_runs_beside_its_own(
    registry,
):
    """The demo submits every probe at once: each probe's reference runs are planned with its
    own runs (not queued behind everything when the reference is scored)."""
    ea = submission(category="eval_awareness", status=Status.RUNNING, reference_role="eval_awareness")
    dependent = submission(category="hallucination", status=Status.QUEUED, is_reference=False)
    task = Task.objects.get(slug="halueval-qa-v1")
    planned = runs.score_runs_plan(version=dependent.probe_version, tasks=[task], submission=dependent)
    assert any(r.kind == Run.Kind.SCORE for r in planned)
    reference = [r for r in planned if r.kind == Run.Kind.REFERENCE]
    assert [(r.probe_version_id, r.task_id, r.split) for r in reference] == [
        (ea.probe_version_id, "halueval-qa-v1", "test")
    ]
    # not the reference until it is scored: the probe does not wait on its runs meanwhile
    assert all(r.kind == Run.Kind.SCORE for r in submission_runs(dependent))


# --------------------------------------------------------------------------- the worker's log


def test_the_worker_log_names_a_failed_run_its_task_and_the_error(registry, monkeypatch, caplog):
    queued = EvaluationRunFactory(status=Run.Status.QUEUED, task_id="onpolicy-city-country-v1", split="test")

    def fail(*, run, progress):
        raise EvaluatorError("unknown template 'contrast_pair'; accepted: single")

    monkeypatch.setattr(runs.axes, "run_execute", fail)
    with caplog.at_level(logging.WARNING, logger="leaderboard.services.runs"):
        assert (
            runs.evaluation_run_execute(run_id=queued.pk, worker="w@h", on_finished=lambda run: None)
            == "failed"
        )
    line = next(r.getMessage() for r in caplog.records if "failed" in r.getMessage())
    assert f"run {queued.pk} failed" in line
    assert "score of" in line and "onpolicy-city-country-v1/test" in line
    assert "unknown template 'contrast_pair'" in line


def _imported_bundle(*, entries: int):
    """The row of a bundle imported from another board (its entries are the test's to make)."""
    from leaderboard.models import ResultBundle

    return ResultBundle.objects.create(
        id=f"{entries:064x}",
        role="imported",
        board="elsewhere",
        signer_fingerprint="f" * 16,
        signer_public_key="k",
        created_at=timezone.now(),
        entries=entries,
        bytes=1,
    )


def test_a_probe_does_not_wait_on_the_replication_of_an_imported_references_runs(registry):
    """An eval-awareness reference imported from a bundle: its ``reference`` runs queued here to
    replicate it go after every other run, and a user's probe reads the published run meanwhile
    instead of waiting for them; once one succeeds here, the probe reads (and waits on) that one."""
    from leaderboard.models import PublishedRun
    from leaderboard.selectors.shared import REPLICATING

    ea = submission(category="eval_awareness", status=Status.SCORED, reference_role="eval_awareness")
    bundle = _imported_bundle(entries=1)
    ref = ea.probe_version
    ref.bundle = bundle
    ref.save(update_fields=["bundle"])
    model = ref.probe.base_model_id
    PublishedRun.objects.create(
        bundle=bundle,
        probe_version=ref,
        kind=Run.Kind.REFERENCE,
        task_id="halueval-qa-v1",
        split="test",
        base_model_id=model,
    )
    queued = {"kind": Run.Kind.REFERENCE, "status": Run.Status.QUEUED, "probe_version": ref}
    local = EvaluationRunFactory(task=Task.objects.get(slug="halueval-qa-v1"), **queued)
    unpublished = EvaluationRunFactory(task=Task.objects.get(slug="cities-truth-v1"), **queued)
    dependent = submission(category="hallucination", status=Status.QUEUED, is_reference=False)
    for task in ("halueval-qa-v1", "cities-truth-v1"):
        EvaluationRunFactory(
            probe_version=dependent.probe_version, submission=dependent, task=Task.objects.get(slug=task)
        )
    assert Run.objects.filter(REPLICATING, pk=local.pk).exists()
    # a task the bundle published no reference run for: nothing stands in, the probe needs this
    # run, so it is not held back behind the replication (the workers take it before `local`)
    assert not Run.objects.filter(REPLICATING, pk=unpublished.pk).exists()
    Run.objects.filter(pk=unpublished.pk).update(queued_at=timezone.now())
    assert runs.evaluation_run_next(queue=runs.run_queue(Run.Kind.REFERENCE)) == unpublished.pk
    waits_on = set(submission_runs(dependent).values_list("pk", flat=True))
    assert local.pk not in waits_on and unpublished.pk in waits_on
    Run.objects.filter(pk=local.pk).update(status=Run.Status.SUCCEEDED)
    assert local.pk in set(submission_runs(dependent).values_list("pk", flat=True))


def test_an_imported_references_reference_runs_are_queued_after_the_other_replication_runs(
    registry, monkeypatch
):
    """The demo replicates entry by entry: the eval-awareness reference's dozens of ``reference``
    runs (one per task of every other category) go after every other imported entry's runs."""
    from leaderboard.models import PublishedRun
    from leaderboard.services import replication

    monkeypatch.setattr(replication, "evaluation_runs_dispatch_on_commit", lambda runs: None)
    bundle = _imported_bundle(entries=2)
    ea = submission(category="eval_awareness", status=Status.SCORED, reference_role="eval_awareness")
    entry = submission(category="refusal", status=Status.SCORED)
    for sub in (ea, entry):
        sub.probe_version.bundle = bundle
        sub.probe_version.save(update_fields=["bundle"])
    # the demo's order: the eval-awareness reference last
    assert replication.replications_start([entry.probe_version, ea.probe_version]) > 0
    planned = Run.objects.filter(probe_version__bundle=bundle)
    reference = planned.filter(kind=Run.Kind.REFERENCE)
    others = planned.exclude(kind=Run.Kind.REFERENCE)
    for run in reference:  # what the bundle published: the runs these replicate
        PublishedRun.objects.create(
            bundle=bundle,
            probe_version=run.probe_version,
            kind=run.kind,
            task=run.task,
            split=run.split,
            base_model=run.base_model,
        )
    assert reference.exists() and others.filter(probe_version=entry.probe_version).exists()
    last_other = max(others.values_list("queued_at", flat=True))
    assert min(reference.values_list("queued_at", flat=True)) >= last_other
    assert runs.evaluation_run_next(queue="primary") in set(
        others.order_by("queued_at", "pk").values_list("pk", flat=True)[:1]
    )


def test_an_imported_reference_replicates_every_reference_run_it_published(registry, monkeypatch):
    """Its published ``reference`` runs are planned here even on tasks no probe here reads (or when
    it is no longer the current reference), never tied to a submission; each one that finishes
    moves its own replication state."""
    from leaderboard.models import PublishedRun
    from leaderboard.services import replication
    from leaderboard.services.lifecycle import evaluation_run_fan_out

    monkeypatch.setattr(replication, "evaluation_runs_dispatch_on_commit", lambda runs: None)
    bundle = _imported_bundle(entries=1)
    ea = submission(category="eval_awareness", status=Status.SCORED, reference_role="eval_awareness")
    ref = ea.probe_version
    ref.bundle = bundle
    ref.save(update_fields=["bundle"])
    Submission.objects.filter(pk=ea.pk).update(via="bundle")
    model = ref.probe.base_model_id
    for task in ("halueval-qa-v1", "harmful-requests-v1"):
        PublishedRun.objects.create(
            bundle=bundle,
            probe_version=ref,
            kind=Run.Kind.REFERENCE,
            task_id=task,
            split="test",
            base_model_id=model,
        )
    replication.replications_start([ref])
    made = Run.objects.filter(probe_version=ref, kind=Run.Kind.REFERENCE)
    assert sorted(made.values_list("task_id", flat=True)) == ["halueval-qa-v1", "harmful-requests-v1"]
    assert not made.filter(submission__isnull=False).exists()
    assert replication.replication_refresh(ref)["runs_pending"] >= 2
    run = made.get(task_id="halueval-qa-v1")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED, finished_at=timezone.now())
    before = ref.replication["runs_pending"]
    evaluation_run_fan_out(Run.objects.get(pk=run.pk))
    ref.refresh_from_db()
    assert ref.replication["runs_pending"] == before - 1
