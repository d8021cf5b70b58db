"""The board's other orders: Borda across tasks and the holdout-vs-test rank delta."""

from __future__ import annotations

import pytest

from evaluator.metrics.ranks import borda_ranks, borda_scores, competition_ranks, rank_deltas


def test_competition_ranks_share_the_better_rank():
    assert competition_ranks({"a": 0.9, "b": 0.8, "c": 0.8, "d": 0.1}) == {"a": 1, "b": 2, "c": 2, "d": 4}
    assert competition_ranks({"a": 3, "b": 1}, higher_is_better=False) == {"a": 2, "b": 1}


def test_one_task_far_ahead_cannot_carry_an_entry():
    """``big`` wins one task by a mile and loses the other two narrowly: its mean AUROC is the
    highest, its Borda rank is not."""
    per_task = {
        "big": {"t1": 0.99, "t2": 0.60, "t3": 0.60},
        "steady": {"t1": 0.70, "t2": 0.62, "t3": 0.62},
        "weak": {"t1": 0.65, "t2": 0.55, "t3": 0.55},
    }
    mean = {k: sum(v.values()) / 3 for k, v in per_task.items()}
    assert max(mean, key=mean.__getitem__) == "big"
    ranks = borda_ranks(per_task)
    assert ranks["steady"][0] == 1 and ranks["big"][0] == 2 and ranks["weak"][0] == 3
    assert ranks["steady"][1] == pytest.approx((0.5 + 1 + 1) / 3)


def test_a_saturated_task_separates_nobody_and_missing_tasks_are_left_out():
    per_task = {
        "a": {"sat": 0.999, "hard": 0.8, "own": None},
        "b": {"sat": 0.999, "hard": 0.7},
        "c": {"sat": 0.999, "hard": 0.6, "own": 0.9},
    }
    scores = borda_scores(per_task)
    assert scores == pytest.approx({"a": (0.5 + 1) / 2, "b": (0.5 + 0.5) / 2, "c": (0.5 + 0) / 2})
    assert borda_scores({"alone": {"t": 0.9}}) == {}  # one entry on a task ranks nobody


def test_rank_delta_is_holdout_rank_minus_test_rank_over_entries_with_both():
    pairs = {"a": (0.70, 0.95), "b": (0.90, 0.90), "c": (0.80, 0.85), "gone": (None, 0.99)}
    assert rank_deltas(pairs) == {"a": 3 - 1, "b": 1 - 2, "c": 2 - 3}
    assert rank_deltas({"a": (0.7, 0.9)}) == {}
