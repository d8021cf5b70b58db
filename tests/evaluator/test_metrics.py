"""Metric functions against hand-computed small cases and against scikit-learn."""

import subprocess
import sys

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, roc_auc_score

from evaluator.errors import MetricInputError
from evaluator.metrics import metrics


def test_auroc_hand_computed_with_a_tie():
    # pairs (pos, neg): (0.8,0.1)=1 (0.8,0.5)=1 (0.5,0.1)=1 (0.5,0.5)=½ → 3.5/4
    assert metrics.auroc([0.8, 0.5, 0.1, 0.5], [1, 1, 0, 0]) == pytest.approx(0.875)


def test_auroc_matches_sklearn_on_random_data_with_ties():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 500)
    s = np.round(rng.normal(size=500) + y, 1)  # rounding makes ties
    assert metrics.auroc(s, y) == pytest.approx(roc_auc_score(y, s))


def test_auroc_ci_brackets_the_estimate_and_is_reproducible():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 300)
    s = rng.normal(size=300) + 0.8 * y
    lo, hi = metrics.auroc_ci(s, y)
    assert lo < metrics.auroc(s, y) < hi
    assert 0.05 < hi - lo < 0.25
    assert metrics.auroc_ci(s, y) == (lo, hi)  # fixed seed


def test_auroc_ea_hand_computed():
    # ref scores put examples 0-1, 2-3, ... in separate quintile bins
    r = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4], dtype=float)
    y = np.array([1, 0, 1, 0, 1, 0, 1, 0, 1, 0])
    s = np.array([0.9, 0.1, 0.2, 0.8, 0.7, 0.7, 0.9, 0.2, 0.6, 0.3])
    # bins: (pos>neg)=1, 0, ½, 1, 1 → 3.5 / 5
    assert metrics.auroc_ea(s, y, r) == pytest.approx(0.7)


def test_auroc_ea_follows_the_spec_binning_exactly():
    rng = np.random.default_rng(2)
    n = 400
    y = rng.integers(0, 2, n)
    r = rng.normal(size=n) + y
    s = rng.normal(size=n) + 0.5 * y
    edges = np.quantile(r, [0.2, 0.4, 0.6, 0.8])
    b = np.searchsorted(edges, r, side="right")
    num = den = 0.0
    for k in range(5):
        pos, neg = s[(b == k) & (y == 1)], s[(b == k) & (y == 0)]
        for p in pos:
            num += (p > neg).sum() + 0.5 * (p == neg).sum()
        den += len(pos) * len(neg)
    assert metrics.auroc_ea(s, y, r) == pytest.approx(num / den)


def test_a_probe_that_only_reads_the_eval_signal_falls_to_chance():
    rng = np.random.default_rng(3)
    n = 2000
    eval_level = rng.integers(0, 5, n)  # how much a prompt looks like an eval, 5 levels
    y = (rng.uniform(size=n) < 0.05 + 0.225 * eval_level).astype(int)  # labels confounded with it
    r = eval_level + rng.normal(scale=0.05, size=n)  # the reference probe reads "eval-ness"
    s = eval_level + rng.normal(scale=0.05, size=n)  # so does the probe, and nothing else
    assert metrics.auroc(s, y) > 0.8
    assert abs(metrics.auroc_ea(s, y, r) - 0.5) < 0.06


def test_ece_hand_computed():
    p = np.array([0.05, 0.15, 0.15, 0.95, 1.0])
    y = np.array([0, 1, 0, 1, 1])
    # bins 0: |0-0.05|·1/5; 1: |0.5-0.15|·2/5; 9: |1-0.975|·2/5
    expected = 0.05 / 5 + 0.35 * 2 / 5 + 0.025 * 2 / 5
    assert metrics.ece(p, y) == pytest.approx(expected)


def test_ece_puts_p_equal_one_in_the_last_bin():
    assert metrics.ece([1.0, 0.95], [1, 1]) == pytest.approx(0.025)


def test_brier_matches_sklearn():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 100)
    p = rng.uniform(size=100)
    assert metrics.brier(p, y) == pytest.approx(brier_score_loss(y, p))


def test_recall_at_fixed_fpr():
    neg = np.arange(100, dtype=float)  # 0..99
    t = metrics.threshold_at_fpr(neg, 0.01)
    assert (neg > t).mean() <= 0.01
    assert metrics.recall_at_fpr([100, 98.5, 50], [1, 1, 1], t) == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("scores", "labels", "message"),
    [
        ([0.1, 0.2], [1, 1], "needs both classes"),
        ([0.1, float("nan")], [0, 1], "NaN"),
        ([0.1, 0.2, 0.3], [0, 1], "3 scores but 2 labels"),
        ([0.1, 0.2], [0, 2], "labels must be 0 or 1"),
    ],
)
def test_malformed_input_is_a_clear_error(scores, labels, message):
    with pytest.raises(MetricInputError, match=message):
        metrics.auroc(scores, labels)


def run_cli(path):
    return subprocess.run(
        [sys.executable, "-m", "evaluator", "metrics", "--scores", str(path)], capture_output=True, text=True
    )


def test_metrics_command_contract(tmp_path):
    import json

    f = tmp_path / "s.csv"
    f.write_text(
        "score,label,ref_score\n2,1,0\n-1,0,0\n1,1,1\n0.5,0,1\n3,1,2\n-2,0,2\n0,1,3\n1,0,3\n2,1,4\n-1,0,4\n"
    )
    proc = run_cli(f)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["n"] == 10
    s = [2, -1, 1, 0.5, 3, -2, 0, 1, 2, -1]
    y = [1, 0, 1, 0, 1, 0, 1, 0, 1, 0]
    assert out["auroc"] == pytest.approx(roc_auc_score(y, s))
    assert out["auroc_ea"] == pytest.approx(0.8)  # bins hold one pair each: 1,1,1,0,1
    assert out["ece"] == pytest.approx(metrics.ece(metrics.sigmoid(s), y))
    assert len(out["auroc_ci"]) == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("score\n1\n", "missing column(s) label"),
        ("score,label\nx,1\n0.2,0\n", "line 2: column score is not a number"),
        ("score,label\n0.1,1\n0.2,1\n", "needs both classes"),
    ],
)
def test_metrics_command_rejects_malformed_csv(tmp_path, content, message):
    f = tmp_path / "s.csv"
    f.write_text(content)
    proc = run_cli(f)
    assert proc.returncode != 0
    assert message in proc.stderr


def test_the_mean_auroc_interval_over_tasks_brackets_the_mean_and_equals_the_single_task_one():
    rng = np.random.default_rng(5)
    tasks = []
    for shift in (0.5, 1.5):
        y = rng.integers(0, 2, 200)
        tasks.append((rng.normal(size=200) + shift * y, y))
    lo, hi = metrics.auroc_mean_ci(tasks)
    mean = np.mean([metrics.auroc(s, y) for s, y in tasks])
    assert lo < mean < hi
    assert metrics.auroc_mean_ci(tasks[:1]) == pytest.approx(metrics.auroc_ci(*tasks[0]))
