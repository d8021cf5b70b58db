"""A double submit loses nothing: two identical uploads sent at once (a double click) give exactly
one 201 and one 409, and the artifact the 201's version points to is on disk, intact, and loads as
the worker loads it. Real parallel requests (two threads, one live server, each request in its own
server thread and database connection), ten rounds, on SQLite and on PostgreSQL.

A 409 for someone else's unpublished probe says only that the file was already submitted.
"""

import contextlib
import hashlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from django.test import Client
from rest_framework.test import APIClient

from leaderboard.artifacts import artifact_abspath
from leaderboard.models import ProbeVersion, Submission
from probebench.celery import app
from tests.leaderboard.test_submission_validation import linear_probe_bytes, metadata, post

ROUNDS = 10
CSRF = "b" * 32


@pytest.fixture
def dispatch_to_broker():
    """Queue the runs on the broker instead of evaluating them inside the request (eager mode):
    what is checked here is the upload, and the stored file the worker will read."""
    app.conf.task_always_eager = False
    yield
    app.conf.task_always_eager = True
    with contextlib.suppress(Exception):  # best effort: the broker holds only this test's messages
        app.control.purge()


def _session(live_server, user) -> requests.Session:
    client = Client()
    client.force_login(user)
    session = requests.Session()
    session.cookies.set("sessionid", client.cookies["sessionid"].value)
    session.cookies.set("csrftoken", CSRF)
    session.headers.update({"X-CSRFToken": CSRF, "Referer": f"{live_server.url}/submit/"})
    return session


@pytest.mark.django_db(transaction=True)
def test_two_identical_uploads_at_once_keep_the_stored_artifact(
    live_server, registry, researcher, dispatch_to_broker
):
    from leaderboard.runner import probe_for  # what the worker does first with a run's version

    session = _session(live_server, researcher)
    url = f"{live_server.url}/api/v1/submissions"
    for round_ in range(ROUNDS):
        data = linear_probe_bytes(seed=1000 + round_)
        meta = json.dumps(metadata(name=f"Double click {round_}"))
        start = threading.Barrier(2)

        def send(_, data=data, meta=meta, start=start):
            start.wait()
            return session.post(
                url, files={"artifact": ("probe.safetensors", data)}, data={"metadata": meta}, timeout=60
            )

        with ThreadPoolExecutor(2) as pool:
            responses = list(pool.map(send, range(2)))

        assert sorted(r.status_code for r in responses) == [201, 409], [r.text[:200] for r in responses]
        version = ProbeVersion.objects.get(artifact_sha256=hashlib.sha256(data).hexdigest())
        path = artifact_abspath(version.artifact_path)
        assert path.is_file(), f"round {round_}: the stored artifact of the 201 was deleted"
        assert path.read_bytes() == data
        probe = probe_for(version)
        assert probe.kind == "linear" and probe.sha256 == version.artifact_sha256
        assert Submission.objects.get(probe_version=version).status == Submission.Status.QUEUED
    assert ProbeVersion.objects.count() == ROUNDS


@pytest.mark.django_db
def test_a_duplicate_of_someone_elses_unpublished_probe_reveals_nothing(registry, researcher, stranger):
    data = linear_probe_bytes(seed=31)
    owner = APIClient()
    owner.force_authenticate(user=researcher)
    assert post(owner, data, metadata(name="Secret work in progress")).status_code == 201
    version = ProbeVersion.objects.get()

    other = APIClient()
    other.force_authenticate(user=stranger)
    response = post(other, data, metadata(name="Copied"))
    assert response.status_code == 409
    body = response.json()
    assert body["field"] == "artifact" and "already submitted" in body["error"]
    text = response.content.decode()
    for secret in (version.probe.slug, "Secret work in progress", version.get_absolute_url(), "ada"):
        assert secret not in text

    again = post(owner, data, metadata(name="Mine again"))  # the owner is told which probe it is
    assert again.status_code == 409
    assert again.json()["existing_probe"] == version.probe.slug
