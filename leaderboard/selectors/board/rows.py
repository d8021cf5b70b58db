"""A board's rows: ``BoardRow`` built by field name from the Score and its probe version (one
query for every entry), and what the shown rows display beyond the ranking (``board_details_attach``:
components, measurements, the metric table's exported metrics, intervals, authors)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Exists, F, Func, OuterRef, TextField, Value
from django.db.models.fields.json import KeyTextTransform, KeyTransform

from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.data.registry.weights import COMPONENTS
from evaluator.metrics import metric_table
from leaderboard.models import Category, LeakageRecord, Score, Task, WeightsSpec, measured_ranking_annotations
from leaderboard.policy import STABILITY_MIN_QUARTERS
from leaderboard.presentation import COMPONENT_LABELS, COMPONENT_SHORT
from leaderboard.selectors.board.query import BoardQuery, board_entries

_INDEX = {name: i for i, name in enumerate(COMPONENTS)}


@dataclass(slots=True)
class BoardRow:
    """One probe on the board: its latest scored version under one weights spec.

    ``values`` / ``imputed`` hold every component's value and imputed flag (in COMPONENTS order)
    when the query needed them to sort or rank (else None / False). ``components`` (value, weight,
    contribution, imputed, raw, note), ``measurements`` and ``metrics`` are filled by
    :func:`board_details_attach` for the rows that are shown.
    """

    probe: str
    version: int
    license: str
    reproduced: bool | None
    name: str
    category: str
    base_model: str
    base_model_name: str
    is_reference: bool
    deprecated_reason: str
    stability_quarters: int
    deprecated: bool
    leakage: bool
    score_id: int
    total: float
    measured_total: float | None
    values: tuple
    imputed: tuple
    license_contribution: float
    weights: dict
    authors: list[str] = field(default_factory=list)
    declared_gaps: dict = field(default_factory=dict)
    components: dict = field(default_factory=dict)
    measurements: dict = field(default_factory=dict)
    #: the metric table's exported metrics by name (mean over tasks; None: not measured), and the
    #: 95% interval of those that have one; the board's sort metric is read for every row
    metrics: dict[str, float | None] = field(default_factory=dict)
    metric_cis: dict[str, list[float] | None] = field(default_factory=dict)
    auroc_ci: list[float] | None = None
    auroc_ci_kind: str = ""  # "bootstrap" | "per-task" (one task) | "mean-of-tasks" (mean of the bounds) | ""
    computed_at: datetime | None = None
    rank: int | None = None
    compare_rank: int | None = None
    compare_total: float | None = None
    #: the category board's Borda rank across its tasks, and rank on the latest quarterly holdout
    #: minus rank on test (RankInterval; None: not computed / not measured in that cycle)
    borda_rank: int | None = None
    rank_delta: int | None = None
    rank_delta_quarter: str = ""
    #: the stored bootstrap intervals (RankInterval): rank_lo, rank_hi, score_lo, score_hi,
    #: tied_for_first, tie_group — only when they describe this row's rank (see board_details_attach)
    rank_interval: dict | None = None
    #: the axes still being measured (selectors.progress.board_pending_attach, shown rows only)
    pending_axes: list = field(default_factory=list)
    #: norm 2 on the measured-only total (models.measured_ranking_annotations); read when the
    #: board ranks or sorts by it
    measured_key: float | None = None

    @property
    def stable(self) -> bool:
        return self.stability_quarters >= STABILITY_MIN_QUARTERS

    @property
    def ea_not_applicable(self) -> bool:
        return self.category == EVAL_AWARENESS

    @property
    def declared_mismatch(self) -> dict:
        """The declared metrics whose gap to the measured one is flagged (over the threshold)."""
        return {
            k: g
            for k, g in (self.declared_gaps or {}).items()
            if isinstance(g, dict) and g.get("flagged", True)
        }

    @property
    def rank_change(self) -> int | None:
        """Places gained against the compared spec (positive: ranks higher under this spec)."""
        if self.rank is None or self.compare_rank is None:
            return None
        return self.compare_rank - self.rank

    @property
    def auroc(self) -> float | None:
        return self.values[_INDEX["auroc"]]

    def component_value(self, name: str, *, measured_only: bool = False) -> float | None:
        i = _INDEX[name]
        if measured_only and self.imputed[i]:
            return None
        return self.values[i]


@dataclass
class Board:
    spec: WeightsSpec
    specs: list[WeightsSpec]
    compare: WeightsSpec | None
    query: BoardQuery
    category: Category | None
    rows: Sequence[BoardRow]  # a list, or RankedRows (ranked in the database, read by the page)
    #: entries before the text search (the search finds, it does not re-rank)
    ranked_count: int

    @property
    def components(self) -> list[dict]:
        return [
            {
                "name": name,
                "label": COMPONENT_LABELS[name],
                "short": COMPONENT_SHORT[name],
                "weight": self.spec.weights.get(name),
            }
            for name in COMPONENTS
        ]


#: BoardRow field → the Score path it is read from: a board row is built by name
_ROW_PATHS = {
    "probe": "probe_version__probe__slug",
    "version": "probe_version__number",
    "license": "probe_version__license_id",
    "reproduced": "probe_version__reproduced",
    "name": "probe_version__probe__name",
    "category": "probe_version__probe__category_id",
    "base_model": "probe_version__probe__base_model_id",
    "base_model_name": "probe_version__probe__base_model__name",
    "is_reference": "probe_version__probe__is_reference",
    "deprecated_reason": "probe_version__probe__deprecated_reason",
    "stability_quarters": "probe_version__probe__stability_quarters",
    "deprecated": "is_deprecated",
    "leakage": "leakage",
    "score_id": "pk",
    "total": "total",
    "measured_total": "measured_total",
}


#: what the ranking and the column sorts need from Score.components, for every row
_COMPONENT_PATHS = (
    [(name, "value") for name in COMPONENTS]
    + [(name, "imputed") for name in COMPONENTS]
    + [("license", "contribution")]
)

#: the ranking's annotations a board row keeps (models.ScoreQuerySet.ranked)
_RANK_COLUMNS = {"board_rank", "measured_key"}


def parse_ci(raw) -> list[float] | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if isinstance(raw, (list, tuple)) and len(raw) == 2 and all(isinstance(x, (int, float)) for x in raw):
        return [float(raw[0]), float(raw[1])]
    return None


def _number(raw) -> float | None:
    """A stored metric as a number: a JSON number (not a flag), else None (absent, null, text)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    return float(raw)


def _auroc_interval(measurements: dict, task_cis: list) -> tuple[list[float] | None, str]:
    """The interval shown next to AUROC: the stored bootstrap interval of the mean when the
    pipeline recorded one, else the mean of the per-task 95% bounds (conservative: at least as
    wide as the interval of the mean)."""
    direct = parse_ci(measurements.get("auroc_ci"))
    if direct:
        return direct, "bootstrap"
    cis = [ci for ci in (parse_ci(raw) for raw in task_cis) if ci]
    if not cis:
        return None, ""
    if len(cis) == 1:
        return cis[0], "per-task"
    return [sum(c[0] for c in cis) / len(cis), sum(c[1] for c in cis) / len(cis)], "mean-of-tasks"


class JsonPaths(Func):
    """JSON text of ``[column[path] for path in paths]``, parsing the column's document once a row.

    ``Score.per_task`` holds ROC points and reliability bins for every task, tens of kilobytes a
    row; one key transform per value would make SQLite parse the document once per value.
    """

    output_field = TextField()

    def __init__(self, column: str, paths: Sequence[tuple[str, ...]], *, large: bool = False):
        self.paths = [tuple(p) for p in paths]
        self.large = large  # PostgreSQL: the document is big enough to be stored compressed
        super().__init__(F(column))

    def as_sqlite(self, compiler, connection, **extra):
        column, params = compiler.compile(self.source_expressions[0])
        paths = ["$" + "".join(f".{json.dumps(key)}" for key in path) for path in self.paths]
        if len(paths) == 1:  # with one path JSON_EXTRACT returns the value, not a list of values
            paths.append(paths[0])
        return f"JSON_EXTRACT({column}, {', '.join(['%s'] * len(paths))})", (*params, *paths)

    def as_sql(
        self, compiler, connection, function=None, template=None, arg_joiner=None, **extra
    ):  # PostgreSQL
        column, params = compiler.compile(self.source_expressions[0])
        paths = [list(p) for p in self.paths]
        if not self.large:
            lookups = ", ".join([f"({column}) #> %s::text[]"] * len(paths))
            return f"jsonb_build_array({lookups})::text", tuple(x for p in paths for x in (*params, p))
        # A large jsonb value is stored compressed out of line (TOAST); ``|| '{}'`` materializes it
        # once in the subquery, so that each path lookup does not decompress it again.
        lookups = ", ".join(["_doc.d #> %s::text[]"] * len(paths))
        sql = (
            f"(SELECT jsonb_build_array({lookups})::text "
            f"FROM (SELECT ({column}) || '{{}}'::jsonb AS d OFFSET 0) AS _doc)"
        )
        return sql, (*paths, *params)


def json_list(raw, n: int) -> list:
    values = json.loads(raw) if isinstance(raw, str) else (raw or [])
    return list(values[:n]) + [None] * (n - len(values))


def board_values(qs, *, values: bool, metric: str | None) -> list[dict]:
    """The named columns of a board row (:data:`_ROW_PATHS`) and what its ranking and sorts read
    from the Score's JSON: only the license contribution, unless ``values`` asks for every
    component's value and imputed flag; the measurement ``metric`` (a metric table name: the one
    the board sorts by) when one is named."""
    leakage = LeakageRecord.objects.filter(
        probe_id=OuterRef("probe_version__probe_id"), status=LeakageRecord.Status.CONFIRMED
    )
    qs = qs.annotate(
        leakage=Exists(leakage),
        metric_value=KeyTextTransform(metric, "measurements")
        if metric
        else Value(None, output_field=TextField()),
        score_numbers=JsonPaths("components", _COMPONENT_PATHS)
        if values
        else KeyTextTransform("contribution", KeyTransform("license", "components")),
    )
    return qs.values(
        *_ROW_PATHS.values(), "metric_value", "score_numbers", *qs.query.annotations.keys() & _RANK_COLUMNS
    )


def board_row(found: dict, *, weights: dict, values: bool, metric: str | None) -> BoardRow:
    """One :class:`BoardRow` from :func:`board_values`' columns (``metric``: the one it read)."""
    n = len(COMPONENTS)
    if values:
        numbers = json_list(found["score_numbers"], 2 * n + 1)
        component_values, imputed = tuple(numbers[:n]), tuple(map(bool, numbers[n : 2 * n]))
        license_contribution = numbers[2 * n]
    else:
        component_values, imputed = (None,) * n, (False,) * n
        license_contribution = found["score_numbers"]
    row = BoardRow(
        **{name: found[path] for name, path in _ROW_PATHS.items()},
        values=component_values,
        imputed=imputed,
        license_contribution=float(license_contribution or 0.0),
        weights=weights,
        measured_key=found.get("measured_key"),
    )
    row.deprecated = bool(row.deprecated)
    if metric and found["metric_value"] not in (None, "null"):
        with suppress(ValueError):  # stored as text: not a number, shown as not measured
            row.metrics[metric] = float(found["metric_value"])
    if not row.deprecated and found.get("board_rank") is not None:
        row.rank = found["board_rank"]
    return row


def sort_metric(sort: str) -> str | None:
    """The metric a board sort key orders by when it is a metric's own column (read with the rows)."""
    found = metric_table.board_column(sort)
    return found.name if found is not None else None


def board_rows(
    *, spec: WeightsSpec, query: BoardQuery, slugs: list[str] | None = None, values: bool = False
) -> list[BoardRow]:
    """Every entry of the board, ranked (one query): the active entries in rank order, numbered
    by the board's ranker (``models.ScoreQuerySet.ranked``, on the measured-only total when the
    query asks), then the deprecated ones, greyed and unranked.

    Only the numbers the ranking needs leave the database (with ``values``, or when the query sorts
    by a component or ranks by measured components, every component's value and imputed flag; the
    metric the query sorts by); the rows shown get their full components from
    :func:`board_details_attach`: decoding every row's JSON would dominate the page.
    """
    values = values or query.measured_only or query.sort in (*COMPONENTS, "measured")
    measured = query.measured_only or query.sort == "measured"
    qs = board_entries(spec=spec, query=query, slugs=slugs).ranked(
        weights=spec.weights, measured_only=query.measured_only
    )
    if measured and not query.measured_only:
        qs = qs.annotate(**measured_ranking_annotations(spec.weights))
    qs = qs.order_by("is_deprecated", "board_rank")
    metric = sort_metric(query.sort)
    found = board_values(qs, values=values, metric=metric)
    return [board_row(f, weights=spec.weights, values=values, metric=metric) for f in found]


def board_authors_attach(rows: list[BoardRow]) -> None:
    """Authors and declared-vs-measured gaps of ``rows`` (one query)."""
    by_id = {r.score_id: r for r in rows}
    found = Score.objects.filter(pk__in=list(by_id)).values_list(
        "pk", "probe_version__authors", "probe_version__declared_gaps"
    )
    for pk, authors, gaps in found:
        by_id[pk].authors = authors or []
        by_id[pk].declared_gaps = gaps or {}


#: RankInterval's other orders of the category board (evaluator.metrics.ranks)
_ORDER_FIELDS = ("borda_rank", "rank_delta", "rank_delta_quarter")
_INTERVAL_FIELDS = (
    "rank",
    "rank_lo",
    "rank_hi",
    "score_lo",
    "score_hi",
    "tied_for_first",
    "tie_group",
    "n_entries",
    "computed_at",
)


def metrics_attach(row: BoardRow) -> None:
    """The metric table's exported metrics of ``row``, read from its measurements: each one stored
    as a number, and the 95% interval beside it (``<name>_ci``) for those that have one."""
    for m in metric_table.metrics():
        if not m.exported:
            continue
        value = row.metrics[m.name] = _number(row.measurements.get(m.name))
        if m.interval:
            row.metric_cis[m.name] = (
                parse_ci(row.measurements.get(f"{m.name}_ci")) if value is not None else None
            )


def board_details_attach(rows: Iterable[BoardRow]) -> None:
    """Everything the shown rows display beyond the ranking: full components, measurements (and
    the exported metrics read from them), authors, declared gaps and the AUROC interval (at most
    three queries)."""
    rows = [r for r in rows if r.computed_at is None]
    if not rows:
        return
    by_id = {r.score_id: r for r in rows}
    found = Score.objects.filter(pk__in=list(by_id)).values_list(
        "pk",
        "components",
        "measurements",
        "computed_at",
        "probe_version__authors",
        "probe_version__declared_gaps",
        *(f"rank_interval__{f}" for f in _ORDER_FIELDS),
        *(f"rank_interval__{f}" for f in _INTERVAL_FIELDS),
    )
    for pk, components, measurements, computed_at, authors, gaps, *stored_orders in found:
        row = by_id[pk]
        orders, interval = stored_orders[: len(_ORDER_FIELDS)], stored_orders[len(_ORDER_FIELDS) :]
        # the category board's other orders: the same whatever this view filters or sorts by
        row.borda_rank, row.rank_delta, row.rank_delta_quarter = orders
        row.rank_delta_quarter = row.rank_delta_quarter or ""
        # the stored interval describes this row only when it ranks the same board: the same rank
        # (not a filtered or measured-only view, nor a board that changed since it was computed)
        stored = dict(zip(_INTERVAL_FIELDS, interval, strict=True))
        if stored["rank"] is not None and stored["rank"] == row.rank and stored["computed_at"] >= computed_at:
            row.rank_interval = stored
        row.components = components or {}
        row.measurements = measurements or {}
        row.computed_at = computed_at
        row.authors = authors or []
        row.declared_gaps = gaps or {}
        row.auroc_ci = parse_ci(row.measurements.get("auroc_ci"))
        row.auroc_ci_kind = "bootstrap" if row.auroc_ci else ""
        metrics_attach(row)
    board_intervals_attach(rows)


def board_intervals_attach(rows: list[BoardRow]) -> None:
    """Fill the AUROC interval of ``rows`` that have none stored (one query, for the rows shown).

    The interval is the mean of the per-task 95% bootstrap bounds (with one task: that task's
    interval). It is conservative: at least as wide as the interval of the mean.
    """
    missing = [r for r in rows if r.auroc_ci is None]
    if not missing:
        return
    tasks = sorted(
        Task.objects.filter(category_id__in={r.category for r in missing}).values_list("slug", flat=True)
    )
    if not tasks:
        return
    found = dict(
        Score.objects.filter(pk__in=[r.score_id for r in missing])
        .annotate(cis=JsonPaths("per_task", [(t, "auroc_ci") for t in tasks], large=True))
        .values_list("pk", "cis")
    )
    for row in missing:
        row.auroc_ci, row.auroc_ci_kind = _auroc_interval({}, json_list(found.get(row.score_id), len(tasks)))
