"""The runs the board ranks on go before the secondary axes: score runs are published to the
``primary`` queue, transfer/reproduce/steer runs to ``secondary``, and a real worker (``-Q
default,primary,secondary``) takes the next message from the first non-empty queue, on the broker
this test process is configured with (the embedded filesystem broker by default, Redis when
REDIS_URL is set).

The runs here fail at once (their artifact is not a safetensors file: an artifact fault, never
retried), so the order in which the worker claimed them is what is measured, without a model."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from leaderboard.axes import run_queue
from leaderboard.models import EvaluationRun, Task
from leaderboard.policy import PRIMARY_QUEUE, SECONDARY_QUEUE
from leaderboard.registry_sync import registry_sync
from leaderboard.services.runs import evaluation_runs_dispatch_on_commit
from tests.factories import ProbeVersionFactory
from tests.integration.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
Run = EvaluationRun
SMOL = "smollm2-135m-instruct"


def _broken_version():
    """A probe version whose stored artifact is not a safetensors file (its hash matches)."""
    data = f"not a probe {uuid.uuid4()}".encode()
    sha = hashlib.sha256(data).hexdigest()
    path = Path(settings.ARTIFACT_ROOT) / sha[:2] / f"{sha}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return ProbeVersionFactory(
        probe__base_model_id=SMOL, artifact_sha256=sha, artifact_path=f"{sha[:2]}/{sha}.safetensors"
    )


def test_run_kinds_are_routed_to_their_queues():
    assert {k: run_queue(k) for k in Run.Kind.values} == {
        "score": PRIMARY_QUEUE,
        "reference": PRIMARY_QUEUE,
        "holdout": PRIMARY_QUEUE,
        "transfer": SECONDARY_QUEUE,
        "reproduce": SECONDARY_QUEUE,
        "steer": SECONDARY_QUEUE,
        "stress": SECONDARY_QUEUE,
        "robustness": SECONDARY_QUEUE,
    }


def test_score_runs_published_after_many_secondary_runs_start_before_them(worker_env, start_worker):
    registry_sync(verify_hashes=False)
    version = _broken_version()
    task = Task.objects.get(slug="halueval-qa-v1")
    secondary = [
        Run.objects.create(probe_version=version, kind=kind, task=task, split="test", base_model_id=model)
        for kind, model in [
            (Run.Kind.TRANSFER, "gemma-3-270m"),
            (Run.Kind.TRANSFER, "all-minilm-l6-v2"),
            (Run.Kind.REPRODUCE, SMOL),
            (Run.Kind.STEER, SMOL),
        ]
    ]
    other = Task.objects.filter(category_id="hallucination").exclude(slug=task.slug).order_by("slug")
    secondary += [
        Run.objects.create(
            probe_version=version, kind=Run.Kind.STEER, task=t, split="test", base_model_id=SMOL
        )
        for t in other
    ]
    evaluation_runs_dispatch_on_commit(secondary)  # no transaction: published at once
    primary = [
        Run.objects.create(
            probe_version=version, kind=Run.Kind.SCORE, task=task, split=split, base_model_id=SMOL
        )
        for split in ("test", "train", "distshift")
    ]
    evaluation_runs_dispatch_on_commit(primary)  # published after every secondary run

    worker = start_worker("priorities")
    every = [r.pk for r in secondary + primary]
    wait_for(
        lambda: Run.objects.filter(pk__in=every, status=Run.Status.FAILED).count() == len(every),
        timeout=180,
        what="every run to finish",
        workers=[worker],
    )
    started = dict(Run.objects.filter(pk__in=every).values_list("pk", "started_at"))
    last_primary = max(started[r.pk] for r in primary)
    first_secondary = min(started[r.pk] for r in secondary)
    kinds = dict(Run.objects.filter(pk__in=every).values_list("pk", "kind"))
    assert last_primary < first_secondary, [kinds[pk] for pk in sorted(started, key=started.__getitem__)]
    assert all("not a safetensors file" in r.error for r in Run.objects.filter(pk__in=every))
