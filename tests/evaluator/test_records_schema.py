"""``Score.measurements`` as a typed record (evaluator.metrics.records.AggregateRecord) and its JSON
Schema generated from the type (evaluator.metrics.records_schema): the committed schema is what the
generator writes, real stored measurements validate against it, and the record writes the JSON
the score writer has always stored, key for key and in the same order."""

from __future__ import annotations

import copy
import json

import jsonschema
import numpy as np
import pytest

from evaluator.axes.attack import robustness_summary
from evaluator.axes.stress import stress_metrics, stress_summary
from evaluator.metrics import records, records_schema
from evaluator.metrics.compare import mean_delta_ci
from evaluator.metrics.in_domain import IN_DOMAIN_TASKS_KEY, split_keys
from evaluator.metrics.metrics import auroc_mean_ci
from evaluator.metrics.records import AggregateRecord, SteerRecord, aggregate_stored
from tests.evaluator.test_records import _aggregate, examples, metrics_of, stored_score

STEER = {"direction_utility": 1.2, "steer": {"a-v1": {"judged": True, "utility_z": 1.2, "addition": {}}}}


def _stress() -> dict:
    rng = np.random.default_rng(0)
    labels = np.array([0, 1] * 20)
    scores = labels + rng.standard_normal(40)
    per_task = {
        "a-v1": stress_metrics(
            train_negatives=rng.standard_normal(30),
            test=([f"r{i}" for i in range(40)], labels, scores),
            stress=([f"r{i}~upper" for i in range(40)], labels, scores * 0.5),
        )
    }
    return stress_summary(per_task)


def _robustness() -> dict:
    a = {"recall_clean": 0.8, "recall_attacked": 0.2, "goodhart_resistance": 0.25, "curve": []}
    return robustness_summary({"a-v1": a})


def _inputs(**axes) -> tuple[dict, dict]:
    tms = [metrics_of("a-v1"), metrics_of("b-v1", distshift=None)]
    aggregate, imputed, _ = _aggregate(tms)
    kw = {
        "tests": [(examples().scores, examples().labels)] * 2,
        "lifts_over_text": [(0.1, (0.0, 0.2)), (0.2, (0.1, 0.3))],
        "controlled": [(0.05, (0.0, 0.1)), (0.02, None)],
        "not_measured_on_policy": ["z-v1", "c-v1"],
        "latency": {"probe_ms": 0.3, "device": "cpu", "model_forward_ms": 10.0},
        "transfer": {"gemma-3-270m": 0.4, "qwen": None},
        "steer": STEER,
        "imputed": imputed,
        **axes,
    }
    return aggregate, kw


def _spread_as_before(aggregate, *, tests, lifts_over_text, controlled, not_measured_on_policy, **kw) -> dict:
    """The measurements as the score writer spread them before the typed record (kept verbatim)."""
    out = dict(aggregate)
    out["auroc_ci"] = list(auroc_mean_ci(list(tests)))
    for key, ci_key, values in (
        ("lift_over_text", "lift_over_text_ci", lifts_over_text),
        ("controlled_auroc", "controlled_auroc_ci", controlled),
    ):
        out[key] = float(np.mean([v for v, _ in values])) if values else None
        with_ci = [(v, ci) for v, ci in values if ci is not None]
        ci = mean_delta_ci(with_ci) if with_ci and len(with_ci) == len(values) else None
        out[ci_key] = None if ci is None else list(ci)
    # since the in-domain / cross-domain split: its keys after the all-task means (None: not computed)
    out |= dict.fromkeys((*split_keys(), IN_DOMAIN_TASKS_KEY))
    out["not_measured_on_policy"] = sorted(not_measured_on_policy)
    return {
        **out,
        "latency_device": kw["latency"].get("device"),
        "model_forward_ms": kw["latency"].get("model_forward_ms"),
        "transfer": dict(kw["transfer"]),
        **kw["steer"],
        **(kw.get("stress") or {}),
        **(kw.get("robustness") or {}),
        "imputed": dict(kw["imputed"]),
    }


def test_the_committed_score_schema_is_what_the_generator_writes():
    committed = records_schema.SCORE_SCHEMA.read_text()
    assert committed == records_schema.render(records_schema.score_schema()), (
        "evaluator/schemas/score.schema.json is stale: run `python -m evaluator.metrics.records_schema`"
    )
    assert records_schema.main(["--check"]) == 0


def test_the_generated_schema_is_a_valid_json_schema_and_names_every_stored_key():
    schema = records_schema.aggregate_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    aggregate, kw = _inputs(stress=_stress(), robustness=_robustness())
    assert list(schema["properties"]) == list(aggregate_stored(aggregate, **kw))


@pytest.mark.parametrize(
    "axes",
    [{}, {"stress": _stress()}, {"stress": _stress(), "robustness": _robustness()}, {"steer": {}}],
    ids=["steer only", "with stress", "every axis", "no axis"],
)
def test_the_record_writes_the_json_the_score_writer_always_stored(axes):
    aggregate, kw = _inputs(**axes)
    stored = aggregate_stored(aggregate, **kw)
    assert json.dumps(stored) == json.dumps(_spread_as_before(aggregate, **kw))  # keys, order, numbers
    again = json.loads(json.dumps(stored))
    assert json.dumps(AggregateRecord.from_stored(again).to_json()) == json.dumps(again)


def test_a_mean_the_record_does_not_name_is_kept_where_it_was():
    aggregate, kw = _inputs()
    aggregate = {**aggregate, "new_mean": 0.5}
    stored = aggregate_stored(aggregate, **kw)
    assert json.dumps(stored) == json.dumps(_spread_as_before(aggregate, **kw))
    assert AggregateRecord.from_stored(stored).extra == {"new_mean": 0.5}


def test_an_axis_summary_with_an_unknown_key_is_refused():
    aggregate, kw = _inputs(steer={**STEER, "direction_utility_ci": [0, 1]})
    with pytest.raises(ValueError, match="SteerRecord: unknown keys \\['direction_utility_ci'\\]"):
        aggregate_stored(aggregate, **kw)


def test_real_stored_measurements_validate_against_the_generated_schema():
    schema = records_schema.aggregate_schema()
    jsonschema.validate(stored_score()["measurements"], schema)
    aggregate, kw = _inputs(stress=_stress(), robustness=_robustness())
    full = json.loads(json.dumps(aggregate_stored(aggregate, **kw)))
    jsonschema.validate(full, schema)
    jsonschema.validate(stored_score(), records.schema("score"))


def test_the_schema_refuses_half_an_axis_and_a_wrong_type():
    schema = records_schema.aggregate_schema()
    aggregate, kw = _inputs(stress=_stress())
    stored = json.loads(json.dumps(aggregate_stored(aggregate, **kw)))
    for key in ("stress_recall", "direction_utility", "auroc_ci"):
        broken = copy.deepcopy(stored)
        del broken[key]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)
    broken = copy.deepcopy(stored)
    broken["transfer"] = {"qwen": "0.4"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_a_row_stored_before_the_axes_reads_with_them_absent():
    old = {"auroc": 0.9, "ece": 0.1, "latency_ms": 0.2, "license": "MIT", "auroc_ci": [0.8, 0.95]}
    record = AggregateRecord.from_stored(old)
    assert record.steer is None and record.stress is None and record.robustness is None
    assert record.intervals.auroc_ci == [0.8, 0.95] and record.intervals.lift_over_text is None
    assert record.transfer.rho == {} and record.imputed == {} and record.not_measured_on_policy == []
    assert record.scoring_input(license_id="MIT").auroc == 0.9
    assert AggregateRecord.from_stored({"direction_utility": None}).steer == SteerRecord(None, {})
