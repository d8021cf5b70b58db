"""The robustness axis on real services: a new submission on SmolLM2 gets a robustness run per task,
executed by a real Celery worker process (the protocol's graded attack inside the content, and its
soft-suffix attack against the frozen probe); the score writer reads the graded areas and recomputes
the suffix attack's recall from the stored scores; the Goodhart resistance is the measured goodhart
component under weights specs v0.0.2 and v0.0.3 (weight 0 under v0.0.1), and the board, the API and
the probe page show it."""

from __future__ import annotations

import pytest
from django.test import Client

from leaderboard.axes.robustness import robustness_measurements
from leaderboard.models import EvaluationRun, Score, Submission
from tests.integration.conftest import SOURCE, settled, submit_dir, wait_for

# minutes on 2 shared cores (score, reproduce, the graded curves and a 100-step suffix attack per
# task on SmolLM2): -m slow
pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_new_submission_is_attacked_and_its_goodhart_component_is_measured(
    mini, trained, start_worker, researcher, settings, worker_env
):
    settings.ROBUSTNESS_RUNS = True  # the suite turns robustness runs off (tests/env_defaults.py)
    worker_env["PROBEBENCH_ROBUSTNESS_RUNS"] = "True"
    settings.ENABLED_MODELS = [SOURCE]  # no transfer runs: ρ_CE is not what this test is about
    worker_env["PROBEBENCH_MODELS"] = SOURCE
    worker = start_worker("robustness")
    sub = submit_dir(researcher, trained["truth"])
    runs = EvaluationRun.objects.filter(probe_version__submission=sub, kind=EvaluationRun.Kind.ROBUSTNESS)
    assert runs.exists()
    wait_for(lambda: settled(sub.pk), timeout=2400, what="the submission to be scored", workers=[worker])
    assert Submission.objects.get(pk=sub.pk).status == "scored", Submission.objects.get(
        pk=sub.pk
    ).failure_reason
    for run in runs:
        assert run.status == EvaluationRun.Status.SUCCEEDED, run.error
        assert run.protocol == "p2" and run.example_scores
        assert all(e["label"] == 1 for e in run.example_scores)  # the attacked test positives
        attack = run.metrics["attack"]
        curve = attack["curve"]
        assert attack["steps"] == 100 and curve[0]["step"] == 0 and curve[-1]["step"] == attack["steps_run"]
        # the adversary keeps its best checkpoint, and stops early only where it catches nothing
        assert attack["recall_attacked"] == min(c["recall"] for c in curve)
        assert attack["steps_run"] == 100 or curve[-1]["recall"] == 0.0
        graded = run.metrics["graded"]
        assert graded["protocol"] == "p2" and graded["budget"]["seeds"] == [0, 1]
        assert graded["not_attacked"] or len(graded["seeds"]) == 2

    all_runs = list(EvaluationRun.objects.filter(probe_version__submission=sub, cycle=None))
    by_task: dict = {}
    for r in all_runs:
        if r.kind == EvaluationRun.Kind.SCORE:
            by_task.setdefault(r.task_id, {})[r.split] = r
    recomputed, _ = robustness_measurements({r.task_id: r for r in runs}, by_task)
    new = Score.objects.get(probe_version__submission=sub, spec_id="v0.0.3")
    old = Score.objects.get(probe_version__submission=sub, spec_id="v0.0.1")
    measured = new.measurements["goodhart_resistance"]
    assert new.measurements["goodhart_method"] == "graded"
    if measured is None:  # every task caught too few positives to grade: the category's floor, flagged
        assert recomputed["goodhart_resistance"] is None and new.components["goodhart"]["imputed"]
        return
    assert measured == pytest.approx(recomputed["goodhart_resistance"])
    for task, t in new.measurements["robustness"].items():
        # the worker's own reading of its best checkpoint agrees with the score writer's
        run = runs.get(task_id=task)
        assert t["recall_attacked"] == pytest.approx(run.metrics["attack"]["recall_attacked"])
        assert t["recall_clean"] == pytest.approx(run.metrics["attack"]["recall_clean"])
        if not t["not_attacked"]:
            assert t["goodhart_resistance"] == pytest.approx(run.metrics["graded"]["goodhart_resistance"])
    g = new.components["goodhart"]
    assert not g["imputed"] and g["raw"] == pytest.approx(measured) and g["weight"] == 0.10
    assert old.components["goodhart"]["weight"] == 0.0

    client = Client()
    probe_page = client.get(f"/probes/{new.probe_version.probe.slug}/").content.decode()
    assert "Robustness: an adversary against the frozen probe" in probe_page
    rows = client.get("/api/v1/leaderboard?category=hallucination").json()["results"]
    assert rows[0]["goodhart_resistance"] == pytest.approx(measured)
