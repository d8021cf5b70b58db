"""Redis down does not take the site down. Pages and API reads answered an HTML 500 when the cache
was unreachable; now they are served uncached. A write that needs Redis (a rate-limited one, or a
submission, whose runs go through the broker) answers 503 with the API's error body and stores
nothing. ``/health`` names the service that is down.

Redis here is a real client on a closed port (``redis://127.0.0.1:1/0``): first for the caches
only (in this process), then for everything (a process started with ``REDIS_URL`` on that port,
as the site would be: cache, rate limits and broker)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.urls import reverse
from django.utils import timezone

from leaderboard.models import EvaluationRun, Probe, ProbeVersion, Submission
from leaderboard.services.lifecycle import evaluation_runs_reconcile
from probebench.throttling import THROTTLE_CACHE
from tests.leaderboard.board_data import ensure_models, ensure_tasks, public_probe

ROOT = Path(__file__).resolve().parents[2]
CLOSED = "redis://127.0.0.1:1/0"
SUBMISSIONS = "/api/v1/submissions"


def _stored() -> tuple[int, ...]:
    root = Path(django_settings.ARTIFACT_ROOT)
    files = sum(1 for p in root.rglob("*") if p.is_file()) if root.exists() else 0
    counts = (m.objects.count() for m in (Probe, ProbeVersion, Submission, EvaluationRun))
    return (*counts, files)


@pytest.fixture
def probe_page(registry) -> str:
    ensure_models()
    version = public_probe(slug="halu-lr", name="HaluEval LR", tasks=ensure_tasks("hallucination", 2))
    return reverse("leaderboard:probe", args=[version.probe.slug])


@pytest.fixture
def caches_down(settings):
    settings.CACHES = {
        "default": {"BACKEND": "probebench.cache.ResilientRedisCache", "LOCATION": CLOSED},
        THROTTLE_CACHE: {"BACKEND": "probebench.cache.RedisCache", "LOCATION": CLOSED},
    }
    yield


def test_with_the_caches_down_reads_are_served_and_writes_answer_503(
    client, researcher, probe_page, caches_down
):
    for url in (
        reverse("leaderboard:index"),
        probe_page,
        "/api/v1/categories",
        "/api/v1/leaderboard?category=hallucination",
    ):
        assert client.get(url).status_code == 200, url

    client.force_login(researcher)
    before = _stored()
    refused = client.post(SUBMISSIONS, {"metadata": "{}"})
    assert refused.status_code == 503 and refused["Content-Type"] == "application/json"
    body = refused.json()
    assert set(body) == {"error", "field"} and body["field"] is None
    assert "rate-limit counts cannot be reached" in body["error"] and "nothing was stored" in body["error"]
    assert _stored() == before

    health = client.get("/health")
    assert health.status_code == 503
    assert health.json() == {
        "status": "down",
        "services": {"database": "ok", "cache": "down", "rate_limits": "down", "broker": "ok"},
    }
    assert "no-cache" in health["Cache-Control"]


def test_health_says_ok_when_every_service_answers(client, db):
    health = client.get("/health")
    assert health.status_code == 200
    assert health.json() == {
        "status": "ok",
        "services": {"database": "ok", "cache": "ok", "rate_limits": "ok", "broker": "ok"},
    }
    assert client.post("/health").status_code == 405


#: Run in a process whose settings were built with REDIS_URL on the closed port and no eager tasks.
#: It prints one JSON line: the answers, and what was stored after each submission.
SITE_WITH_REDIS_DOWN = textwrap.dedent(
    """
    import json
    import os
    from pathlib import Path
    from unittest import mock
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client, override_settings
    from django.test.utils import setup_test_environment
    from leaderboard import artifacts
    from leaderboard.models import EvaluationRun, ProbeVersion, Submission
    from leaderboard.services import submissions
    from tests.leaderboard.test_submission_validation import linear_probe_bytes, metadata

    setup_test_environment()
    out = {}
    client = Client()
    for name, url in json.loads(os.environ["PAGES"]).items():
        out[name] = client.get(url).status_code
    health = client.get("/health")
    out["health"] = [health.status_code, health.json()]

    client.force_login(get_user_model().objects.get(username="ada"))

    def submit(seed):
        data = linear_probe_bytes(seed=seed)
        artifact = SimpleUploadedFile("probe.safetensors", data)
        answer = client.post("/api/v1/submissions", {"artifact": artifact, "metadata": json.dumps(metadata())})
        sha = artifacts.sha256_bytes(data)
        stored = {
            "file": (Path(settings.ARTIFACT_ROOT) / artifacts.artifact_relpath(sha)).exists(),
            "version": ProbeVersion.objects.filter(artifact_sha256=sha).exists(),
        }
        return [answer.status_code, answer.json(), stored]

    # everything down: the rate-limited write is refused before the view
    out["submit_all_down"] = submit(7301)
    # the counts reachable (in memory here), the broker still down: refused before anything is stored
    memory = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    with override_settings(CACHES={"default": memory, "throttle": memory}):
        out["submit_broker_down"] = submit(7302)
        # the broker answers the check but is gone when the runs are published: stored, runs queued
        with mock.patch.object(submissions, "broker_reachable", return_value=True):
            out["submit_broker_lost"] = submit(7303)
    mine = Submission.objects.filter(submitter__username="ada")
    out["submissions"] = list(mine.values_list("status", flat=True))
    out["runs"] = sorted(set(EvaluationRun.objects.filter(submission__in=mine).values_list("status", flat=True)))
    print("ANSWERS " + json.dumps(out))
    """
)


@pytest.mark.django_db(transaction=True)
def test_a_site_started_with_redis_unreachable(researcher, probe_page, worker_env):
    pages = {"board": reverse("leaderboard:index"), "probe": probe_page, "api_read": "/api/v1/categories"}
    env = {**worker_env, "REDIS_URL": CLOSED, "PAGES": json.dumps(pages)}
    before = _stored()
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SITE_WITH_REDIS_DOWN],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("ANSWERS "))
    out = json.loads(line.removeprefix("ANSWERS "))

    assert (out["board"], out["probe"], out["api_read"]) == (200, 200, 200)
    assert out["health"] == [
        503,
        {
            "status": "down",
            "services": {"database": "ok", "cache": "down", "rate_limits": "down", "broker": "down"},
        },
    ]
    nothing = {"file": False, "version": False}
    status, body, stored = out["submit_all_down"]
    assert status == 503 and body["field"] is None and "rate-limit counts cannot be reached" in body["error"]
    assert stored == nothing
    status, body, stored = out["submit_broker_down"]
    assert status == 503 and body["field"] is None
    assert "task broker) cannot be reached" in body["error"] and "nothing was stored" in body["error"]
    assert stored == nothing

    # the lost publish loses nothing: the submission and its runs are stored and queued, and the
    # reconciler publishes queued runs again (services.lifecycle.evaluation_runs_reconcile)
    status, body, stored = out["submit_broker_lost"]
    assert status == 201, body
    assert stored == {"file": True, "version": True}
    assert out["submissions"] == ["queued"] and out["runs"] == ["queued"]
    probes, versions, subs, runs, _ = _stored()
    assert (probes, versions, subs) == (before[0] + 1, before[1] + 1, before[2] + 1) and runs > before[3]
    queued = set(EvaluationRun.objects.filter(submission__submitter=researcher).values_list("pk", flat=True))
    published: list[int] = []
    later = timezone.now() + timedelta(seconds=django_settings.RUN_REQUEUE_AFTER_S + 1)
    evaluation_runs_reconcile(now=later, dispatch=published.append)
    assert queued and queued <= set(published)
    assert "stay queued for the reconciler" in done.stderr
