"""The stored score's typed records (evaluator/metrics/records.py) and the committed JSON Schemas
(evaluator/schemas/): round trips, both spellings of a task's results, the evaluate command's
JSON against its schema, and the one decoder of stored per-example rows. A stored score written by the score writer is validated in
tests/leaderboard/test_score_records.py."""

from __future__ import annotations

import copy
import json

import jsonschema
import numpy as np
import pytest

from evaluator.axes.baselines import BaselineResult
from evaluator.axes.evaluate import ProbeEvaluation, TaskEvaluation
from evaluator.axes.latency import LatencyResult
from evaluator.axes.run import RunResult
from evaluator.core import applicability
from evaluator.data.registry.load import load_registry
from evaluator.errors import MetricInputError
from evaluator.metrics import records
from evaluator.metrics.measure import (
    ExampleRecord,
    ScoredExamples,
    aggregate_measurements,
    declared_gaps,
    example_records,
    task_metrics,
)
from evaluator.metrics.records import ScoreRecord, TaskRecord, measurements_from_stored
from evaluator.metrics.scoring import probe_score
from tests.evaluator.conftest import PROJECT_ROOT

IMPUTATION = {"auroc_ea": 0.85, "auroc_ds": 0.7, "rho_ce": 0.5}
BASELINES = {
    "random_direction_auroc": 0.51,
    "random_direction_aurocs": [0.5, 0.52],
    "diff_of_means_auroc": 0.8,
    "probe_auroc": 0.9,
    "lift_over_random": 0.39,
    "lift_over_diff_of_means": 0.1,
    "seed": 0,
}


def examples(n: int = 40, seed: int = 0, prefix: str = "t") -> ScoredExamples:
    rng = np.random.default_rng(seed)
    labels = np.array([i % 2 for i in range(n)])
    scores = labels * 1.5 + rng.standard_normal(n)
    return ScoredExamples([f"{prefix}{i}" for i in range(n)], labels, scores, 1 / (1 + np.exp(-scores)))


def metrics_of(task_id: str = "t-v1", **kw):
    test = examples()
    kw.setdefault("distshift", examples(seed=1, prefix="d"))
    return task_metrics(
        task_id=task_id,
        test=test,
        ea_reference={i: float(k) for k, i in enumerate(test.ids)},
        train_negative_scores=examples(seed=2).scores[:20],
        imputation=IMPUTATION,
        **kw,
    )


def text_lift_of(tm, baseline: float) -> dict:
    """A lift over a baseline of the given AUROC, as text_baselines.text_lift gives it."""
    lift = round(tm.auroc - baseline, 6)
    return {"name": "char_tfidf", "auroc": baseline, "lift": lift, "ci": [lift - 0.1, lift + 0.1]}


def test_a_task_record_round_trips_in_the_stored_spelling():
    tm = metrics_of()
    record = TaskRecord.measured(tm, text=text_lift_of(tm, 0.75), baselines=BASELINES)
    stored = record.to_json()
    assert stored["lift_over_text"] == round(stored["auroc"] - 0.75, 6)
    assert stored["text_baseline"] == {"name": "char_tfidf", "auroc": 0.75}
    assert stored["lift_over_text_ci"] == [stored["lift_over_text"] - 0.1, stored["lift_over_text"] + 0.1]
    assert stored["baselines"] == {"random_direction": 0.51, "diff_of_means": 0.8}
    assert stored["lift"] == {"random_direction": 0.39, "diff_of_means": 0.1}
    assert "roc" in stored and "roc_points" not in stored
    again = TaskRecord.from_json(json.loads(json.dumps(stored)))
    assert again == TaskRecord.from_json(stored)
    assert json.dumps(again.to_json()) == json.dumps(stored)  # same keys, same order, same numbers


def test_a_task_record_reads_the_evaluators_spelling_too():
    """The evaluate command's task block (TaskEvaluation.to_dict: a ``metrics`` block with
    ``roc_points`` and the BaselineResult's names) reads as the stored record does."""
    tm = metrics_of()
    stored = TaskRecord.measured(tm, text=None, baselines=BASELINES).to_json()
    evaluator_spelling = {"task_id": tm.task_id, "metrics": tm.to_dict(), "baselines": BASELINES}
    assert TaskRecord.from_json(evaluator_spelling).to_json() == stored


def test_a_row_scored_against_the_bag_of_words_reads_as_that_baseline():
    stored = TaskRecord.measured(metrics_of(), text=None, baselines=None).to_json()
    stored["text_baseline"], stored["lift_over_text"] = {"bow": 0.6}, 0.2
    del stored["lift_over_text_ci"]
    old = TaskRecord.from_json(stored)
    assert (old.text_baseline, old.text_baseline_auroc, old.lift_over_text) == ("bag_of_words", 0.6, 0.2)
    assert old.lift_over_text_ci is None


def test_an_old_row_without_the_status_reads_its_imputed_flag():
    stored = TaskRecord.measured(metrics_of(), text=None, baselines=None).to_json()
    del stored["auroc_ea_status"]
    stored["auroc_ea"], stored["auroc_ea_imputed"] = None, True
    assert TaskRecord.from_json(stored).metrics.auroc_ea_status == "imputed"


def _aggregate(tms):
    return aggregate_measurements(
        tms,
        lifts=[BASELINES],
        latency_ms=0.3,
        license_id="MIT",
        transfer_pearsons=[0.4],
        has_recipe=True,
        ea_applicable=True,
        has_reference=True,
        imputation=IMPUTATION,
    )


def stored_score() -> dict:
    reg = load_registry(PROJECT_ROOT)
    tms = [metrics_of("a-v1"), metrics_of("b-v1", distshift=None)]
    aggregate, imputed, measurements = _aggregate(tms)
    score = probe_score(measurements, spec=reg.spec(), licenses=reg.licenses).to_dict()
    per_task = {
        tm.task_id: TaskRecord.measured(tm, text=text_lift_of(tm, 0.6), baselines=BASELINES) for tm in tms
    }
    stored = records.aggregate_stored(
        aggregate,
        tests=[(examples().scores, examples().labels)] * 2,
        lifts_over_text=[(r.lift_over_text, r.lift_over_text_ci) for r in per_task.values()],
        not_measured_on_policy=[],
        latency={"probe_ms": 0.3, "device": "cpu", "model_forward_ms": 10.0},
        transfer={"gemma-3-270m": 0.4},
        steer={"direction_utility": None, "steer": {}},
        imputed=imputed,
    )
    record = ScoreRecord(
        total=score["total"],
        measured_total=score["measured_total"],
        components=score["components"],
        measurements=stored,
        per_task=per_task,
        protocol="p1",
        environment={"python": "3.11"},
    )
    return json.loads(json.dumps(record.to_json()))


def test_a_score_record_round_trips_and_validates():
    data = stored_score()
    jsonschema.validate(data, records.schema("score"))
    assert ScoreRecord.from_json(data).to_json() == data


def test_the_score_schema_refuses_a_wrong_record():
    data = stored_score()
    broken = copy.deepcopy(data)
    del broken["per_task"]["a-v1"]["roc"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, records.schema("score"))
    broken = copy.deepcopy(data)
    broken["measurements"]["auroc"] = "0.9"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, records.schema("score"))


def test_the_scoring_input_is_rebuilt_from_the_stored_score():
    tms = [metrics_of("a-v1"), metrics_of("b-v1", distshift=None)]
    aggregate, imputed, measurements = _aggregate(tms)
    stored = {**aggregate, "imputed": imputed}
    assert measurements_from_stored(json.loads(json.dumps(stored))) == measurements


def _run(split: str, n: int) -> RunResult:
    return RunResult(
        task_id="a-v1",
        split=split,
        model_id="smollm2-135m-instruct",
        probe_name="p",
        probe_sha256="0" * 64,
        layer=3,
        position="last_token",
        input="single",
        output="logit",
        split_sha256="1" * 64,
        cache_key="2" * 64,
        cache_hit=False,
        n=n,
        examples=examples(n),
        timings={"total": 1.0},
        model={},
        config={},
        seed=0,
        protocol="p1",
    )


def test_the_evaluate_json_validates_against_its_schema():
    """The evaluate command's JSON (ProbeEvaluation.to_dict, as the CLI prints it) validates;
    the model test of the CLI validates a real one (tests/evaluator/test_evaluate_run.py)."""
    reg = load_registry(PROJECT_ROOT)
    tm = metrics_of("a-v1")
    aggregate, imputed, measurements = _aggregate([tm])
    evaluation = ProbeEvaluation(
        probe={
            "name": "p",
            "category": "hallucination",
            "base_model": "smollm2-135m-instruct",
            "layer": 3,
            "position": "last_token",
            "input": "single",
            "output": "logit",
            "license": "MIT",
        },
        probe_sha256="0" * 64,
        model={},
        tasks={
            "a-v1": TaskEvaluation(
                "a-v1",
                tm,
                BaselineResult(**BASELINES),
                {"train": _run("train", 20), "test": _run("test", 40)},
            )
        },
        aggregate=aggregate,
        imputed=imputed,
        latency=LatencyResult(probe_ms=0.3, probe_ms_p90=0.4, reps=10, device="cpu"),
        transfer=[],
        reproduction=None,
        probe_score=probe_score(measurements, spec=reg.spec(), licenses=reg.licenses).to_dict(),
        declared_gaps=declared_gaps({"auroc": 0.5, "rho_ce": 0.9}, aggregate),
        notes=[],
        timings={"total": 2.0},
        config={
            "harvest": {},
            "spec": "v0.0.1",
            "tasks": ["a-v1"],
            "not_applicable": {},
            "transfer_targets": [],
            "latency_reps": 10,
            "reference_probe_sha256": None,
        },
        protocol="p1",
    )
    data = json.loads(json.dumps(evaluation.to_dict()))
    jsonschema.validate(data, records.schema("evaluation"))
    del data["tasks"]["a-v1"]["baselines"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, records.schema("evaluation"))


def test_the_schemas_name_the_probe_vocabulary_of_evaluator_applicability():
    run = records.schema("evaluation")["$defs"]["run"]["properties"]
    assert tuple(run["position"]["enum"]) == applicability.POSITIONS
    assert tuple(run["input"]["enum"]) == applicability.INPUTS
    assert tuple(run["output"]["enum"]) == applicability.OUTPUTS


@pytest.mark.parametrize("name", ["score", "evaluation"])
def test_the_schemas_are_valid_json_schemas(name):
    jsonschema.Draft202012Validator.check_schema(records.schema(name))


def test_a_stored_per_example_row_is_decoded_in_one_place():
    ex = examples(6)
    rows = json.loads(json.dumps(ex.to_records()))
    again = ScoredExamples.from_records(rows)
    assert again.ids == ex.ids and again.labels.tolist() == ex.labels.tolist()
    assert again.scores.tolist() == ex.scores.tolist() and again.probs.tolist() == ex.probs.tolist()
    first = ExampleRecord(ex.ids[0], int(ex.labels[0]), float(ex.scores[0]), float(ex.probs[0]))
    assert example_records(rows)[0] == first and first.to_dict() == rows[0]
    row = ExampleRecord.from_dict({"id": 7, "label": "1", "score": 2})
    assert row.to_dict() == {"id": "7", "label": 1, "score": 2.0, "prob": None}
    with pytest.raises(MetricInputError, match="no prob"):
        ScoredExamples.from_records([{"id": "a", "label": 0, "score": 0.1}])
