"""The metric table (evaluator/metrics/metric_table.py): each metric's facts written once, and the
readers that follow it (the declared-vs-measured comparison, the reproduce client, the export's
columns). The submission check's reading of it is tested with the database,
tests/leaderboard/test_metric_table_readers.py."""

from __future__ import annotations

import dataclasses

import pytest

from evaluator.commands.client.reproduce import DEFAULT_TOLERANCES, numbers_compare, protocol_tolerances
from evaluator.metrics import metric_table
from evaluator.metrics.measure import declared_gaps
from evaluator.metrics.metric_table import DECLARED_GAP, METRICS, Metric

NEW = Metric(
    "fnr_at_5pct",
    "FNR@5%",
    "a metric added as one row",
    0.0,
    1.0,
    False,
    declarable=True,
    compared=True,
    tolerance="auroc",
    exported=True,
)


@pytest.fixture
def one_more_row(monkeypatch):
    monkeypatch.setattr(metric_table, "METRICS", (*METRICS, NEW))
    return NEW


def test_names_are_unique_and_ranges_ordered():
    names = [m.name for m in METRICS]
    assert len(names) == len(set(names))
    for m in METRICS:
        assert m.lo < m.hi, m.name
        assert m.version >= 1


def test_declare_and_compare_agree():
    """A compared metric can be declared; a declarable metric in [0, 1] is compared (5 points
    mean the same thing for all of them); any other declarable one says why it is not."""
    for m in METRICS:
        if m.compared:
            assert m.declarable, m.name
            assert (m.lo, m.hi) == (0.0, 1.0), m.name
        if m.declarable and not m.compared:
            assert m.not_compared, m.name
            assert (m.lo, m.hi) != (0.0, 1.0), m.name


def test_rho_ce_declared_is_compared_and_recall_is_declarable():
    assert metric_table.metric("rho_ce").compared
    assert metric_table.metric("recall_at_1pct_fpr").declarable
    assert "rho_ce" in metric_table.compared_names()
    assert "recall_at_1pct_fpr" in metric_table.declarable_names()


def test_every_compared_metric_is_compared_by_declared_gaps():
    aggregate = {m.name: 0.5 for m in METRICS}
    declared = {m.name: 0.9 for m in METRICS if m.declarable}
    gaps = declared_gaps(declared, aggregate)
    assert set(gaps) == set(metric_table.compared_names())
    assert all(g["flagged"] for g in gaps.values())
    # within the gap: compared, not flagged
    near = declared_gaps({"rho_ce": 0.5 + DECLARED_GAP / 2}, {"rho_ce": 0.5})
    assert near["rho_ce"]["flagged"] is False


def test_a_declared_rho_ce_far_from_the_measured_one_is_flagged():
    gaps = declared_gaps({"rho_ce": 0.9}, {"rho_ce": 0.4})
    assert gaps["rho_ce"] == {"declared": 0.9, "measured": 0.4, "gap": pytest.approx(-0.5), "flagged": True}
    # not measured (imputed: None in the aggregate): nothing to compare
    assert declared_gaps({"rho_ce": 0.9}, {"rho_ce": None}) == {}


def test_a_declared_latency_is_kept_but_not_compared():
    assert declared_gaps({"latency_ms": 1.0}, {"latency_ms": 500.0}) == {}


def test_a_new_row_is_compared(one_more_row):
    gaps = declared_gaps({one_more_row.name: 0.9}, {one_more_row.name: 0.1})
    assert gaps[one_more_row.name]["flagged"] is True


def test_the_reproduce_client_judges_what_the_table_gives_a_tolerance(one_more_row):
    board = {
        "version": {"reproduced": None},
        "tasks": [{"task": "t-v1", one_more_row.name: 0.5}],
        "score": {"measurements": {one_more_row.name: 0.5, "latency_ms": 3.0}},
    }
    local = {"tasks": {"t-v1": {"metrics": {one_more_row.name: 0.9}}}, "aggregate": {one_more_row.name: 0.5}}
    rows = numbers_compare(board, local, DEFAULT_TOLERANCES | {one_more_row.name: 0.002})
    judged = {(r["task"], r["metric"]): r["verdict"] for r in rows}
    assert judged[("t-v1", one_more_row.name)] == "disagree"
    assert judged[("aggregate", one_more_row.name)] == "agree"
    assert ("aggregate", "latency_ms") not in judged  # no tolerance: shown, never judged


def test_the_clients_tolerances_follow_the_table(tmp_path):
    for m in METRICS:
        if m.tolerance:
            assert DEFAULT_TOLERANCES[m.name] == metric_table.DEFAULT_TOLERANCES[m.tolerance]
        else:
            assert m.name not in DEFAULT_TOLERANCES
    # the protocol's AUROC tolerance reaches every metric judged like the AUROC
    (tmp_path / "registry" / "protocols").mkdir(parents=True)
    (tmp_path / "registry" / "protocols" / "p9.yaml").write_text("id: p9\ntolerances:\n  auroc: 0.01\n")
    _, tolerances = protocol_tolerances(tmp_path, "p9")
    for m in METRICS:
        if m.tolerance == "auroc":
            assert tolerances[m.name] == 0.01, m.name


def test_the_export_columns_are_the_exported_rows(one_more_row):
    pytest.importorskip("django")
    from leaderboard.api.read.exports import export_columns

    cols = export_columns()
    assert one_more_row.name in cols
    exported = [c for c in cols if c in {m.name for m in metric_table.metrics()}]
    assert exported == list(metric_table.exported_names())
    assert [c for c in cols if c.startswith("lift_over_text")] == [
        "lift_over_text",
        "lift_over_text_ci_lo",
        "lift_over_text_ci_hi",
        # the in-domain and cross-domain means (evaluator.metrics.in_domain), in-domain first
        "lift_over_text_in_domain",
        "lift_over_text_in_domain_ci_lo",
        "lift_over_text_in_domain_ci_hi",
        "lift_over_text_cross_domain",
        "lift_over_text_cross_domain_ci_lo",
        "lift_over_text_cross_domain_ci_hi",
    ]


def test_rows_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        METRICS[0].name = "x"  # type: ignore[misc]


def test_what_the_reference_probes_declare_is_declarable():
    from evaluator.commands.reference_probes.evaluation import DECLARED

    assert set(DECLARED) <= set(metric_table.declarable_names())
