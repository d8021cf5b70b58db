"""The committed text-baseline panels: written by ``data-baselines --write``, pinned in tasks.yaml,
checked on load, and the lift over the strongest member with DeLong's paired interval."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
import yaml

from evaluator.axes.text_baselines import (
    Z95,
    chosen_by_cv,
    controlled_auroc,
    load_panel,
    member_scores,
    panel_relpath,
    strongest,
    text_lift,
)
from evaluator.data.registry.load import load_registry
from evaluator.errors import EvaluatorError, RegistryError
from evaluator.metrics.compare import delong_test, mean_delta_ci
from tests.evaluator.conftest import PROJECT_ROOT, build_registry
from tests.evaluator.test_text_panel import _toy_task


@pytest.fixture
def written(tmp_path):
    """A toy registry whose one task's panel was written by the CLI (no encoder)."""
    from evaluator.commands.cli import main

    root = build_registry(tmp_path, [_toy_task(tmp_path)])
    assert main(["data-baselines", "--write", "--registry", str(root), "--no-encoder", "--json"]) == 0
    return root


def test_write_pins_the_file_it_wrote_and_the_registry_checks_it(written):
    path = written / panel_relpath("toy-addition-v1", None)
    entry = yaml.safe_load((written / "tasks.yaml").read_text())["tasks"][0]
    assert entry["text_panel"] == hashlib.sha256(path.read_bytes()).hexdigest()
    keys = list(entry)
    assert keys.index("text_panel") == keys.index("templates") + 1
    reg = load_registry(written, verify_hashes=True)
    panel = load_panel(written, reg.task("toy-addition-v1"), None)
    assert set(panel["members"]) == {"length", "word_tfidf", "char_tfidf", "stack"}
    assert panel["protocol"]["encoder"] is None and "minilm member left out (no encoder)" in panel["notes"]
    # the per-row scores are the split's rows, in its order
    assert panel["scores"]["test"]["ids"] == [f"toy-{i:03d}" for i in range(50, 70)]
    for member in panel["members"].values():
        assert len(panel["scores"]["test"]["ids"]) == member["splits"]["test"]["n"] == 20
    assert "distshift" not in panel["scores"]  # the toy task has none


def test_a_changed_or_missing_panel_file_is_refused_with_the_command_that_rebuilds_it(written):
    path = written / panel_relpath("toy-addition-v1", None)
    data = json.loads(path.read_bytes())
    data["members"]["length"]["splits"]["test"]["auroc"] = 0.99
    path.write_text(json.dumps(data))
    with pytest.raises(RegistryError, match="has SHA-256 .* tasks.yaml pins .*data-baselines --write"):
        load_registry(written, verify_hashes=True)
    path.unlink()
    with pytest.raises(RegistryError, match="toy-addition-v1.json is missing"):
        load_panel(written, load_registry(written).task("toy-addition-v1"), None)


def test_a_pin_that_is_not_a_sha256_is_refused(tmp_path):
    task = _toy_task(tmp_path) | {"text_panel": "not-a-hash"}
    root = build_registry(tmp_path, [task])
    with pytest.raises(RegistryError, match="text_panel must be a lowercase hex SHA-256"):
        load_registry(root)


PANEL = {
    "members": {
        "length": {"cv_auroc": 0.7, "splits": {"test": {"auroc": 0.55}}},
        "char_tfidf": {"cv_auroc": 0.6, "splits": {"test": {"auroc": 0.8}}},
        "stack": {"cv_auroc": 0.7, "splits": {"test": {"auroc": 0.8}}},
    }
}


def test_the_strongest_is_the_best_on_the_split_and_cv_picks_on_train():
    assert strongest(PANEL, "test") == "char_tfidf"  # first of equals
    assert strongest(PANEL, "distshift") is None
    assert chosen_by_cv(PANEL) == "length"


def _panel_with(scores: dict[str, list[float]], ids: list[str], aurocs: dict[str, float]) -> dict:
    return {
        "members": {n: {"cv_auroc": 0.5, "splits": {"test": {"auroc": a}}} for n, a in aurocs.items()},
        "scores": {"test": {"ids": ids, **scores}},
    }


def test_the_lift_is_delongs_paired_difference_with_its_interval():
    rng = np.random.default_rng(0)
    labels = np.array([0, 1] * 60)
    probe = labels * 1.5 + rng.standard_normal(labels.size)
    text = labels * 0.6 + rng.standard_normal(labels.size)
    weak = rng.standard_normal(labels.size)
    ids = [f"r{i}" for i in range(labels.size)]
    panel = _panel_with({"weak": weak.tolist(), "words": text.tolist()}, ids, {"weak": 0.5, "words": 0.66})
    rows = list(zip(reversed(ids), reversed(labels.tolist()), reversed(probe.tolist()), strict=True))
    lift = text_lift(panel, rows)  # paired by id, whatever the order
    expected = delong_test(probe, text, labels)
    assert lift["name"] == "words"
    assert lift["auroc"] == pytest.approx(expected.auroc_b, abs=1e-6)
    assert lift["lift"] == pytest.approx(expected.delta, abs=1e-6) and lift["lift"] > 0
    half = Z95 * math.sqrt(expected.variance)
    assert lift["ci"] == pytest.approx([expected.delta - half, expected.delta + half], abs=1e-6)
    assert lift["p_value"] == pytest.approx(expected.p_value)


def test_a_probe_equal_to_the_baseline_has_a_lift_of_zero_inside_its_interval():
    rng = np.random.default_rng(1)
    labels = np.array([0, 1] * 40)
    s = (labels + rng.standard_normal(labels.size)).tolist()
    ids = [f"r{i}" for i in range(labels.size)]
    lift = text_lift(
        _panel_with({"words": s}, ids, {"words": 0.7}), zip(ids, labels.tolist(), s, strict=True)
    )
    assert lift["lift"] == 0 and lift["ci"][0] <= 0 <= lift["ci"][1]


def test_a_probe_row_the_panel_did_not_score_is_an_error():
    panel = _panel_with({"words": [0.1, 0.2]}, ["a", "b"], {"words": 0.6})
    with pytest.raises(EvaluatorError, match="scored no row 'c' of this test split .1 of 3 rows missing"):
        text_lift(panel, [("a", 0, 0.1), ("b", 1, 0.3), ("c", 1, 0.9)])
    with pytest.raises(EvaluatorError, match="no test scores for member nope"):
        member_scores(panel, "nope")


def test_the_mean_lifts_interval_adds_the_tasks_variances():
    lo, hi = mean_delta_ci([(0.1, (0.0, 0.2)), (0.3, (0.2, 0.4))])
    se = math.sqrt(2 * (0.1 / Z95) ** 2) / 2
    assert (lo, hi) == pytest.approx((0.2 - Z95 * se, 0.2 + Z95 * se), abs=1e-6)
    assert mean_delta_ci([]) is None


def test_every_committed_panel_is_pinned_and_scores_its_tasks_test_rows():
    """The committed panels: one per task (per model file of an on-policy task), pinned, and
    holding a score for every row of the split it was built from."""
    from evaluator.core.activations import read_split

    reg = load_registry(PROJECT_ROOT, verify_hashes=True)
    for task in reg.tasks.values():
        models = list(task.splits_by_model) if task.on_policy else [None]
        for model in models:
            assert task.text_panel_sha256(model), f"{task.id} {model}: no text_panel pinned"
            panel = load_panel(PROJECT_ROOT, task, model)
            assert panel["task"] == task.id and panel["model"] == model
            assert panel["protocol"]["encoder"] == "all-minilm-l6-v2"
            assert "stack" in panel["members"] and "minilm" in panel["members"]
            test = read_split(reg, task.id, "test", model=model)
            assert panel["scores"]["test"]["ids"] == list(test.ids)


def _confounded(n: int = 300, seed: int = 0):
    """Labels, a text score that half-knows them, a length score that knows nothing, ids."""
    rng = np.random.default_rng(seed)
    labels = np.array([0, 1] * (n // 2))
    text = labels * 1.0 + rng.standard_normal(n)
    length = rng.standard_normal(n)
    ids = [f"r{i}" for i in range(n)]
    panel = _panel_with(
        {"words": text.tolist(), "length": length.tolist()}, ids, {"words": 0.75, "length": 0.5}
    )
    return labels, text, panel, ids, rng


def test_a_probe_that_only_reads_the_text_adds_nothing_once_controlled():
    labels, text, panel, ids, rng = _confounded()
    echo = text + 0.05 * rng.standard_normal(text.size)  # the text's signal, re-read
    out = controlled_auroc(panel, zip(ids, labels.tolist(), echo.tolist(), strict=True))
    assert out["controls"] == ["words", "length"]
    assert abs(out["delta"]) < 0.02 and out["ci"][0] <= 0 <= out["ci"][1]
    assert out["controls_auroc"] > 0.7  # the controls alone separate the classes
    # its plain lift over the same baseline is also about 0: here the two agree
    assert abs(text_lift(panel, zip(ids, labels.tolist(), echo.tolist(), strict=True))["lift"]) < 0.02


def test_a_probe_with_signal_the_text_lacks_is_credited_even_when_it_scores_lower():
    labels, text, panel, ids, rng = _confounded(seed=1)
    other = labels * 0.8 + rng.standard_normal(labels.size)  # independent, weaker than the text
    rows = list(zip(ids, labels.tolist(), other.tolist(), strict=True))
    lift = text_lift(panel, rows)
    out = controlled_auroc(panel, rows)
    assert lift["lift"] < 0  # on its own it scores below the text
    assert out["delta"] > 0.03 and out["ci"][0] > 0  # but it adds what the text does not carry
    assert out == controlled_auroc(panel, rows)  # cross-fitting is seeded


def test_the_cli_and_the_board_name_the_same_member_on_a_tie():
    from evaluator.axes.text_panel import best_member

    # equal at the file's four decimals: the first by name, whatever the order or the fifth decimal
    assert best_member({"word_tfidf": 1.0, "char_tfidf": 0.99999, "stack": 1.0}) == "char_tfidf"
    assert best_member({"stack": 0.7, "minilm": 0.71}) == "minilm"
    assert best_member({}) is None
