"""The stress axis on real services: a new submission on SmolLM2 gets a stress run per task with a
stress split, executed by a real Celery worker process on the task's rewritten test rows; the score
writer reads it against the clean runs and the board, the API and the probe page show it."""

from __future__ import annotations

import pytest
from django.test import Client

from leaderboard.axes.stress import stress_measurements
from leaderboard.models import EvaluationRun, Score, Submission
from tests.integration.conftest import SOURCE, settled, submit_dir, wait_for

# a few minutes on 2 shared cores (score, reproduce and stress runs on SmolLM2): -m slow
pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_new_submission_gets_its_stress_runs_and_the_column_shows_a_number(
    mini, trained, start_worker, researcher, settings, worker_env
):
    settings.STRESS_RUNS = True  # the suite turns stress runs off (tests/env_defaults.py)
    worker_env["PROBEBENCH_STRESS_RUNS"] = "True"
    settings.ENABLED_MODELS = [SOURCE]  # no transfer runs: ρ_CE is not what this test is about
    worker_env["PROBEBENCH_MODELS"] = SOURCE
    worker = start_worker("stress")
    sub = submit_dir(researcher, trained["truth"])
    stress_runs = EvaluationRun.objects.filter(probe_version__submission=sub, kind=EvaluationRun.Kind.STRESS)
    assert stress_runs.exists()
    wait_for(lambda: settled(sub.pk), timeout=1500, what="the submission to be scored", workers=[worker])
    assert Submission.objects.get(pk=sub.pk).status == "scored", Submission.objects.get(
        pk=sub.pk
    ).failure_reason
    for run in stress_runs:
        assert run.status == EvaluationRun.Status.SUCCEEDED, run.error
        assert run.split in ("stress", "stress_content_end") and run.protocol == "p2" and run.example_scores
        assert all("~" in e["id"] for e in run.example_scores)
    assert {r.split for r in stress_runs} == {"stress", "stress_content_end"}

    score = Score.objects.get(probe_version__submission=sub, spec_id="v0.0.1")
    runs = list(EvaluationRun.objects.filter(probe_version__submission=sub, cycle=None))
    by_task: dict = {}
    for r in runs:
        if r.kind == EvaluationRun.Kind.SCORE:
            by_task.setdefault(r.task_id, {})[r.split] = r
    recomputed = stress_measurements(
        {r.task_id: r for r in stress_runs if r.split == "stress"},
        by_task,
        {r.task_id: r for r in stress_runs if r.split == "stress_content_end"},
    )
    assert score.measurements["stress_auroc"] == pytest.approx(recomputed["stress_auroc"])
    assert score.measurements["stress_auroc_content_end"] == pytest.approx(
        recomputed["stress_auroc_content_end"]
    )
    assert set(score.measurements["stress"]) == {r.task_id for r in stress_runs}
    assert "stress_auroc" not in score.components  # beside the ProbeScore, not in it

    client = Client()
    page = client.get("/category/hallucination/?sort=stress").content.decode()
    assert '<td class="num stress" title="' in page
    probe_page = client.get(f"/probes/{score.probe_version.probe.slug}/").content.decode()
    assert "Stress: the same rows, rewritten in form" in probe_page
    rows = client.get("/api/v1/leaderboard?category=hallucination").json()["results"]
    assert rows[0]["stress_auroc"] == pytest.approx(score.measurements["stress_auroc"])
