"""The board's columns: which, in what order (``board_column_list``: the ProbeScore, each component,
each metric of the metric table with a column of its own, the category board's other orders), and
how their values spread over every entry (``board_columns``: a column that cannot separate the
entries is called flat, a board where most AUROCs sit at the ceiling saturated)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Aggregate, Case, Count, FloatField, Max, Min, Q, Value, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.db.models.lookups import GreaterThanOrEqual

from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.data.registry.weights import COMPONENTS
from evaluator.metrics import metric_table
from evaluator.metrics.metric_table import Metric
from leaderboard.models import Score
from leaderboard.policy import SATURATED_AUROC, saturated
from leaderboard.presentation import COLUMN_HELP, FLAT_TOLERANCE
from leaderboard.selectors.board.rows import Board
from leaderboard.selectors.board.sorting import RANK_ORDERS, metric_sort_keys, sort_expression


@dataclass(frozen=True)
class BoardColumn:
    """One sortable column of the board after the probe and its base model: ``key`` (its
    ``data-col`` and ``?sort=``), the label its explanation starts with, the header's short text,
    the component's weight under the board's spec (None: not a component), and the metric it shows
    when it is a metric's own column."""

    key: str
    label: str
    short: str
    weight: float | None = None
    metric: Metric | None = None


def board_column_list(board: Board) -> list[BoardColumn]:
    """The board's value columns in order: the ProbeScore (the measured-only score when the board
    ranks by it), the components, the metric table's board columns, the other orders."""
    score = "measured" if board.query.measured_only else "score"
    columns = [BoardColumn(score, COLUMN_HELP[score]["label"], COLUMN_HELP[score]["short"])]
    columns += [BoardColumn(c["name"], c["label"], c["short"], c["weight"]) for c in board.components]
    columns += [
        BoardColumn(m.column.key, m.label, m.column.short, metric=m)
        for m in metric_table.board_columns()
        if m.column
    ]
    columns += [BoardColumn(key, COLUMN_HELP[key]["label"], COLUMN_HELP[key]["short"]) for key in RANK_ORDERS]
    return columns


def flat_column_keys() -> tuple[str, ...]:
    """The board's value columns whose spread :func:`board_columns` reads (the rank and the
    ProbeScore always separate the entries they rank)."""
    return (*COMPONENTS, *metric_sort_keys())


@dataclass
class BoardColumns:
    """What the board's value columns look like over every entry (one query): each column's lowest
    and highest value and how many entries have one, the columns that cannot separate the entries
    (``flat``: every value equal within the three decimals shown, ``{key: {"value", "n",
    "imputed"}}``), and the entries' AUROCs when most of them are at the ceiling (``saturated``:
    (entries at or above SATURATED_AUROC, entries), else None)."""

    spread: dict[str, dict] = field(default_factory=dict)
    flat: dict[str, dict] = field(default_factory=dict)
    saturated: tuple[int, int] | None = None

    def separating_first(self, keys: list[str]) -> list[str]:
        """``keys`` ordered by how much their entries spread (widest first; a column with no
        spread known keeps its place after them)."""
        width = {k: self.spread[k]["hi"] - self.spread[k]["lo"] for k in keys if k in self.spread}
        return sorted(keys, key=lambda k: -width.get(k, -1.0))


def board_columns(board: Board) -> BoardColumns:
    """:class:`BoardColumns` of ``board``, read over every entry of the board (not only the page
    shown); a column needs at least two values to be called flat. AUROC-EA on the eval-awareness
    board is n/a (not a value) and left out."""
    ids = [r.score_id for r in board.rows]
    if len(ids) < 2:
        return BoardColumns()
    keys = [k for k in flat_column_keys() if not (k == "auroc_ea" and board.query.category == EVAL_AWARENESS)]
    aggregates: dict[str, Aggregate] = {}
    for k in keys:
        expression = sort_expression(k)
        aggregates |= {f"{k}__lo": Min(expression), f"{k}__hi": Max(expression), f"{k}__n": Count(expression)}
        if k in COMPONENTS:
            aggregates[f"{k}__imputed"] = Count("pk", filter=Q(**{f"components__{k}__imputed": True}))
    auroc = Cast(KeyTextTransform("auroc", "measurements"), FloatField())
    aggregates["auroc__n"] = Count(auroc)
    aggregates["auroc__high"] = Count(Case(When(GreaterThanOrEqual(auroc, SATURATED_AUROC), then=Value(1))))
    found = Score.objects.filter(pk__in=ids).aggregate(**aggregates)
    out = BoardColumns()
    for k in keys:
        lo, hi, n = found[f"{k}__lo"], found[f"{k}__hi"], found[f"{k}__n"]
        if n >= 2:
            out.spread[k] = {"lo": lo, "hi": hi, "n": n}
            if hi - lo < FLAT_TOLERANCE:
                out.flat[k] = {"value": (lo + hi) / 2, "n": n, "imputed": found.get(f"{k}__imputed", 0)}
    n, high = found["auroc__n"], found["auroc__high"]
    if saturated(high, n):
        out.saturated = (high, n)
    return out
