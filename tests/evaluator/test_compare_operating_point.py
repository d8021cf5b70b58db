"""The operating point: recall at 1% FPR with the threshold fixed on the train split's negatives
and applied to the test split, with the test split's own false-positive rate beside it."""

import numpy as np
import pytest

from evaluator.errors import MetricInputError
from evaluator.metrics import metrics
from evaluator.metrics.measure import ScoredExamples, aggregate_measurements, task_metrics

IMPUTATION = {"auroc_ea": 0.85, "auroc_ds": 0.7, "rho_ce": 0.5}


def examples(scores, labels):
    ids = [f"r{i}" for i in range(len(scores))]
    s = np.asarray(scores, dtype=float)
    return ScoredExamples(ids, np.asarray(labels), s, metrics.sigmoid(s))


def test_the_threshold_comes_from_train_and_both_rates_from_test():
    train_negatives = np.arange(200, dtype=float)  # 1% of 200 = 2 may lie above: threshold 197
    test = examples([198.5, 197.5, 150, 196.9, 250, 198, 10, 1], [1, 1, 1, 1, 1, 0, 0, 0])
    got = task_metrics(task_id="t", test=test, train_negative_scores=train_negatives, imputation=IMPUTATION)
    assert got.threshold_1pct_fpr == 197.0
    assert got.recall_at_1pct_fpr == pytest.approx(3 / 5)  # 198.5, 197.5, 250
    assert got.fpr_at_1pct_threshold == pytest.approx(1 / 3)  # the negative at 198
    assert got.to_dict()["fpr_at_1pct_threshold"] == pytest.approx(1 / 3)


def test_without_a_train_run_there_is_no_operating_point():
    test = examples([1, 2, 3, 0], [1, 1, 0, 0])
    got = task_metrics(task_id="t", test=test, imputation=IMPUTATION)
    assert got.threshold_1pct_fpr is None
    assert got.recall_at_1pct_fpr is None and got.fpr_at_1pct_threshold is None


def test_the_aggregate_is_the_mean_over_tasks():
    train = np.arange(100, dtype=float)  # threshold 98
    a = task_metrics(
        task_id="a",
        test=examples([99, 50, 99.5, 10], [1, 1, 0, 0]),
        train_negative_scores=train,
        imputation=IMPUTATION,
    )
    b = task_metrics(
        task_id="b",
        test=examples([120, 130, 1, 2], [1, 1, 0, 0]),
        train_negative_scores=train,
        imputation=IMPUTATION,
    )
    aggregate, _, _ = aggregate_measurements(
        [a, b],
        lifts=[],
        latency_ms=1.0,
        license_id="MIT",
        transfer_pearsons=None,
        has_recipe=False,
        ea_applicable=False,
        has_reference=False,
        imputation=IMPUTATION,
    )
    assert aggregate["recall_at_1pct_fpr"] == pytest.approx((0.5 + 1.0) / 2)
    assert aggregate["fpr_at_1pct_threshold"] == pytest.approx((0.5 + 0.0) / 2)


def test_a_false_positive_rate_needs_negatives():
    with pytest.raises(MetricInputError, match="at least one negative"):
        metrics.fpr_at_threshold([1.0, 2.0], [1, 1], 0.5)
