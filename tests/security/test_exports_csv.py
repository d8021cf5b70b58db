"""The CSV export neutralises spreadsheet formulas: a text cell starting with = + - @ (or a tab or
a carriage return) is written with a leading single quote; numbers stay numbers."""

import csv
import io

import pytest

from tests.leaderboard.board_data import ensure_models, ensure_tasks, public_probe

pytestmark = pytest.mark.django_db

FORMULAS = ['=HYPERLINK("http://evil.example","x")', "+SUM(1,2)", "-2+3", "@SUM(A1)", "\t=1+1", "\r=1+1"]


@pytest.fixture
def hostile_board(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 1)
    for i, text in enumerate(FORMULAS):
        public_probe(
            slug=f"hostile-{i}", name=text, auroc=0.9 - i / 100, tasks=tasks, authors=[text, "Plain Name"]
        )
    public_probe(slug="plain", name="Plain probe", auroc=0.5, tasks=tasks)


def test_formula_cells_are_exported_as_text(client, hostile_board):
    response = client.get("/api/v1/leaderboard.csv", {"category": "hallucination"})
    assert response.status_code == 200
    rows = {row["probe"]: row for row in csv.DictReader(io.StringIO(response.content.decode(), newline=""))}
    for i, text in enumerate(FORMULAS):
        row = rows[f"hostile-{i}"]
        assert row["name"] == "'" + text
        assert row["authors"] == f"'{text}; Plain Name"
    assert rows["plain"]["name"] == "Plain probe"
    # no cell of the file starts a formula
    for row in rows.values():
        for column, value in row.items():
            assert not value.startswith(("=", "+", "@", "\t", "\r")), (column, value)
            if value.startswith("-"):  # only numbers may start with a minus sign
                float(value)


def test_numbers_stay_numbers(client, hostile_board):
    response = client.get("/api/v1/leaderboard.csv", {"category": "hallucination"})
    row = next(
        r for r in csv.DictReader(io.StringIO(response.content.decode(), newline="")) if r["probe"] == "plain"
    )
    assert float(row["total"]) > 0 and float(row["auroc_value"]) == pytest.approx(0.5)
