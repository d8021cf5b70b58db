"""Direction utility on the board, on real services: a new submission of a linear probe
on SmolLM2 gets its steer run, executed by a real Celery worker process; the direction utility
is folded into the stored measurements beside the ProbeScore (never in it) and shown in the
category page's column, the probe page, the API and the CSV export."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from evaluator.axes.steer import direction_utility
from leaderboard.models import EvaluationRun, Score, Submission
from tests.integration.conftest import settled, submit_dir, wait_for

# about 8 minutes on 2 shared cores (score, reproduce, transfer and steer runs): -m slow
pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_new_submission_gets_its_steer_run_and_the_column_shows_a_number(
    mini, trained, start_worker, researcher, settings, worker_env
):
    settings.STEER_RUNS = True  # the suite turns steer runs off (tests/env_defaults.py)
    worker_env["PROBEBENCH_STEER_RUNS"] = "True"
    worker = start_worker("steer")
    sub = submit_dir(researcher, trained["truth"])
    steer_runs = EvaluationRun.objects.filter(probe_version__submission=sub, kind=EvaluationRun.Kind.STEER)
    # planned with the other runs, on the category's task with a readout (cities-truth-v1)
    assert sorted(steer_runs.values_list("task_id", flat=True)) == ["cities-truth-v1"]
    wait_for(
        lambda: settled(sub.pk),
        timeout=1500,
        what="the submission to be scored",
        workers=[worker],
    )
    assert Submission.objects.get(pk=sub.pk).status == "scored", Submission.objects.get(
        pk=sub.pk
    ).failure_reason
    [run] = steer_runs
    assert run.status == EvaluationRun.Status.SUCCEEDED, run.error
    assert run.protocol == "p2" and run.worker_host
    result = run.metrics["steer"]
    assert result["readout"]["n"] == 32 and 0.0 <= result["readout_auroc"] <= 1.0

    score = Score.objects.get(probe_version__submission=sub, spec_id="v0.0.1")
    utility = score.measurements["direction_utility"]
    stored = score.measurements["steer"]["cities-truth-v1"]
    assert stored["judged"] is result["judged"] and stored["readout_auroc"] == pytest.approx(
        result["readout_auroc"]
    )
    assert "direction_utility" not in score.components  # beside the ProbeScore, not in it
    if result["judged"]:
        assert result["n_random"] >= 64 and isinstance(utility, float)
        assert utility == pytest.approx(direction_utility([result]))
    else:  # SmolLM2's truth readout near chance: shown as not judged, the column n/a
        assert utility is None and "does not read the behaviour" in stored["reason"]

    client = Client()
    page = client.get("/category/hallucination/?sort=utility").content.decode()
    assert "Dir. utility" in page
    probe_page = client.get(f"/probes/{score.probe_version.probe.slug}/").content.decode()
    assert "Direction utility" in probe_page
    rows = client.get("/api/v1/leaderboard?category=hallucination").json()["results"]
    exported = client.get("/api/v1/leaderboard.csv?category=hallucination").content.decode()
    [record] = list(csv.DictReader(io.StringIO(exported)))
    if utility is None:
        assert "not judged: the readout" in probe_page
        assert rows[0]["direction_utility"] is None and record["direction_utility"] == ""
    else:
        assert '<td class="num utility" title="' in page and f"{utility:.3f}</td>" in page
        assert "Addition: change of the readout" in probe_page
        assert rows[0]["direction_utility"] == pytest.approx(utility)
        assert float(record["direction_utility"]) == pytest.approx(utility)
