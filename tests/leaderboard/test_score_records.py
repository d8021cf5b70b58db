"""A stored score written by the score writer (services.scores) is the typed record of
evaluator/metrics/records.py: it validates against the committed schema and reads back unchanged."""

from __future__ import annotations

import json

import jsonschema
import pytest

from evaluator.metrics import records
from evaluator.metrics.records import ScoreRecord
from leaderboard import models as m
from leaderboard.services.scores import submission_score
from tests.leaderboard.reevaluation_data import scored
from tests.leaderboard.test_coverage import finish

pytestmark = pytest.mark.django_db
Run = m.EvaluationRun
BASELINES = {
    "random_direction_auroc": 0.5,
    "random_direction_aurocs": [0.5],
    "diff_of_means_auroc": 0.8,
    "probe_auroc": 0.9,
    "lift_over_random": 0.4,
    "lift_over_diff_of_means": 0.1,
    "seed": 0,
}


def test_a_score_written_by_the_score_writer_validates_and_round_trips(small_registry):
    version = scored("recorded", status=m.Submission.Status.SCORED)
    runs = []
    for task in m.Task.objects.filter(category_id="hallucination", status=m.Task.Status.ACTIVE):
        for split in ("test", "train", "distshift"):
            run = Run.objects.create(
                probe_version=version,
                submission=version.submission,
                kind=Run.Kind.SCORE,
                task=task,
                split=split,
                base_model=version.probe.base_model,
            )
            finish(run, 0.9)
            if split == "test":
                run.metrics["baselines"] = BASELINES
                run.save(update_fields=["metrics"])
            runs.append(run)
    [*rows] = submission_score(submission=version.submission, runs=runs)
    assert rows
    for row in rows:
        row.refresh_from_db()
        data = {
            "total": row.total,
            "measured_total": row.measured_total,
            "components": row.components,
            "measurements": row.measurements,
            "per_task": row.per_task,
            "protocol": row.protocol,
            "environment": row.environment,
        }
        data = json.loads(json.dumps(data))
        jsonschema.validate(data, records.schema("score"))
        record = ScoreRecord.from_json(data)
        assert record.to_json() == data
        [task] = data["per_task"].values()
        assert task["lift"] == {"random_direction": 0.4, "diff_of_means": 0.1}
        assert record.scoring_input(license_id=version.license_id).auroc == row.measurements["auroc"]
