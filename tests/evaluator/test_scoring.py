"""ProbeScore on hand-worked cases, under the real v0.0.1 spec file."""

import json
import math
import subprocess
import sys

import pytest

from evaluator.data.registry.load import load_registry
from evaluator.errors import UnknownNameError
from evaluator.metrics.scoring import Measurements, probe_score, ranking_key

REG = load_registry()
SPEC = REG.spec("v0.0.1")


def score(**kw):
    base = dict(auroc=0.9, ece=0.1, latency_ms=10.0, license="Apache-2.0")
    base.update(kw)
    return probe_score(Measurements(**base), spec=SPEC, licenses=REG.licenses)


def test_a_perfect_probe_scores_exactly_one():
    s = score(auroc=1.0, auroc_ea=1.0, auroc_ds=1.0, ece=0.0, rho_ce=1.0, latency_ms=1.0, goodhart=1.0)
    assert s.total == pytest.approx(1.0)
    assert not any(c.imputed for c in s.components.values())
    assert s.measured_total == pytest.approx(1.0)


def test_the_hand_worked_example_adds_up():
    # 0.30·0.9 + 0.20·0.8 + 0.15·0.7 + 0.10·(1−0.2) + 0.10·0.6 + 0.10·(1−1/4) + 0.05·0.95
    s = score(auroc=0.9, auroc_ea=0.8, auroc_ds=0.7, ece=0.1, rho_ce=0.6, latency_ms=10.0, license="MIT")
    expected = 0.27 + 0.16 + 0.105 + 0.08 + 0.06 + 0.075 + 0.0475
    assert s.total == pytest.approx(expected)
    assert s.components["latency"].value == pytest.approx(0.75)
    assert s.components["calibration"].contribution == pytest.approx(0.08)


def test_missing_measurements_are_imputed_conservatively_and_flagged():
    s = score(auroc=0.8, auroc_ea=None, auroc_ds=None, rho_ce=None)
    c = s.components
    assert c["auroc_ea"].value == pytest.approx(0.85 * 0.8) and c["auroc_ea"].imputed
    assert c["auroc_ds"].value == pytest.approx(0.7 * 0.8) and c["auroc_ds"].imputed
    assert c["rho_ce"].value == pytest.approx(0.5) and c["rho_ce"].imputed
    assert not c["auroc"].imputed and not c["calibration"].imputed
    # measured-only total: weighted mean over the measured components
    measured = [k for k in c if not c[k].imputed]
    expected = sum(c[k].contribution for k in measured) / sum(c[k].weight for k in measured)
    assert s.measured_total == pytest.approx(expected)


def test_eval_awareness_probes_use_raw_auroc_not_imputed():
    s = score(auroc=0.8, ea_not_applicable=True)
    assert s.components["auroc_ea"].value == pytest.approx(0.8)
    assert not s.components["auroc_ea"].imputed
    assert "n/a" in s.components["auroc_ea"].note


@pytest.mark.parametrize(
    ("kw", "component", "value"),
    [
        ({"ece": 0.6}, "calibration", 0.0),  # ECE clamped to 0.5
        ({"ece": -0.1}, "calibration", 1.0),
        ({"latency_ms": 0.1}, "latency", 1.0),  # clamped to 1 ms
        ({"latency_ms": 20_000}, "latency", 0.0),  # clamped to 10,000 ms
        ({"rho_ce": -0.4}, "rho_ce", 0.0),  # negative transfer counts as 0
        ({"rho_ce": 1.7}, "rho_ce", 1.0),
        ({"license": "closed"}, "license", 0.2),
    ],
)
def test_components_are_clamped(kw, component, value):
    assert score(**kw).components[component].value == pytest.approx(value)


def test_weights_come_from_the_spec_and_sum_to_one():
    s = score()
    assert {k: c.weight for k, c in s.components.items()} == SPEC.weights
    assert math.isclose(sum(SPEC.weights.values()), 1.0)


def test_license_never_decides_a_ranking_alone():
    # Norm 2: closed probe with higher AUROC ranks above an Apache-2.0 one with lower AUROC when the
    # other axes are equal, even though the open probe's total (license included) is higher here.
    closed = score(auroc=0.90, auroc_ea=0.8, auroc_ds=0.8, rho_ce=0.5, license="closed")
    open_ = score(auroc=0.85, auroc_ea=0.8, auroc_ds=0.8, rho_ce=0.5, license="Apache-2.0")
    assert open_.total > closed.total
    key = lambda s: ranking_key(s.total, s.components["license"].contribution)  # noqa: E731
    assert sorted([open_, closed], key=key, reverse=True) == [closed, open_]
    # ... and license still breaks an exact tie
    tie_open = score(auroc=0.9, auroc_ea=0.8, auroc_ds=0.8, rho_ce=0.5, license="MIT")
    assert sorted([closed, tie_open], key=key, reverse=True) == [tie_open, closed]


def test_an_unknown_license_lists_the_accepted_ones():
    with pytest.raises(UnknownNameError, match="accepted: Apache-2.0"):
        score(license="WTFPL")


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "evaluator", *args], capture_output=True, text=True)


def test_the_score_command_prints_the_contract(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(
        json.dumps(
            {
                "auroc": 0.91,
                "auroc_ea": None,
                "auroc_ds": 0.8,
                "ece": 0.07,
                "rho_ce": None,
                "latency_ms": 3.2,
                "license": "MIT",
            }
        )
    )
    proc = run_cli("score", "--components", str(f), "--spec", "v0.0.1")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["spec"] == "v0.0.1"
    assert set(out["components"]) == {
        "auroc",
        "auroc_ea",
        "auroc_ds",
        "calibration",
        "rho_ce",
        "latency",
        "license",
        "goodhart",
    }
    assert out["components"]["auroc_ea"]["imputed"] is True
    assert out["components"]["auroc_ea"]["value"] == pytest.approx(0.85 * 0.91)
    total = sum(c["contribution"] for c in out["components"].values())
    assert out["total"] == pytest.approx(total)


@pytest.mark.parametrize(
    ("payload", "spec", "message"),
    [
        ({"auroc": 0.9, "ece": 0.1, "latency_ms": 2, "license": "WTFPL"}, "v0.0.1", "accepted: Apache-2.0"),
        ({"auroc": 0.9, "ece": 0.1, "latency_ms": 2, "license": "MIT"}, "v9.9.9", "accepted: v0.0.1"),
        ({"auroc": 0.9, "latency_ms": 2, "license": "MIT"}, "v0.0.1", "missing required value(s) ece"),
        ({"auroc": 1.5, "ece": 0.1, "latency_ms": 2, "license": "MIT"}, "v0.0.1", "auroc must lie in [0, 1]"),
    ],
)
def test_the_score_command_rejects_bad_input_with_a_message(tmp_path, payload, spec, message):
    f = tmp_path / "c.json"
    f.write_text(json.dumps(payload))
    proc = run_cli("score", "--components", str(f), "--spec", spec)
    assert proc.returncode != 0
    assert message in proc.stderr
