"""Metadata is normalised once, at submission, and stored as accepted: the worker reads exactly that.

``authors`` given as a comma-separated string was accepted (201) and stored as sent, and every run
of the worker then refused it (the worker re-parsed the raw metadata more strictly): accepted, then
failed. Each odd-but-accepted shape below is submitted through the API; the stored metadata is the
normalised document, and a run of the submission, executed as the worker executes it on the real
SmolLM2, does not fail on its metadata.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from evaluator.core.probes import ProbeMetadata
from leaderboard.models import EvaluationRun, ProbeVersion
from leaderboard.runner import registry as runner_registry
from tests.leaderboard.test_submission_validation import linear_probe_bytes, metadata, post

pytestmark = pytest.mark.django_db
Run = EvaluationRun

ODD_BUT_ACCEPTED = {
    "authors as a comma-separated string": (
        {"authors": "Ada Lovelace, Grace Hopper ,"},
        {"authors": ["Ada Lovelace", "Grace Hopper"]},
    ),
    "authors, description, URL and training data null": (
        {"authors": None, "description": None, "paper_url": None, "training_data": None},
        {"authors": [], "description": "", "paper_url": "", "training_data": {"tasks": []}},
    ),
    "a name with spaces around it, in NFD": ({"name": "  Cafe\u0301 probe  "}, {"name": "Caf\u00e9 probe"}),
    "declared metrics as integers": (
        {"declared_metrics": {"auroc": 1}},
        {"declared_metrics": {"auroc": 1.0}},
    ),
    "training data without splits, repeated tasks": (
        {"training_data": {"tasks": ["halueval-qa-v1", "halueval-qa-v1"]}},
        {"training_data": {"tasks": ["halueval-qa-v1"], "splits": ["train"]}},
    ),
}


@pytest.fixture
def api(registry, researcher):
    client = APIClient()
    client.force_authenticate(user=researcher)
    return client


@pytest.mark.parametrize("case", list(ODD_BUT_ACCEPTED))
def test_odd_but_accepted_metadata_is_stored_normalised(api, case):
    sent, expected = ODD_BUT_ACCEPTED[case]
    response = post(api, linear_probe_bytes(seed=61), metadata(**sent) | sent)
    assert response.status_code == 201, response.content
    stored = ProbeVersion.objects.get().metadata
    for key, value in expected.items():
        if isinstance(value, dict):
            assert {k: stored[key].get(k) for k in value} == value, key
        else:
            assert stored[key] == value, key
    # what the worker reads parses under the worker's own (stricter) rules
    ProbeMetadata.from_dict({k: v for k, v in stored.items() if k != "probe"}, registry=runner_registry())


@pytest.mark.model
@pytest.mark.django_db(transaction=True)  # the run's heartbeat thread reads the run on its own connection
def test_a_run_of_a_submission_with_authors_as_a_string_does_not_fail_on_its_metadata(api, monkeypatch):
    from leaderboard.services.lifecycle import evaluation_run_process
    from probebench.celery import app

    # the submission's runs go to the broker when it commits, as on a site with workers, instead
    # of all of them running in-process (every task of the category, on the full splits); one of
    # them, the cities test split, is executed here as the worker executes it
    monkeypatch.setattr(app.conf, "task_always_eager", False)
    response = post(api, linear_probe_bytes(seed=62), metadata(authors="Ada Lovelace, Grace Hopper"))
    assert response.status_code == 201, response.content
    run = Run.objects.get(kind=Run.Kind.SCORE, task_id="cities-truth-v1", split="test")

    outcome = evaluation_run_process(run_id=run.pk, worker="metadata-test")

    run.refresh_from_db()
    assert outcome == "succeeded"
    assert (run.status, run.error) == (Run.Status.SUCCEEDED, "")


def test_versions_stored_with_an_authors_string_are_normalised_by_the_migration(api):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("leaderboard.migrations.0012_probeversion_metadata_normalised")
    assert post(api, linear_probe_bytes(seed=63), metadata(authors=["Ada", "Grace"])).status_code == 201
    version = ProbeVersion.objects.get()
    ProbeVersion.objects.filter(pk=version.pk).update(metadata={**version.metadata, "authors": "Ada, Grace"})

    migration.forward(apps, None)

    assert ProbeVersion.objects.get().metadata["authors"] == ["Ada", "Grace"]
