"""The submission check, the methodology page and the board read the metric table
(evaluator/metrics/metric_table.py): a declarable metric is accepted, a row added to the table is
accepted and listed without another edit, and a row with a board column is a board column (header,
tooltip, cells, sort key), an API field with its help text, a CSV column and a compare row without
another edit; no template or selector writes a metric's label or definition a second time."""

from __future__ import annotations

import csv
import html as htmllib
import io
import re
from pathlib import Path

import pytest

from evaluator.metrics import metric_table
from evaluator.metrics.metric_table import METRICS, Column, Metric
from leaderboard.errors import ValidationFailed
from leaderboard.validation import metadata_validate

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


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
        "trained_on": ["cities-truth-v1"],
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


# --------------------------------------------------------------------------- the board reads it too

#: a metric added as one row, with a board column of its own, exported and compared side by side
NEW_COLUMN = Metric(
    "fnr_at_5pct",
    "FNR@5%",
    "the share of the test positives below the threshold fixed at 5% FPR on the train negatives",
    0.0,
    1.0,
    False,
    per_task=False,
    exported=True,
    compare=True,
    column=Column(
        "fnr",
        "FNR@5%",
        unit="none (a fraction of the test positives)",
        interval="none",
        zero="0: no positive missed",
        top="1: every positive missed",
        na="not measured on this probe",
    ),
)


@pytest.fixture
def new_column_board(registry, monkeypatch):
    """Three probes, two of them measured on the new metric; the metric table has one more row."""
    from tests.leaderboard.board_data import ensure_models, ensure_tasks, public_probe

    monkeypatch.setattr(metric_table, "METRICS", (*METRICS, NEW_COLUMN))
    ensure_models()
    tasks = ensure_tasks("hallucination", 1)
    for slug, auroc, fnr in (("high", 0.9, 0.40), ("low", 0.8, 0.10), ("none", 0.7, None)):
        extra = {NEW_COLUMN.name: fnr} if fnr is not None else {}
        public_probe(slug=slug, auroc=auroc, tasks=tasks, extra_measurements=extra)
    return NEW_COLUMN


def test_a_row_added_to_the_table_is_a_board_column_with_its_tooltip_cells_and_sort(client, new_column_board):
    m = new_column_board
    page = client.get("/category/hallucination/").content.decode()
    header = re.search(r'<th [^>]*data-col="fnr"[^>]*>', page)
    assert header, "the board has no column for the new row"
    title = htmllib.unescape(re.search(r'title="([^"]*)"', header.group(0)).group(1))
    assert title.startswith(f"{m.label}: {m.definition}. Unit: {m.column.unit}. Range: [0, 1].")
    assert '<td class="num fnr" title="FNR@5%">0.400</td>' in page
    assert '<td class="num fnr na"><abbr title="not measured on this probe">n/a</abbr></td>' in page
    # a sort key, in the database (the page a page at a time) and in Python (a search)
    for params in ({"sort": "fnr"}, {"sort": "fnr", "q": "o"}):
        sorted_page = client.get("/category/hallucination/", params).content.decode()
        order = re.findall(r'name="p" value="([a-z]+)"', sorted_page)
        assert order == ["high", "low", "none"] if "q" not in params else ["low", "none"], (params, order)
    methodology = htmllib.unescape(client.get("/methodology/").content.decode())
    assert 'id="col-fnr"' in methodology and m.column.zero in methodology


def test_a_row_added_to_the_table_is_an_api_field_with_its_help_text_and_a_csv_column(
    client, new_column_board
):
    m = new_column_board
    rows = client.get("/api/v1/leaderboard", {"category": "hallucination", "sort": "fnr"}).json()["results"]
    assert [(r["probe"], r[m.name]) for r in rows] == [("high", 0.4), ("low", 0.1), ("none", None)]
    schema = client.get("/api/schema/", {"format": "json"}).json()
    field = schema["components"]["schemas"]["LeaderboardRowOutput"]["properties"][m.name]
    assert field["type"] == "number" and field["nullable"] is True
    assert m.label in field["description"] and m.definition in field["description"]
    csv_rows = list(csv.DictReader(io.StringIO(client.get("/api/v1/leaderboard.csv").content.decode())))
    assert {r["probe"]: r[m.name] for r in csv_rows} == {"high": "0.4", "low": "0.1", "none": ""}


def test_a_row_added_to_the_table_is_a_row_of_the_compare_page_and_api(client, new_column_board):
    m = new_column_board
    page = client.get("/compare/", {"a": "high", "b": "low"}).content.decode()
    overall = page[
        page.index('id="compare-overall"') : page.index("</table>", page.index('id="compare-overall"'))
    ]
    row = re.search(
        rf'<th scope="row" title="{re.escape(m.definition)}">{re.escape(m.label)}</th>(.*?)</tr>', overall
    )
    assert row and re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1)) == ["0.400", "0.100"]
    sides = client.get("/api/v1/compare", {"a": "high", "b": "low"}).json()
    assert (sides["a"]["measurements"][m.name], sides["b"]["measurements"][m.name]) == (0.4, 0.1)


def _table_readers() -> list[Path]:
    """The templates and the selectors: where a metric's words would be written a second time."""
    return sorted(
        [
            *(ROOT / "leaderboard" / "templates").rglob("*.html"),
            *(ROOT / "leaderboard" / "selectors").rglob("*.py"),
        ]
    )


def test_no_metric_label_or_definition_is_written_in_a_template_or_a_selector():
    """Each label and definition is written once, in the metric table: a template or a selector
    that shows one reads it from the row (``{% metric_label %}``, ``metric_table.metric(name)``)."""
    found = []
    for path in _table_readers():
        text = path.read_text(encoding="utf-8")
        for m in METRICS:
            if m.definition in text:
                found.append(f"{path.relative_to(ROOT)}: the definition of {m.name}")
            # a label as an element's text, or as a string of its own
            for written in (f">{m.label}<", f'"{m.label}"', f"'{m.label}'"):
                if written in text:
                    found.append(f"{path.relative_to(ROOT)}: {written}")
    assert not found, found
