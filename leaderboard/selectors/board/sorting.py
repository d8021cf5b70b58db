"""The board's sort keys, each written twice: as an SQL expression (the board ranked in the
database, :mod:`leaderboard.selectors.board.ranked`; the columns' spread) and as a Python order
(every entry read, then searched or compared). A metric with a board column of its own
(``evaluator.metrics.metric_table``, ``column``) is a sort key, read from ``Score.measurements``
under its name; so is each ProbeScore component."""

from __future__ import annotations

from django.db.models import F, FloatField, Func
from django.db.models.expressions import CombinedExpression
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Lower

from evaluator.data.registry.weights import COMPONENTS
from evaluator.metrics import metric_table
from leaderboard.selectors.board.query import BoardQuery
from leaderboard.selectors.board.rows import BoardRow, board_details_attach

#: the orders of the category board that RankInterval stores beside the ProbeScore
RANK_ORDERS = ("borda", "delta")


def metric_sort_keys() -> tuple[str, ...]:
    """The sort keys of the metric table's board columns, in table order."""
    return tuple(m.column.key for m in metric_table.board_columns() if m.column and m.column.sortable)


def sort_keys() -> tuple[str, ...]:
    """Every ``?sort=`` the board accepts: the ProbeScore, the measured-only score, name, base
    model, each component, each metric column, and the category board's other orders."""
    return ("score", "measured", "name", "model", *COMPONENTS, *metric_sort_keys(), *RANK_ORDERS)


def component_value(name: str) -> Func:
    return Cast(KeyTextTransform("value", KeyTransform(name, "components")), FloatField())


def measurement_value(name: str) -> Func:
    """``Score.measurements[name]`` as a number (NULL where absent)."""
    return Cast(KeyTextTransform(name, "measurements"), FloatField())


def sort_expression(key: str) -> F | Func | CombinedExpression:
    """The SQL value a column sort (other than the ProbeScore) orders by, on Score rows."""
    if key == "name":
        return Lower("probe_version__probe__name")
    if key == "model":
        return F("probe_version__probe__base_model_id")
    # ranks: "descending" (the default) puts the best first, i.e. the smallest rank or delta
    if key == "borda":
        return F("rank_interval__borda_rank") * -1
    if key == "delta":
        return F("rank_interval__rank_delta") * -1
    metric = metric_table.board_column(key)
    if metric is not None:
        return measurement_value(metric.name)
    return component_value(key)


def rows_sort(rows: list[BoardRow], query: BoardQuery) -> list[BoardRow]:
    """``rows`` (in rank order) in the order the query asks; entries without a value last."""
    if query.sort == "score" and query.descending:
        return rows  # already in rank order
    if query.sort == "score":
        return list(reversed(rows))
    metric = metric_table.board_column(query.sort)
    if query.sort == "name":
        key = lambda r: r.name.casefold()  # noqa: E731
    elif query.sort == "model":
        key = lambda r: r.base_model  # noqa: E731
    elif query.sort == "measured":
        key = lambda r: r.measured_key  # noqa: E731
    elif metric is not None:  # read with the rows (rows.board_rows)
        key = lambda r: r.metrics.get(metric.name)  # noqa: E731
    elif query.sort in RANK_ORDERS:
        board_details_attach(rows)
        attr = "borda_rank" if query.sort == "borda" else "rank_delta"
        key = lambda r: None if getattr(r, attr) is None else -getattr(r, attr)  # noqa: E731
    else:
        key = lambda r: r.component_value(query.sort, measured_only=query.measured_only)  # noqa: E731
    present = [r for r in rows if key(r) is not None]
    missing = [r for r in rows if key(r) is None]  # always last, whichever the direction
    present.sort(key=key, reverse=query.descending)
    return present + missing
