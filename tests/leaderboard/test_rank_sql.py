"""The board is ranked in the database by one ranker (a window function over the norm-2 key,
LIMIT the page): the same entries, ranks and order as norm 2 computed in Python
(``evaluator.metrics.scoring.ranking_key``), with only the page's rows fetched."""

from __future__ import annotations

import math

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evaluator.data.registry.weights import COMPONENTS
from evaluator.metrics.scoring import ranking_key
from leaderboard import models as m
from leaderboard.selectors.board.get import board_get
from leaderboard.selectors.board.query import BoardQuery, resolve_spec, weights_spec_list
from leaderboard.selectors.board.ranked import RankedRows
from leaderboard.selectors.board.rows import BoardRow, board_rows
from leaderboard.selectors.board.sorting import rows_sort
from tests.leaderboard.board_data import MODEL_B, ensure_models, ensure_tasks, public_probe

pytestmark = pytest.mark.django_db


@pytest.fixture
def board(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 1)
    specs = dict(
        a=dict(auroc=0.91, latency_ms=50.0),
        b=dict(auroc=0.85, license="MIT"),
        c=dict(auroc=0.85, license="closed"),  # same numbers as b, a closed license: norm 2 tie
        d=dict(auroc=0.7, latency_ms=1.0, base_model=MODEL_B),
        e=dict(auroc=0.95, auroc_ds=0.9),
        f=dict(auroc=0.6, rho_ce=0.9, base_model=MODEL_B),
    )
    for slug, kw in specs.items():
        public_probe(slug=f"p-{slug}", tasks=tasks, **kw)
    # a probe with a newer scored version: only the newest is an entry
    old = m.Probe.objects.get(slug="p-f")
    public_probe(slug="p-f", probe=old, number=2, auroc=0.93, tasks=tasks, base_model=MODEL_B)
    m.Probe.objects.filter(slug="p-d").update(status=m.Probe.Status.DEPRECATED)


def python_key(row: BoardRow, *, measured_only: bool) -> tuple[float, float]:
    """Norm 2 in Python, on the total or on the measured-only total."""
    if not measured_only:
        return ranking_key(row.total, row.license_contribution)
    weight = sum(
        row.weights.get(name, 0.0)
        for name, value, imputed in zip(COMPONENTS, row.values, row.imputed, strict=True)
        if value is not None and not imputed
    )
    if row.measured_total is None or weight <= 0:
        return (-math.inf, -math.inf)
    return ranking_key(row.measured_total, row.license_contribution / weight)


def python_rank(rows: list[BoardRow], *, measured_only: bool = False) -> list[BoardRow]:
    """The reference ranking: active entries by norm 2 computed in Python (ties by slug), then the
    deprecated ones, unranked."""
    rows = sorted(rows, key=lambda r: r.probe)
    rows.sort(key=lambda r: python_key(r, measured_only=measured_only), reverse=True)
    active = [r for r in rows if not r.deprecated]
    for i, row in enumerate(active, 1):
        row.rank = i
    deprecated = [r for r in rows if r.deprecated]
    for row in deprecated:
        row.rank = None
    return active + deprecated


def python_board(query: BoardQuery):
    """The reference: every entry read and ranked in Python, sorted as the board sorts."""
    spec = resolve_spec(weights_spec_list(), query.spec, param="spec")
    values = query.sort not in ("score", "name", "model", "recall")
    return rows_sort(python_rank(board_rows(spec=spec, query=query, values=values)), query)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"direction": "asc"},
        {"sort": "latency"},
        {"sort": "auroc", "direction": "asc"},
        {"sort": "name"},
        {"sort": "model", "direction": "desc"},
        {"model": MODEL_B},
        {"status": "deprecated"},
        {"status": "active", "license": "MIT"},
    ],
)
def test_the_database_ranks_as_python_does(board, params):
    query = BoardQuery(category="hallucination", **params)
    got = board_get(query=query)
    assert isinstance(got.rows, RankedRows)
    expected = python_board(query)
    assert [(r.probe, r.version, r.rank) for r in got.rows] == [
        (r.probe, r.version, r.rank) for r in expected
    ]
    assert got.ranked_count == len(expected)
    # any page is the same slice of it
    assert [(r.probe, r.rank) for r in got.rows[2:5]] == [(r.probe, r.rank) for r in expected[2:5]]


def test_license_only_breaks_a_tie_and_deprecated_entries_follow_unranked(board):
    rows = list(board_get(query=BoardQuery(category="hallucination")).rows)
    order = [r.probe for r in rows]
    assert order.index("p-b") + 1 == order.index("p-c")  # equal norm-2 keys: the slug decides
    assert rows[-1].probe == "p-d" and rows[-1].rank is None
    assert [r.rank for r in rows[:-1]] == list(range(1, len(rows)))
    assert [r.version for r in rows if r.probe == "p-f"] == [2]


def test_a_page_fetches_only_its_rows(board):
    ranked = board_get(query=BoardQuery(category="hallucination")).rows
    len(ranked)
    with CaptureQueriesContext(connection) as ctx:
        page = ranked[1:3]
    assert [r.rank for r in page] == [2, 3]
    (sql,) = [q["sql"] for q in ctx.captured_queries]
    assert "ROW_NUMBER() OVER" in sql.upper() and "LIMIT 2" in sql.upper()


def test_the_measured_only_ranking_is_norm_2_on_the_measured_total(board):
    query = BoardQuery(category="hallucination", measured_only=True)
    got = board_get(query=query).rows
    spec = resolve_spec(weights_spec_list(), None, param="spec")
    expected = python_rank(
        board_rows(spec=spec, query=BoardQuery(category="hallucination"), values=True), measured_only=True
    )
    assert [(r.probe, r.rank) for r in got] == [(r.probe, r.rank) for r in expected]
    # the key the database ranked on is the one Python computes, exactly
    by_slug = {r.probe: r for r in expected}
    assert [r.measured_key for r in got] == [python_key(by_slug[r.probe], measured_only=True)[0] for r in got]


def test_search_measured_only_and_spec_comparison_read_every_entry(board):
    for query in (
        BoardQuery(category="hallucination", q="p-a"),
        BoardQuery(category="hallucination", measured_only=True),
    ):
        assert isinstance(board_get(query=query).rows, list)


def test_the_count_cache_key_is_a_hash_of_the_filters(board, recwarn):
    """The filters reach the count cache's key; they are user input (control and astral-plane
    characters, any length), so the key is a short hash: no CacheKeyWarning from the backend."""
    from django.core.cache.backends.base import CacheKeyWarning

    garbage = "!\x0b\r\u00ea\x02\U000101a4\n" + "x" * 300
    got = board_get(query=BoardQuery(category="hallucination", license=garbage))
    assert got.ranked_count == 0
    assert not [w for w in recwarn if issubclass(w.category, CacheKeyWarning)]


def test_every_board_path_filters_the_latest_version(board):
    """A filter on a version's field (the license) applies to each probe's latest public version on
    every path: a probe whose latest version has another license is not on the board, whether the
    board is read a page at a time or whole (a search, a spec comparison)."""
    # p-f: v1 under Apache-2.0 (the fixture's default), v2 (the latest) under another license
    assert m.ProbeVersion.objects.get(probe__slug="p-f", number=2).license_id == "Apache-2.0"
    m.ProbeVersion.objects.filter(probe__slug="p-f", number=2).update(license_id="MIT")
    for extra in ({}, {"q": "p-"}, {"measured_only": True}):
        rows = list(board_get(query=BoardQuery(category="hallucination", license="Apache-2.0", **extra)).rows)
        assert "p-f" not in [r.probe for r in rows], extra
        rows = list(board_get(query=BoardQuery(category="hallucination", license="MIT", **extra)).rows)
        assert [(r.probe, r.version) for r in rows if r.probe == "p-f"] == [("p-f", 2)], extra
