"""Paired comparison of two probes: fast DeLong against the textbook definition, the paired
bootstrap interval, and the ``python -m evaluator compare`` command."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from evaluator.errors import MetricInputError
from evaluator.metrics import compare


def textbook_delong(a, b, y):
    """DeLong, DeLong & Clarke-Pearson (1988) written out plainly: the O(m·n) kernel
    psi(x, z) = 1 if x > z, ½ if x = z, 0 otherwise; structural components V10 (per positive),
    V01 (per negative); S10, S01 their sample covariance matrices; Var(Δ) = c'(S10/m + S01/n)c with
    c = (1, −1); z = Δ/√Var; two-sided normal p-value."""
    a, b, y = list(map(float, a)), list(map(float, b)), list(map(int, y))

    def psi(x, z):
        return 1.0 if x > z else (0.5 if x == z else 0.0)

    pos = [i for i in range(len(y)) if y[i] == 1]
    neg = [j for j in range(len(y)) if y[j] == 0]
    m, n = len(pos), len(neg)
    aucs, v10s, v01s = [], [], []
    for s in (a, b):
        v10 = [sum(psi(s[i], s[j]) for j in neg) / n for i in pos]
        v01 = [sum(psi(s[i], s[j]) for i in pos) / m for j in neg]
        aucs.append(sum(v10) / m)
        v10s.append(v10)
        v01s.append(v01)

    def cov(u, v):
        mu, mv = sum(u) / len(u), sum(v) / len(v)
        return sum((p - mu) * (q - mv) for p, q in zip(u, v, strict=True)) / (len(u) - 1)

    s10 = [[cov(v10s[k], v10s[r]) for r in range(2)] for k in range(2)]
    s01 = [[cov(v01s[k], v01s[r]) for r in range(2)] for k in range(2)]
    var = (s10[0][0] + s10[1][1] - 2 * s10[0][1]) / m + (s01[0][0] + s01[1][1] - 2 * s01[0][1]) / n
    delta = aucs[0] - aucs[1]
    z = delta / math.sqrt(var)
    p = 2 * (1 - 0.5 * (1 + math.erf(abs(z) / math.sqrt(2))))
    return aucs[0], aucs[1], var, z, p


def correlated_probes(seed, n, *, rounding=None):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    shared = rng.normal(size=n)  # both probes read the same rows: their errors correlate
    a = shared + 1.0 * y + 0.5 * rng.normal(size=n)
    b = shared + 0.7 * y + 0.5 * rng.normal(size=n)
    if rounding is not None:
        a, b = np.round(a, rounding), np.round(b, rounding)
    return a, b, y


@pytest.mark.parametrize(
    ("seed", "n", "rounding"),
    [(0, 120, None), (1, 300, None), (2, 200, 0), (3, 150, 1), (4, 60, 0)],
    ids=["no-ties-120", "no-ties-300", "heavy-ties", "some-ties", "small-heavy-ties"],
)
def test_fast_delong_equals_the_textbook_definition(seed, n, rounding):
    a, b, y = correlated_probes(seed, n, rounding=rounding)
    if rounding is not None:
        assert len(np.unique(a)) < n / 2  # the case really has ties
    auc_a, auc_b, var, z, p = textbook_delong(a, b, y)
    got = compare.delong_test(a, b, y)
    assert got.auroc_a == pytest.approx(auc_a, abs=1e-9)
    assert got.auroc_b == pytest.approx(auc_b, abs=1e-9)
    assert got.auroc_a == pytest.approx(roc_auc_score(y, a), abs=1e-12)
    assert got.variance == pytest.approx(var, abs=1e-9)
    assert got.z == pytest.approx(z, abs=1e-9)
    assert got.p_value == pytest.approx(p, abs=1e-9)


def test_ties_across_the_two_classes_count_one_half():
    # a: pos {0.8, 0.5}, neg {0.5, 0.1} → (1 + 1 + ½ + 1)/4; b the same but worse
    a = [0.8, 0.5, 0.5, 0.1, 0.3, 0.2]
    b = [0.5, 0.1, 0.5, 0.8, 0.3, 0.2]
    y = [1, 1, 0, 0, 1, 0]
    got = compare.delong_test(a, b, y)
    assert got.auroc_a == pytest.approx(roc_auc_score(y, a))
    assert got.auroc_b == pytest.approx(roc_auc_score(y, b))
    assert got.p_value == pytest.approx(textbook_delong(a, b, y)[4], abs=1e-9)


def test_identical_probes_are_not_different():
    a, _, y = correlated_probes(5, 100)
    got = compare.delong_test(a, a, y)
    assert got.delta == 0.0 and got.p_value == 1.0 and got.z is None
    assert compare.paired_delta_ci(a, a, y, n_resamples=50) == (0.0, 0.0)


def test_a_clearly_better_probe_gets_a_small_p_value_and_an_interval_above_zero():
    rng = np.random.default_rng(6)
    y = rng.integers(0, 2, 400)
    noise = rng.normal(size=400)
    good = noise + 2.0 * y
    weak = noise + 0.3 * y + rng.normal(size=400)
    test = compare.delong_test(good, weak, y)
    assert test.p_value < 1e-6
    lo, hi = compare.paired_delta_ci(good, weak, y)
    assert 0 < lo < test.delta < hi


def test_two_probes_that_differ_by_noise_only_are_not_told_apart():
    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, 300)
    signal = 1.0 * y + rng.normal(size=300)
    a = signal + 0.3 * rng.normal(size=300)
    b = signal + 0.3 * rng.normal(size=300)
    test = compare.delong_test(a, b, y)
    assert test.p_value > 0.05
    lo, hi = compare.paired_delta_ci(a, b, y)
    assert lo < 0 < hi


def test_the_paired_interval_is_narrower_than_an_unpaired_one_would_be():
    # Two probes sharing most of their signal: the paired Δ varies far less than either AUROC.
    a, b, y = correlated_probes(8, 300)
    lo, hi = compare.paired_delta_ci(a, b, y)
    from evaluator.metrics.metrics import auroc_ci

    a_lo, a_hi = auroc_ci(a, y)
    b_lo, b_hi = auroc_ci(b, y)
    assert hi - lo < math.hypot(a_hi - a_lo, b_hi - b_lo) * 0.9
    assert compare.paired_delta_ci(a, b, y) == (lo, hi)  # seeded
    assert compare.paired_delta_ci(a, b, y, seed=1) != (lo, hi)


@pytest.mark.parametrize(
    ("a", "b", "y", "message"),
    [
        ([0.1, 0.2, 0.3], [0.1, 0.2], [0, 1, 1], "lengths differ"),
        ([0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4], [0, 1, 1, 1], "at least 2 positive and 2 negative"),
        ([0.1, float("inf"), 0.3, 0.4], [0.1, 0.2, 0.3, 0.4], [0, 0, 1, 1], "NaN or infinite"),
    ],
)
def test_malformed_pairs_are_a_clear_error(a, b, y, message):
    with pytest.raises(MetricInputError, match=message):
        compare.delong_test(a, b, y)


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "evaluator", "compare", *map(str, args)], capture_output=True, text=True
    )


def test_compare_command_prints_the_contract_and_matches_the_textbook(tmp_path):
    a, b, y = correlated_probes(9, 80, rounding=1)
    f = tmp_path / "pair.csv"
    f.write_text(
        "label,score_a,score_b\n"
        + "".join(f"{yy},{float(aa)!r},{float(bb)!r}\n" for yy, aa, bb in zip(y, a, b, strict=True))
    )
    proc = run_cli("--scores", f)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"n", "auroc_a", "auroc_b", "delta", "delta_ci", "p_value"}
    auc_a, auc_b, _, _, p = textbook_delong(a, b, y)
    assert out["n"] == 80
    assert out["auroc_a"] == pytest.approx(auc_a, abs=1e-9)
    assert out["auroc_b"] == pytest.approx(auc_b, abs=1e-9)
    assert out["delta"] == pytest.approx(auc_a - auc_b, abs=1e-9)
    assert out["p_value"] == pytest.approx(p, abs=1e-9)
    lo, hi = out["delta_ci"]
    assert [lo, hi] == list(compare.paired_delta_ci(a, b, y))
    assert lo <= out["delta"] <= hi


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("label,score_a\n1,0.2\n", "missing column(s) score_b"),
        ("label,score_a,score_b\n2,0.1,0.2\n", "label must be 0 or 1"),
        ("label,score_a,score_b\n1,0.1,x\n", "column score_b is not a number"),
        ("label,score_a,score_b\n1,0.1,0.2\n0,0.3,0.1\n", "at least 2 positive and 2 negative"),
    ],
)
def test_compare_command_rejects_malformed_csv(tmp_path, content, message):
    f = tmp_path / "pair.csv"
    f.write_text(content)
    proc = run_cli("--scores", f)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_probes_on_different_models_are_compared_on_the_rows_they_share():
    a, b, y = correlated_probes(12, 120)
    ids = [f"row-{i}" for i in range(120)]
    rows_a = {ids[i]: (int(y[i]), float(a[i])) for i in range(100)}  # a misses the last 20 rows
    rows_b = {ids[i]: (int(y[i]), float(b[i])) for i in reversed(range(10, 120))}  # b the first 10
    got = compare.rows_compare(a=rows_a, b=rows_b, n_resamples=200)
    assert got["paired"] and (got["n_shared"], got["n_a"], got["n_b"]) == (90, 100, 110)
    expected = compare.scores_compare(a[10:100], b[10:100], y[10:100], n_resamples=200)
    assert got["auroc_a"] == pytest.approx(expected["auroc_a"], abs=1e-12)
    assert got["p_value"] == pytest.approx(expected["p_value"], abs=1e-12)
    assert got["delta_ci"] == expected["delta_ci"]


def test_rows_that_are_not_shared_cannot_be_paired():
    rows_a = {"m1-0": (1, 0.5), "m1-1": (0, 0.1)}
    rows_b = {"m2-0": (1, 0.7), "m2-1": (0, 0.2)}
    got = compare.rows_compare(a=rows_a, b=rows_b)
    assert got == {"n_shared": 0, "n_a": 2, "n_b": 2, "paired": False, "reason": got["reason"]}
    assert "share no scored row" in got["reason"]
    few = compare.rows_compare(
        a={"r0": (1, 0.5), "r1": (0, 0.1), "r2": (0, 0.3)}, b={"r0": (1, 0.2), "r1": (0, 0.4), "r2": (0, 0.1)}
    )
    assert not few["paired"] and "at least 2 of each" in few["reason"]


def test_a_row_labelled_differently_for_the_two_probes_is_an_error():
    with pytest.raises(MetricInputError, match="row r0 has label 1 for one probe and 0"):
        compare.rows_compare(a={"r0": (1, 0.5)}, b={"r0": (0, 0.5)})
