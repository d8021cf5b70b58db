"""An evaluation run has a time budget: past Celery's soft time limit the run fails with that reason
and is not retried (before, the limit's exception was taken for an infrastructure fault and the run
was queued again, so one submission could hold a worker for hours).

Celery's prefork pool delivers the soft limit as a signal whose handler raises
``SoftTimeLimitExceeded`` in the task's thread, wherever it is; the test does the same with a
timer while a real run (a real probe on SmolLM2) is executing.
"""

import signal

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from rest_framework.test import APIClient

from leaderboard.models import EvaluationRun, Submission
from leaderboard.services.lifecycle import evaluation_run_process
from leaderboard.tasks import evaluation_run_execute_task
from tests.leaderboard.test_submission_validation import linear_probe_bytes, metadata, post

pytestmark = pytest.mark.django_db
Run = EvaluationRun


def test_the_run_task_carries_the_configured_time_budget(settings):
    assert evaluation_run_execute_task.soft_time_limit == settings.RUN_SOFT_LIMIT_S
    assert evaluation_run_execute_task.time_limit == settings.RUN_HARD_LIMIT_S > settings.RUN_SOFT_LIMIT_S


@pytest.mark.model
def test_a_run_past_its_time_budget_fails_with_the_reason_and_is_not_retried(
    registry, researcher, settings, tmp_path
):
    client = APIClient()
    client.force_authenticate(user=researcher)
    assert post(client, linear_probe_bytes(seed=51), metadata()).status_code == 201
    run = Run.objects.filter(kind=Run.Kind.SCORE).order_by("pk").first()

    # As in a worker after its first run, the base model is loaded (and torch, transformers and
    # their lazy submodules imported) before the clock starts: an exception raised in the middle
    # of a first `import torch` would leave a half-initialised torch for the rest of the session.
    from leaderboard import runner

    runner.loaded_model(run.base_model_id)
    # an empty activation cache (the model stays loaded): the run must harvest, not read the
    # activations another test already cached at every layer
    settings.CACHE_DIR = tmp_path / "cache"

    def soft_limit(signum, frame):
        raise SoftTimeLimitExceeded()

    previous = signal.signal(signal.SIGALRM, soft_limit)
    signal.setitimer(signal.ITIMER_REAL, 1.0)  # the run harvests activations: tens of seconds
    try:
        outcome = evaluation_run_process(run_id=run.pk, worker="budget-test")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    assert outcome == "failed"  # returned, not raised: the task does not retry it
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.attempts == 1
    assert run.error_kind == "timeout"
    assert run.error.startswith(f"the run exceeded its time budget of {settings.RUN_SOFT_LIMIT_S} s")
    # the submission waits for its other runs, then fails with this run's reason
    assert Submission.objects.get().status in (Submission.Status.QUEUED, Submission.Status.RUNNING)


def test_a_stored_recipe_out_of_bounds_fails_its_run_as_the_artifacts_fault_without_retry(
    registry, researcher
):
    """The worker applies the same hyperparameter bounds as the submission check (a version stored
    before the bounds existed, or written around the services): the run fails at once, naming the
    hyperparameter, and is not retried."""
    client = APIClient()
    client.force_authenticate(user=researcher)
    recipe = {"method": "mlp", "task": "halueval-qa-v1", "layer": 15, "seed": 0}
    assert post(client, linear_probe_bytes(seed=52), metadata(recipe=recipe)).status_code == 201
    sub = Submission.objects.get()
    sub.probe_version.recipe = {**recipe, "hyperparameters": {"hidden": 1_000_000}}
    sub.probe_version.save(update_fields=["recipe"])
    run = Run.objects.filter(kind=Run.Kind.SCORE).order_by("pk").first()

    assert evaluation_run_process(run_id=run.pk, worker="bounds-test") == "failed"
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.attempts == 1 and run.error_kind == "artifact"
    assert (
        "hyperparameter hidden = 1000000 is not accepted for mlp; accepted: an integer in 1..512" in run.error
    )
