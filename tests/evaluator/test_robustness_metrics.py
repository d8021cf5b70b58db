"""The robustness axis without a model: the protocol's attack budget is validated at load, the
board's numbers are recomputed from stored scores only, and the goodhart component counts from
weights spec v0.0.2 while v0.0.1 keeps every stored total."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from evaluator.axes.attack import attack_metrics, is_checkpoint, robustness_summary, steps_to_half
from evaluator.data.registry.licenses import LicenseSpec
from evaluator.data.registry.load import load_registry
from evaluator.data.registry.protocols import AttackSettings, load_protocol
from evaluator.data.registry.weights import load_weights_spec
from evaluator.errors import RegistryError
from evaluator.metrics.scoring import Measurements, probe_score

ROOT = Path(__file__).resolve().parents[2]
P1 = ROOT / "registry" / "protocols" / "p1.yaml"
LICENSES = {"MIT": LicenseSpec("MIT", "MIT", 1.0)}


def test_p1_fixes_the_attack_budget():
    attack = load_protocol(P1).attack
    assert attack == AttackSettings(
        suffix_tokens=16,
        steps=100,
        batch=8,
        learning_rate=0.1,
        seed=0,
        checkpoints=(0, 5, 10, 20),
        eval_every=20,
    )
    measured = [s for s in range(attack.steps + 1) if is_checkpoint(s, attack.steps, attack)]
    assert measured == [0, 5, 10, 20, 40, 60, 80, 100]
    # an odd budget still measures its last step
    assert is_checkpoint(7, 7, attack) and not is_checkpoint(6, 7, attack)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("checkpoints", "[5, 10]", "starting at 0"),
        ("checkpoints", "[0, 10, 5]", "increasing"),
        ("steps", "-1", "attack.steps"),
        ("learning_rate", "nan", "attack.learning_rate"),
        ("batch", "2.5", "attack.batch"),
    ],
)
def test_a_malformed_attack_budget_is_refused_with_its_field(tmp_path, field, value, message):
    original = P1.read_text().splitlines()
    # only the attack section's line is replaced (it is the last section of the file)
    start = original.index("attack:")
    lines = original[:start] + [
        f"  {field}: {value}" if line.startswith(f"  {field}:") else line for line in original[start:]
    ]
    path = tmp_path / "p1.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RegistryError, match=message):
        load_protocol(path)


def test_attack_metrics_are_recomputed_from_the_stored_scores():
    rng = np.random.default_rng(0)
    negatives = rng.normal(0, 1, 200)
    labels = np.array([0] * 50 + [1] * 50)
    scores = np.concatenate([rng.normal(0, 1, 50), rng.normal(4, 1, 50)])
    attacked = scores[50:] - 3.0
    out = attack_metrics(train_negatives=negatives, test=(labels, scores), attacked=attacked)
    threshold = np.sort(negatives)[200 - 1 - 2]  # at most 1% (2 of 200) above it
    assert out["threshold"] == threshold
    assert out["recall_clean"] == np.mean(scores[50:] > threshold)
    assert out["recall_attacked"] == np.mean(attacked > threshold)
    assert out["goodhart_resistance"] == pytest.approx(out["recall_attacked"] / out["recall_clean"])
    # an "attack" that raises the scores resists fully: clipped to 1
    up = attack_metrics(train_negatives=negatives, test=(labels, scores), attacked=scores[50:] + 1)
    assert up["goodhart_resistance"] == 1.0
    # no clean recall: nothing for the attack to take, not a resistance of 0 or 1
    none = attack_metrics(train_negatives=negatives, test=(labels, scores - 100), attacked=attacked - 100)
    assert none["recall_clean"] == 0 and none["goodhart_resistance"] is None


def test_the_summary_waits_for_a_pending_task_and_skips_undefined_ones():
    a = {"recall_clean": 0.8, "recall_attacked": 0.2, "goodhart_resistance": 0.25, "curve": []}
    b = {"recall_clean": 0.0, "recall_attacked": 0.0, "goodhart_resistance": None, "curve": []}
    out = robustness_summary({"a": a, "b": b})
    assert out["goodhart_resistance"] == 0.25 and out["attack_recall"] == 0.1
    assert set(out["robustness"]) == {"a", "b"}
    assert robustness_summary({"a": a}, pending=["b"])["goodhart_resistance"] is None
    assert robustness_summary({"b": b})["goodhart_resistance"] is None


def test_the_best_checkpoint_is_the_lowest_recall_and_the_earliest_of_equals():
    from evaluator.axes.attack import best_checkpoint

    curve = [{"step": 0, "recall": 0.9}, {"step": 5, "recall": 0.4}, {"step": 10, "recall": 0.6}]
    assert best_checkpoint(curve) == 1
    curve += [{"step": 20, "recall": 0.4}, {"step": 40, "recall": float("nan")}]
    assert best_checkpoint(curve) == 1
    assert best_checkpoint([{"step": 0, "recall": float("nan")}, {"step": 5, "recall": 1.0}]) == 1
    with pytest.raises(ValueError):
        best_checkpoint([])


def test_steps_to_half_is_the_first_checkpoint_at_or_below_half():
    curve = [{"step": 0, "recall": 0.9}, {"step": 5, "recall": 0.5}, {"step": 10, "recall": 0.4}]
    assert steps_to_half(curve, 0.9) == 10
    assert steps_to_half(curve, 1.0) == 5
    assert steps_to_half(curve[:1], 0.9) is None
    assert steps_to_half(curve, 0.0) is None


def test_goodhart_counts_from_v002_and_v001_totals_do_not_move():
    reg = load_registry(ROOT)
    v1, v2 = reg.spec("v0.0.1"), reg.spec("v0.0.2")
    assert v1.weights["goodhart"] == 0.0 and v2.weights["goodhart"] == 0.10
    assert math.isclose(sum(v2.weights.values()), 1.0) and max(v2.weights.values()) <= 0.30
    base = {"auroc": 0.9, "ece": 0.05, "latency_ms": 0.02, "license": "MIT", "rho_ce": 0.6, "auroc_ds": 0.8}
    unmeasured = Measurements.from_dict(base)
    collapsed = Measurements.from_dict(base | {"goodhart": 0.0})
    sturdy = Measurements.from_dict(base | {"goodhart": 1.0})
    old = [probe_score(m, spec=v1, licenses=LICENSES).total for m in (unmeasured, collapsed, sturdy)]
    assert old[0] == old[1] == old[2]  # weight 0 under v0.0.1: the stored totals stay what they were
    new = {
        k: probe_score(m, spec=v2, licenses=LICENSES)
        for k, m in [("u", unmeasured), ("c", collapsed), ("s", sturdy)]
    }
    assert new["s"].total - new["c"].total == pytest.approx(0.10)
    g = new["u"].components["goodhart"]
    assert g.imputed and g.value == v2.imputation["goodhart"] and "not measured" in g.note
    assert not new["c"].components["goodhart"].imputed and new["c"].components["goodhart"].raw == 0.0


def test_a_spec_from_v002_on_must_name_goodhart_and_an_older_one_may_not(tmp_path):
    text = (ROOT / "registry" / "weights" / "v0.0.2.yaml").read_text()
    missing = text.replace("  goodhart: 0.10\n", "").replace("latency: 0.05", "latency: 0.15")
    path = tmp_path / "v0.0.2.yaml"
    path.write_text(missing)
    with pytest.raises(RegistryError, match="goodhart"):
        load_weights_spec(path)
    old = (ROOT / "registry" / "weights" / "v0.0.1.yaml").read_text()
    path = tmp_path / "v0.0.1.yaml"
    path.write_text(old.replace("  license: 0.05\n", "  license: 0.05\n  goodhart: 0.0\n"))
    with pytest.raises(RegistryError, match="exactly the components"):
        load_weights_spec(path)
    no_default = text.replace("  goodhart: 0.5 ", "  # ")
    path = tmp_path / "v0.0.2b.yaml"
    path.write_text(no_default)
    with pytest.raises(RegistryError, match="imputation.goodhart"):
        load_weights_spec(path)
