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
from leaderboard.axes import PRIMARY_KINDS
from leaderboard.models import EvaluationRun, Score
from leaderboard.policy import SATURATED_AUROC, saturated
from leaderboard.presentation import COLUMN_HELP, FLAT_TOLERANCE
from leaderboard.selectors.board.rows import Board
from leaderboard.selectors.board.sorting import RANK_ORDERS, metric_sort_keys, sort_expression
from leaderboard.selectors.progress import axis_of_column


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

    @property
    def scored(self) -> bool:
        """Whether it counts in the ProbeScore: a component with a weight under the board's spec."""
        return bool(self.weight)


def board_column_list(board: Board) -> list[BoardColumn]:
    """The board's value columns in order: the ProbeScore (the measured-only score when the board
    ranks by it); the components the board's spec weighs, heaviest first (a tie keeps the
    components' order); then what is shown but not scored: a component the spec gives no weight,
    the metric table's board columns, the other orders."""
    score = "measured" if board.query.measured_only else "score"
    columns = [BoardColumn(score, COLUMN_HELP[score]["label"], COLUMN_HELP[score]["short"])]
    components = [BoardColumn(c["name"], c["label"], c["short"], c["weight"]) for c in board.components]
    columns += sorted((c for c in components if c.scored), key=lambda c: -(c.weight or 0.0))
    columns += [c for c in components if not c.scored]
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
    "imputed", "pending"}}``: how many of the values are imputed, how many entries still have runs
    of the column's axis queued or running), and the entries' AUROCs when most of them are at the
    ceiling (``saturated``: (entries at or above SATURATED_AUROC, entries), else None)."""

    spread: dict[str, dict] = field(default_factory=dict)
    flat: dict[str, dict] = field(default_factory=dict)
    saturated: tuple[int, int] | None = None

    def separating_first(self, keys: list[str]) -> list[str]:
        """``keys`` ordered by how much their entries spread (widest first; a column with no
        spread known keeps its place after them)."""
        width = {k: self.spread[k]["hi"] - self.spread[k]["lo"] for k in keys if k in self.spread}
        return sorted(keys, key=lambda k: -width.get(k, -1.0))

    def separating_first_scored_first(self, columns: list[BoardColumn]) -> list[BoardColumn]:
        """``columns`` (the value columns after the score) on a saturated board: the scored
        components first, then what is shown but not scored, each group ordered by how much its
        columns spread (:meth:`separating_first`)."""
        by_key = {c.key: c for c in columns}
        groups = ([c.key for c in columns if c.scored], [c.key for c in columns if not c.scored])
        return [by_key[k] for group in groups for k in self.separating_first(group)]


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
    for k, pending in _entries_pending(ids, list(out.flat)).items():
        out.flat[k]["pending"] = pending
    n, high = found["auroc__n"], found["auroc__high"]
    if saturated(high, n):
        out.saturated = (high, n)
    return out


def _entries_pending(score_ids: list[int], keys: list[str]) -> dict[str, int]:
    """For each of ``keys`` filled by an axis whose runs come after the board's (a secondary
    axis: transfer, stress, steer, robustness), how many of the entries still have runs of it
    queued or running (one query, none when no such key is asked for)."""
    by_axis = {k: axis for k in keys if (axis := axis_of_column(k)) is not None and axis not in PRIMARY_KINDS}
    if not by_axis:
        return {}
    rows = (
        EvaluationRun.objects.filter(
            cycle=None,
            kind__in=set(by_axis.values()),
            status__in=[EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING],
            probe_version__in=Score.objects.filter(pk__in=score_ids).values("probe_version"),
        )
        .values("kind")
        .annotate(entries=Count("probe_version", distinct=True))
        .order_by()
    )
    entries = {r["kind"]: r["entries"] for r in rows}
    return {k: entries.get(axis, 0) for k, axis in by_axis.items()}
