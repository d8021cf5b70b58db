"""The in-domain / cross-domain split of a probe's scored tasks (evaluator.metrics.in_domain)."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from evaluator.metrics.compare import mean_delta_ci
from evaluator.metrics.in_domain import IN_DOMAIN_TASKS_KEY, domain_split, in_domain_tasks, split_keys
from evaluator.metrics.metrics import auroc, auroc_mean_ci
from evaluator.metrics.records import TaskRecord, aggregate_stored
from tests.evaluator.test_records import _aggregate, metrics_of


def _test_rows(seed: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = np.array([1] * 40 + [0] * 40)
    return rng.standard_normal(80) + shift * labels, labels


def _record(task: str, rows, lift, controlled) -> TaskRecord:
    tm = replace(metrics_of(task), auroc=auroc(*rows))
    return TaskRecord(
        metrics=tm,
        lift_over_text=lift[0],
        lift_over_text_ci=lift[1],
        controlled_auroc=controlled[0],
        controlled_auroc_ci=controlled[1],
    )


@pytest.fixture
def three_tasks():
    """One in-domain task (well separated) and two cross-domain tasks (near chance), with known
    lifts and controlled AUROCs."""
    tests = {
        "own-v1": _test_rows(0, 2.0),
        "other-a-v1": _test_rows(1, 0.2),
        "other-b-v1": _test_rows(2, -0.1),
    }
    values = {
        "own-v1": ((0.20, (0.10, 0.30)), (0.08, (0.02, 0.14))),
        "other-a-v1": ((-0.30, (-0.40, -0.20)), (0.01, (-0.03, 0.05))),
        "other-b-v1": ((-0.10, (-0.20, 0.00)), (0.03, (-0.01, 0.07))),
    }
    records = {t: _record(t, tests[t], *values[t]) for t in tests}
    return records, tests


def test_one_in_domain_and_two_cross_domain_tasks_give_the_exact_means(three_tasks):
    records, tests = three_tasks
    out = domain_split(records, tests=tests, in_domain={"own-v1", "not-scored-v1"})
    assert out[IN_DOMAIN_TASKS_KEY] == ["own-v1"]  # a declared task it was not scored on is left out
    own, a, b = (records[t].metrics.auroc for t in ("own-v1", "other-a-v1", "other-b-v1"))
    assert own > 0.85 and abs(a - 0.5) < 0.2  # the fixture is what it says
    assert out["auroc_in_domain"] == pytest.approx(own, abs=1e-12)
    assert out["auroc_cross_domain"] == pytest.approx((a + b) / 2, abs=1e-12)
    assert out["lift_over_text_in_domain"] == pytest.approx(0.20)
    assert out["lift_over_text_cross_domain"] == pytest.approx(-0.20)
    assert out["controlled_auroc_in_domain"] == pytest.approx(0.08)
    assert out["controlled_auroc_cross_domain"] == pytest.approx(0.02)
    # the intervals: as the all-task means' (bootstrap for AUROC, summed variances for the deltas)
    assert out["auroc_in_domain_ci"] == list(auroc_mean_ci([tests["own-v1"]]))
    assert out["auroc_cross_domain_ci"] == list(auroc_mean_ci([tests["other-a-v1"], tests["other-b-v1"]]))
    assert out["lift_over_text_in_domain_ci"] == pytest.approx([0.10, 0.30], abs=1e-6)
    cross = mean_delta_ci([(-0.30, (-0.40, -0.20)), (-0.10, (-0.20, 0.00))])
    assert out["lift_over_text_cross_domain_ci"] == list(cross)
    # two independent tasks: the mean's half-width is the per-task half-width / √2
    assert (cross[1] - cross[0]) / 2 == pytest.approx(0.10 / math.sqrt(2), abs=1e-5)
    assert out["controlled_auroc_cross_domain_ci"] == list(
        mean_delta_ci([(0.01, (-0.03, 0.05)), (0.03, (-0.01, 0.07))])
    )


def test_not_declared_leaves_every_value_empty_never_guessed(three_tasks):
    records, tests = three_tasks
    out = domain_split(records, tests=tests, in_domain=None)
    assert set(out) == {*split_keys(), IN_DOMAIN_TASKS_KEY} and all(v is None for v in out.values())


def test_external_training_data_makes_every_task_cross_domain(three_tasks):
    records, tests = three_tasks
    out = domain_split(records, tests=tests, in_domain=set())
    assert out[IN_DOMAIN_TASKS_KEY] == [] and out["auroc_in_domain"] is None
    assert out["lift_over_text_in_domain"] is None and out["lift_over_text_in_domain_ci"] is None
    aurocs = [r.metrics.auroc for r in records.values()]
    assert out["auroc_cross_domain"] == pytest.approx(sum(aurocs) / 3)


def test_a_task_without_an_interval_leaves_its_side_s_interval_empty(three_tasks):
    records, tests = three_tasks
    records["other-b-v1"] = TaskRecord(
        metrics=records["other-b-v1"].metrics, lift_over_text=-0.1, lift_over_text_ci=None
    )
    out = domain_split(records, tests=tests, in_domain={"own-v1"})
    assert out["lift_over_text_cross_domain"] == pytest.approx(-0.2)
    assert out["lift_over_text_cross_domain_ci"] is None
    # a task with no controlled AUROC is left out of that mean
    assert out["controlled_auroc_cross_domain"] == pytest.approx(0.01)


def test_in_domain_tasks_reads_the_recipe_then_trained_on():
    recipe = SimpleNamespace(recipe={"task": "cities-truth-v1"}, metadata={"trained_on": ["x-v1"]})
    assert in_domain_tasks(recipe) == {"cities-truth-v1"}
    declared = SimpleNamespace(recipe=None, metadata={"trained_on": ["a-v1", "b-v1", "external"]})
    assert in_domain_tasks(declared) == {"a-v1", "b-v1"}
    assert in_domain_tasks(SimpleNamespace(recipe=None, metadata={"trained_on": "external"})) == set()
    assert in_domain_tasks(SimpleNamespace(recipe=None, metadata={"name": "old"})) is None
    assert in_domain_tasks(SimpleNamespace(recipe=None, metadata=None)) is None


def test_the_stored_measurements_carry_the_split_and_the_task_records_their_side(three_tasks):
    records, tests = three_tasks
    aggregate, imputed, _ = _aggregate([r.metrics for r in records.values()])
    stored = aggregate_stored(
        aggregate,
        tests=list(tests.values()),
        lifts_over_text=[],
        not_measured_on_policy=[],
        latency={"device": "cpu"},
        transfer={},
        steer={},
        imputed=imputed,
        domains=domain_split(records, tests=tests, in_domain={"own-v1"}),
    )
    assert stored["in_domain_tasks"] == ["own-v1"]
    assert stored["lift_over_text_cross_domain"] == pytest.approx(-0.2)
    record = TaskRecord(metrics=records["own-v1"].metrics, in_domain=True)
    assert record.to_json()["in_domain"] is True
    assert TaskRecord.from_json(record.to_json()).in_domain is True
    assert TaskRecord.from_json({"auroc": 0.7}).in_domain is None  # stored before the split
