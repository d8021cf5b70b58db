"""The submission check and the methodology page read the metric table
(evaluator/metrics/metric_table.py): a declarable metric is accepted, a row added to the table is
accepted and listed without another edit."""

from __future__ import annotations

import pytest

from evaluator.metrics import metric_table
from evaluator.metrics.metric_table import METRICS, Metric
from leaderboard.errors import ValidationFailed
from leaderboard.validation import metadata_validate

pytestmark = pytest.mark.django_db


def _metadata(declared: dict) -> dict:
    return {
        "name": "A test probe",
        "category": "hallucination",
        "base_model": "smollm2-135m-instruct",
        "layer": 15,
        "position": "last_token",
        "input": "single",
        "output": "logit",
        "license": "MIT",
        "authors": ["Ada"],
        "training_data": {"tasks": [], "external": ""},
        "declared_metrics": declared,
    }


def test_every_declarable_metric_is_accepted(registry):
    declared = {name: 0.5 for name in metric_table.declarable_names()}
    clean = metadata_validate(_metadata(declared))
    assert clean.declared_metrics == declared


def test_recall_at_1pct_fpr_can_be_declared(registry):
    clean = metadata_validate(_metadata({"recall_at_1pct_fpr": 0.4}))
    assert clean.declared_metrics == {"recall_at_1pct_fpr": 0.4}


@pytest.mark.parametrize("name", [m.name for m in METRICS if not m.declarable] + ["accuracy"])
def test_a_metric_that_is_not_declarable_is_refused(registry, name):
    with pytest.raises(ValidationFailed, match=f"unknown metric '{name}'") as info:
        metadata_validate(_metadata({name: 0.5}))
    assert info.value.field == "declared_metrics"
    assert ", ".join(metric_table.declarable_names()) in str(info.value)


def test_a_row_added_to_the_table_is_accepted(registry, monkeypatch):
    row = Metric("fnr_at_5pct", "FNR@5%", "one row", 0.0, 1.0, False, declarable=True, compared=True)
    with pytest.raises(ValidationFailed):
        metadata_validate(_metadata({row.name: 0.1}))
    monkeypatch.setattr(metric_table, "METRICS", (*METRICS, row))
    assert metadata_validate(_metadata({row.name: 0.1})).declared_metrics == {row.name: 0.1}


def test_the_methodology_page_lists_every_metric(client, registry, monkeypatch):
    row = Metric("fnr_at_5pct", "FNR@5%", "a metric added as one row", 0.0, 1.0, False)
    monkeypatch.setattr(metric_table, "METRICS", (*METRICS, row))
    html = client.get("/methodology/").content.decode()
    for m in (*METRICS, row):
        assert f'id="metric-{m.name}"' in html
    assert "a metric added as one row" in html
