"""Metric reliability (evaluator/commands/reliability.py): the diagnostic entries land where they must on
the committed panel's real rows, a missed expectation flags its metric, the committed table is the
current one, and (``-m model``) the whole run on the real model."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator.axes.text_baselines import load_panel, member_scores
from evaluator.commands.reliability import (
    DIAGNOSTICS,
    EXPECTATIONS,
    METRICS,
    SUBJECT,
    auroc_null_sd,
    entry_metrics,
    read_record,
    recall_null_sd,
    run_reliability,
    summarise,
)
from evaluator.data.registry.load import load_registry
from evaluator.metrics.metric_table import metrics
from tests.evaluator.conftest import PROJECT_ROOT, SMOLLM, model_cache_dir

TASK = "onpolicy-city-country-v1"


@pytest.fixture(scope="module")
def real():
    registry = load_registry(PROJECT_ROOT)
    task = registry.task(TASK)
    panel = load_panel(registry.root, task, SMOLLM)
    from evaluator.core.activations import read_split

    test = read_split(registry, TASK, "test", model=SMOLLM)
    return registry, panel, test


def _metrics(panel, test, scores):
    from evaluator.metrics.metrics import sigmoid

    return entry_metrics(
        test=(test.ids, test.labels, np.asarray(scores, dtype=np.float64)),
        distshift=None,
        train_negatives=np.zeros(50),
        panel=panel,
        probability=sigmoid,
    )


def test_an_oracle_has_a_positive_lift_and_the_panels_own_word_model_has_none(real):
    _, panel, test = real
    oracle = _metrics(panel, test, test.labels * 4.0 - 2.0)
    assert oracle["auroc"]["value"] == 1.0
    assert oracle["lift_over_text"]["ci"][0] > 0
    assert oracle["controlled_auroc"]["ci"][0] > 0
    assert oracle["recall_at_1pct_fpr"]["value"] == 1.0
    words = member_scores(panel, "word_tfidf")
    bow = _metrics(panel, test, [words[i] for i in test.ids])
    assert bow["lift_over_text"]["value"] <= 0
    assert bow["controlled_auroc"]["ci"][0] <= 0
    for name, rule in EXPECTATIONS.items():
        if name[0] == "bag_of_words" and name[1] in bow:
            assert rule[1](bow[name[1]] | {"ref": 1.0}), name


N = {"n_pos": 100, "n_neg": 100}


def test_the_chance_bands_follow_from_the_rows():
    # the Mann-Whitney null SD of AUROC: 0.0409 at 100 + 100 rows, so the band is ± 0.082
    assert auroc_null_sd(100, 100) == pytest.approx(0.040927, abs=1e-6)
    assert auroc_null_sd(1000, 1000) < auroc_null_sd(100, 100) / 3
    rule = EXPECTATIONS[("shuffled", "auroc")]
    assert rule[1]({"value": 0.58, **N}) and not rule[1]({"value": 0.59, **N})
    assert not rule[1]({"value": 0.56, "n_pos": 1000, "n_neg": 1000})
    assert "0.082" in rule[0]({"value": 0.5, **N}) and "2 SD" in rule[0]({"value": 0.5, **N})
    # a random direction at 0.6 was inside the old ± 0.15 band; 2 SD at n = 200 excludes it
    assert not EXPECTATIONS[("random_direction", "auroc")][1]({"value": 0.6, **N})
    recall = EXPECTATIONS[("shuffled", "recall_at_1pct_fpr")]
    assert recall[1]({"value": 0.02, **N}) and not recall[1]({"value": 0.05, **N})
    assert recall_null_sd(100) == pytest.approx(0.00995, abs=1e-5)


def test_a_missed_expectation_flags_its_metric_and_only_that_one():
    reseeds = [{m: {"value": v, "ci": [v - 0.1, v + 0.1]} for m in METRICS} for v in (0.70, 0.72, 0.74)]
    good = {
        "oracle": {m: {"value": 1.0, "ci": [0.9, 1.0]} for m in ("auroc", "auroc_ds", "recall_at_1pct_fpr")}
        | {m: {"value": 0.0} for m in ("ece", "brier")}
        | {m: {"value": 0.3, "ci": [0.2, 0.4]} for m in ("lift_over_text", "controlled_auroc")},
        "shuffled": {
            "auroc": {"value": 0.5, **N},
            "auroc_ds": {"value": 0.52, **N},
            "recall_at_1pct_fpr": {"value": 0.0, **N},
        }
        | {m: {"value": -0.2, "ci": [-0.3, -0.1]} for m in ("lift_over_text", "controlled_auroc")},
        "random_direction": {
            "auroc": {"value": 0.55, **N},
            "controlled_auroc": {"value": 0.0, "ci": [-0.02, 0.02]},
        },
        "bag_of_words": {
            m: {"value": -0.1, "ci": [-0.2, 0.0]} for m in ("lift_over_text", "controlled_auroc")
        },
    }
    table = summarise(reseeds, good)
    assert not [m for m, row in table.items() if row["flagged"]]
    assert table["auroc"]["reseed_sd"] == pytest.approx(np.std([0.70, 0.72, 0.74], ddof=1))
    assert table["auroc"]["diagnostics"]["oracle"] == {
        "value": 1.0,
        "ci": [0.9, 1.0],
        "expected": "≥ 0.99",
        "ok": True,
    }
    bad = good | {"shuffled": good["shuffled"] | {"auroc": {"value": 0.36, **N}}}
    table = summarise(reseeds, bad)
    assert [m for m, row in table.items() if row["flagged"]] == ["auroc"]
    assert table["auroc"]["diagnostics"]["shuffled"]["ok"] is False
    # a random direction far from chance flags the metric
    off = good | {"random_direction": good["random_direction"] | {"auroc": {"value": 0.9, **N}}}
    assert summarise(reseeds, off)["auroc"]["flagged"] is True


def test_the_committed_table_is_current():
    """registry/reliability.json was measured on the split files and metric definitions in force, and
    its flags follow from its own cells."""
    record = read_record(PROJECT_ROOT)
    assert record is not None, "python -m evaluator reliability --write"
    registry = load_registry(PROJECT_ROOT)
    assert record["subject"]["probe"] == SUBJECT
    task = registry.task(record["subject"]["task"])
    pinned = task.splits_for(record["subject"]["base_model"])
    for split, sha in record["split_sha256"].items():
        assert pinned[split].sha256 == sha, f"{split}: the table was measured on another file"
    versions = {m.name: m.version for m in metrics()}
    assert record["metric_versions"] == {m: versions[m] for m in METRICS}
    assert list(record["metrics"]) == list(METRICS)
    for metric, row in record["metrics"].items():
        missed = [c for c in row["diagnostics"].values() if c.get("ok") is False]
        assert row["flagged"] is bool(missed), metric
        assert set(row["diagnostics"]) <= set(DIAGNOSTICS)
    assert record["flagged"] == [m for m, row in record["metrics"].items() if row["flagged"]]


@pytest.mark.model
def test_the_run_on_the_real_model_lands_every_diagnostic():
    """On the shared cache: the activations are the ones the cycle task's run reads too
    (tests/leaderboard/test_reliability_pages.py), harvested by whichever runs first."""
    registry = load_registry(PROJECT_ROOT)
    result = run_reliability(registry, cache_dir=model_cache_dir())
    table = result["metrics"]
    assert result["flagged"] == []
    assert set(table) == set(METRICS)
    assert table["auroc"]["diagnostics"]["oracle"]["value"] == 1.0
    assert table["auroc"]["diagnostics"]["shuffled"]["ok"] is True
    assert table["auroc"]["reseed_sd"] is not None and table["auroc"]["reseed_sd"] < 0.1
