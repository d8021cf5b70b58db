"""Two accounts through a real Celery worker on Redis and PostgreSQL: account A submits first,
enough runs to be many deep, then account B; B's first run starts long before A's queue has
drained (runs are taken round-robin across submitters, not first in, first out).

Each submission is what ``submission_create`` makes once an upload is validated (the rows, the
planner's runs, published to the broker when the transaction commits). Its stored artifact is not
a safetensors file, so every run fails at once (an artifact fault, never retried) without loading
a model: the order in which the worker claimed them is what is measured."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import transaction

from leaderboard.models import EvaluationRun, Submission
from leaderboard.registry_sync import registry_sync
from leaderboard.services.runs import evaluation_runs_dispatch_on_commit, evaluation_runs_plan
from tests.factories import ProbeVersionFactory, SubmissionFactory, UserFactory
from tests.integration.conftest import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]
Run = EvaluationRun


def _submit(user) -> list[int]:
    """A hallucination probe on SmolLM2 whose artifact is not a safetensors file (its hash
    matches), submitted by ``user``: the ids of the runs planned and published."""
    data = f"not a probe {uuid.uuid4()}".encode()
    sha = hashlib.sha256(data).hexdigest()
    path = Path(settings.ARTIFACT_ROOT) / sha[:2] / f"{sha}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    with transaction.atomic():
        version = ProbeVersionFactory(
            probe__owner=user,
            probe__category_id="hallucination",
            probe__base_model_id="smollm2-135m-instruct",
            artifact_sha256=sha,
            artifact_path=f"{sha[:2]}/{sha}.safetensors",
        )
        sub = SubmissionFactory(probe_version=version, submitter=user, status=Submission.Status.QUEUED)
        runs = evaluation_runs_plan(version=version, submission=sub)
        evaluation_runs_dispatch_on_commit(runs)
    return [r.pk for r in runs]


def test_a_second_account_s_first_run_starts_before_the_first_account_s_tenth(worker_env, start_worker):
    registry_sync(verify_hashes=False)
    ada, bob = UserFactory(username="ada-deep"), UserFactory(username="bob-later")
    ada_runs = _submit(ada) + _submit(ada)  # published first
    bob_runs = _submit(bob)  # published after every run of ada's
    assert len(ada_runs) >= 10 and bob_runs

    worker = start_worker("fair")
    every = ada_runs + bob_runs
    wait_for(
        lambda: Run.objects.filter(pk__in=every, status=Run.Status.FAILED).count() == len(every),
        timeout=240,
        what="every run to finish",
        workers=[worker],
    )
    started = dict(Run.objects.filter(pk__in=every).values_list("pk", "started_at"))
    ada_starts = sorted(started[pk] for pk in ada_runs)
    bob_first = min(started[pk] for pk in bob_runs)
    order = ["bob" if pk in bob_runs else "ada" for pk in sorted(started, key=started.__getitem__)]
    assert bob_first < ada_starts[9], order
    # every run executed once, by the one worker, as an artifact fault
    runs = list(Run.objects.filter(pk__in=every))
    assert all(r.attempts == 1 and r.worker_host.startswith("fair@") for r in runs)
    assert all("not a safetensors file" in r.error for r in runs)
