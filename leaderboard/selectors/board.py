"""Reads for the board (the index and category pages, the leaderboard API and exports): the
latest scored version of each probe with a Score under the requested weights spec, ranked.

Which Scores are on a board and in what order is written once, in leaderboard.models
(``ProbeVersion.objects.public()``, ``Score.objects.on_board()``, ``Score.objects.ranked()``);
this module reads them into ``BoardRow``s, built by field name."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.core.cache import cache
from django.db.models import (
    Aggregate,
    Case,
    Count,
    Exists,
    F,
    FloatField,
    Func,
    Max,
    Min,
    OuterRef,
    Prefetch,
    Q,
    TextField,
    Value,
    When,
)
from django.db.models.expressions import CombinedExpression
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Lower
from django.db.models.lookups import GreaterThanOrEqual

from evaluator.axes.attack import ATTACK_RECALL_KEY, GOODHART_KEY, TRANSFER_RECALL_KEY
from evaluator.axes.stress import STRESS_AUROC_KEY, STRESS_RECALL_KEY
from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.data.registry.weights import COMPONENTS
from evaluator.metrics.records import (
    CONTROLLED_AUROC_CI_KEY,
    CONTROLLED_AUROC_KEY,
    LIFT_OVER_TEXT_CI_KEY,
    LIFT_OVER_TEXT_KEY,
)
from leaderboard.errors import QueryError
from leaderboard.models import (
    BaseModel,
    Category,
    LeakageRecord,
    License,
    Probe,
    ProbeVersion,
    Score,
    Task,
    WeightsSpec,
    board_rank_order,
    measured_ranking_annotations,
)
from leaderboard.policy import (
    PUBLIC_MAX_AGE_S,
    SATURATED_AUROC,
    STABILITY_MIN_QUARTERS,
    saturated,
    spec_version_key,
)
from leaderboard.presentation import COMPONENT_LABELS, COMPONENT_SHORT, FLAT_TOLERANCE

SORT_KEYS = (
    "score",
    "measured",
    "name",
    "model",
    *COMPONENTS,
    "recall",
    "lift",
    "controlled",
    "utility",
    "stress",
    "borda",
    "delta",
)
#: the operating-point column: Score.measurements key (mean over tasks of recall at the 1%-FPR
#: threshold fixed on the train split)
RECALL_KEY = "recall_at_1pct_fpr"
#: lift over text: Score.measurements key of the mean over tasks of the probe's test AUROC minus
#: the task's bag-of-words AUROC on the same rows (services.scores)
LIFT_KEY, LIFT_CI_KEY = LIFT_OVER_TEXT_KEY, LIFT_OVER_TEXT_CI_KEY
#: direction utility (evaluator.axes.steer, not part of the ProbeScore): Score.measurements key of the
#: mean over the judged readout tasks of utility_z; absent or null where it was not measured (n/a)
UTILITY_KEY = "direction_utility"
#: stress (evaluator.axes.stress, not part of the ProbeScore): Score.measurements key of the mean over
#: tasks of the worst stress transform's AUROC; absent or null where not measured (n/a)
STRESS_KEY = STRESS_AUROC_KEY


BOARD_STATUSES = ("active", "deprecated")


class BoardQueryError(QueryError):
    """A board request that names something that does not exist or is malformed."""


def weights_spec_list() -> list[WeightsSpec]:
    """Every weights spec, oldest first (semantic version order, not string order)."""
    return sorted(WeightsSpec.objects.all(), key=lambda s: spec_version_key(s.version))


def resolve_spec(specs: list[WeightsSpec], version: str | None, *, param: str) -> WeightsSpec:
    if not specs:
        raise BoardQueryError("no weights spec is loaded (run manage.py sync_registry)", param=param)
    if not version:
        return specs[-1]
    for spec in specs:
        if spec.version == version:
            return spec
    accepted = ", ".join(s.version for s in specs)
    raise BoardQueryError(f"unknown weights spec {version!r}; accepted: {accepted}", param=param)


@dataclass(frozen=True)
class BoardQuery:
    category: str | None = None
    spec: str | None = None
    compare: str | None = None
    model: str | None = None
    license: str | None = None
    status: str | None = None  # "active" | "deprecated" | None (both)
    measured_only: bool = False
    q: str = ""
    sort: str = "score"
    direction: str = ""  # "asc" | "desc" | "" (the column's natural direction)

    @property
    def descending(self) -> bool:
        if self.direction:
            return self.direction == "desc"
        return self.sort not in ("name", "model")


_INDEX = {name: i for i, name in enumerate(COMPONENTS)}


@dataclass(slots=True)
class BoardRow:
    """One probe on the board: its latest scored version under one weights spec.

    ``values`` / ``imputed`` hold every component's value and imputed flag (in COMPONENTS order)
    when the query needed them to sort or rank (else None / False). ``components`` (value, weight,
    contribution, imputed, raw, note) and
    ``measurements`` are filled by :func:`board_details_attach` for the rows that are shown.
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
    auroc_ci: list[float] | None = None
    auroc_ci_kind: str = ""  # "bootstrap" | "per-task" (one task) | "mean-of-tasks" (mean of the bounds) | ""
    computed_at: datetime | None = None
    rank: int | None = None
    compare_rank: int | None = None
    compare_total: float | None = None
    #: recall at 1% FPR (mean over tasks); read for every row only when the board sorts by it
    recall: float | None = None
    #: lift over text (mean over tasks) and its 95% interval; from the measurements
    #: (board_details_attach)
    lift_over_text: float | None = None
    lift_over_text_ci: list[float] | None = None
    #: the AUROC the probe adds to the text controls (mean over tasks) and its 95% interval
    controlled_auroc: float | None = None
    controlled_auroc_ci: list[float] | None = None
    #: direction utility (mean utility_z over readout tasks); None: not measured (n/a)
    direction_utility: float | None = None
    #: the worst stress transform's AUROC, mean over tasks; None: not measured (n/a)
    stress_auroc: float | None = None
    #: the worst stress transform's recall at the clean 1%-FPR threshold, mean over tasks
    stress_recall: float | None = None
    #: recall of the test positives under the protocol's attack, mean over tasks; None: not measured
    attack_recall: float | None = None
    #: the same ÷ the clean recall (the goodhart component's measured value); None: not measured
    goodhart_resistance: float | None = None
    #: recall under the category reference's suffix (the transfer attack); None: not measured
    transfer_attack_recall: float | None = None
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


def board_filters(query: BoardQuery, *, via: str = "") -> Q:
    """The board's filters (category, base model, license, status) as one condition on probe
    versions, or on rows that reach them through ``via`` (``"probe_version__"`` for Scores)."""
    fields = {
        "probe__category_id": query.category,
        "probe__base_model_id": query.model,
        "license_id": query.license,
        "probe__status": query.status,
    }
    return Q(**{f"{via}{name}": value for name, value in fields.items() if value})


def board_entries(*, spec: WeightsSpec, query: BoardQuery, slugs: list[str] | None = None):
    """The board's entries (``Score.objects.on_board``) with the board's filters applied."""
    filters = board_filters(query, via="probe_version__")
    if slugs is not None:
        filters &= Q(probe_version__probe__slug__in=slugs)
    return Score.objects.on_board(spec=spec, filters=filters)


def _board_values(qs, *, values: bool, recall: bool) -> list[dict]:
    """The named columns of a board row (:data:`_ROW_PATHS`) and what its ranking and sorts read
    from the Score's JSON: only the license contribution, unless ``values`` asks for every
    component's value and imputed flag; the recall only when ``recall``."""
    leakage = LeakageRecord.objects.filter(
        probe_id=OuterRef("probe_version__probe_id"), status=LeakageRecord.Status.CONFIRMED
    )
    qs = qs.annotate(
        leakage=Exists(leakage),
        recall_value=KeyTextTransform(RECALL_KEY, "measurements")
        if recall
        else Value(None, output_field=TextField()),
        score_numbers=JsonPaths("components", _COMPONENT_PATHS)
        if values
        else KeyTextTransform("contribution", KeyTransform("license", "components")),
    )
    return qs.values(
        *_ROW_PATHS.values(), "recall_value", "score_numbers", *qs.query.annotations.keys() & _RANK_COLUMNS
    )


#: the ranking's annotations a board row keeps (models.ScoreQuerySet.ranked)
_RANK_COLUMNS = {"board_rank", "measured_key"}


def _board_row(found: dict, *, weights: dict, values: bool) -> BoardRow:
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
    if found["recall_value"] not in (None, "null"):
        row.recall = float(found["recall_value"])
    if not row.deprecated and found.get("board_rank") is not None:
        row.rank = found["board_rank"]
    return row


def board_rows(
    *, spec: WeightsSpec, query: BoardQuery, slugs: list[str] | None = None, values: bool = False
) -> list[BoardRow]:
    """Every entry of the board, ranked (one query): the active entries in rank order, numbered
    by the board's ranker (``models.ScoreQuerySet.ranked``, on the measured-only total when the
    query asks), then the deprecated ones, greyed and unranked.

    Only the numbers the ranking needs leave the database (with ``values``, or when the query sorts
    by a component or ranks by measured components, every component's value and imputed flag); the
    rows shown get their full components from :func:`board_details_attach`: decoding every row's
    JSON would dominate the page.
    """
    values = values or query.measured_only or query.sort in (*COMPONENTS, "measured")
    measured = query.measured_only or query.sort == "measured"
    qs = board_entries(spec=spec, query=query, slugs=slugs).ranked(
        weights=spec.weights, measured_only=query.measured_only
    )
    if measured and not query.measured_only:
        qs = qs.annotate(**measured_ranking_annotations(spec.weights))
    qs = qs.order_by("is_deprecated", "board_rank")
    found = _board_values(qs, values=values, recall=query.sort == "recall")
    return [_board_row(f, weights=spec.weights, values=values) for f in found]


def board_authors_attach(rows: list[BoardRow]) -> None:
    """Authors and declared-vs-measured gaps of ``rows`` (one query)."""
    by_id = {r.score_id: r for r in rows}
    found = Score.objects.filter(pk__in=list(by_id)).values_list(
        "pk", "probe_version__authors", "probe_version__declared_gaps"
    )
    for pk, authors, gaps in found:
        by_id[pk].authors = authors or []
        by_id[pk].declared_gaps = gaps or {}


def board_details_attach(rows: Iterable[BoardRow]) -> None:
    """Everything the shown rows display beyond the ranking: full components, measurements,
    authors, declared gaps and the AUROC interval (at most three queries)."""
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
        if row.recall is None and isinstance(row.measurements.get(RECALL_KEY), (int, float)):
            row.recall = float(row.measurements[RECALL_KEY])
        if isinstance(row.measurements.get(LIFT_KEY), (int, float)):
            row.lift_over_text = float(row.measurements[LIFT_KEY])
            row.lift_over_text_ci = parse_ci(row.measurements.get(LIFT_CI_KEY))
        if isinstance(row.measurements.get(CONTROLLED_AUROC_KEY), (int, float)):
            row.controlled_auroc = float(row.measurements[CONTROLLED_AUROC_KEY])
            row.controlled_auroc_ci = parse_ci(row.measurements.get(CONTROLLED_AUROC_CI_KEY))
        if isinstance(row.measurements.get(UTILITY_KEY), (int, float)):
            row.direction_utility = float(row.measurements[UTILITY_KEY])
        if isinstance(row.measurements.get(STRESS_KEY), (int, float)):
            row.stress_auroc = float(row.measurements[STRESS_KEY])
        if isinstance(row.measurements.get(STRESS_RECALL_KEY), (int, float)):
            row.stress_recall = float(row.measurements[STRESS_RECALL_KEY])
        if isinstance(row.measurements.get(ATTACK_RECALL_KEY), (int, float)):
            row.attack_recall = float(row.measurements[ATTACK_RECALL_KEY])
        if isinstance(row.measurements.get(GOODHART_KEY), (int, float)):
            row.goodhart_resistance = float(row.measurements[GOODHART_KEY])
        if isinstance(row.measurements.get(TRANSFER_RECALL_KEY), (int, float)):
            row.transfer_attack_recall = float(row.measurements[TRANSFER_RECALL_KEY])
    board_intervals_attach(rows)


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


# --------------------------------------------------------------------------- ranked in the database


class RankedRows(Sequence[BoardRow]):
    """A board read a page at a time: ``len()`` counts the entries, a slice fetches one page.

    Each page is one query: the entries (``Score.objects.on_board``) filtered as the board is,
    numbered by the board's ranker (``Score.objects.ranked``: a window function over the norm-2
    key, ``models.board_rank_order``), ordered and cut with LIMIT/OFFSET — so only the shown rows
    leave the database. On PostgreSQL the default order reads the ``score_board_key`` index from
    the top and stops at the page; other column sorts still rank every entry in the database.
    Active entries are ranked; deprecated ones follow, unranked (as :func:`board_rows` does).
    """

    def __init__(self, *, spec: WeightsSpec, query: BoardQuery):
        self.spec, self.query = spec, query
        self._counts: tuple[int, int] | None = None

    # -- counts
    def counts(self) -> tuple[int, int]:
        """(active entries, deprecated entries) after the filters: counting every entry is the one
        step that grows with the board, so the counts are cached (see :func:`board_cached`)."""
        if self._counts is None:
            q = self.query
            # the filters are user input: hashed, so the key is short and safe for any cache backend
            parts = json.dumps([self.spec.version, q.category, q.model, q.license, q.status])
            key = f"board-counts:{hashlib.sha256(parts.encode()).hexdigest()}"
            self._counts = tuple(board_cached(key, self._count))
        return self._counts

    def _count(self) -> tuple[int, int]:
        deprecated = Q(probe_version__probe__status=Probe.Status.DEPRECATED)
        found = self._entries().aggregate(n=Count("pk"), deprecated=Count("pk", filter=deprecated))
        return found["n"] - found["deprecated"], found["deprecated"]

    def __len__(self) -> int:
        return sum(self.counts())

    def count(self, *value: object) -> int:
        """With no argument, the number of rows (what Django's Paginator and DRF's pagination ask
        first); with one, the sequence's count of that value."""
        return super().count(*value) if value else len(self)

    # -- pages
    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return list(self)[index]
            return self._page(start, stop)
        rows = self._page(index, index + 1) if index >= 0 else list(self)[index:][:1]
        if not rows:
            raise IndexError(index)
        return rows[0]

    def __iter__(self):
        return iter(self._page(0, len(self)))

    def _page(self, start: int, stop: int) -> list[BoardRow]:
        if stop <= start:
            return []
        q = self.query
        n_active, n_deprecated = self.counts()
        if q.sort == "score":
            # rank order (or its reverse): the active entries, then the deprecated ones
            segments = [(False, n_active), (True, n_deprecated)]
            if not q.descending:
                segments.reverse()
            out, offset = [], 0
            for deprecated, size in segments:
                lo, hi = max(start - offset, 0), min(stop - offset, size)
                if hi > lo:
                    out += self._rows(deprecated=deprecated, lo=lo, hi=hi)
                offset += size
            return out
        return self._rows(deprecated=None, lo=start, hi=stop)

    # -- the queries
    def _entries(self):
        """The board's entries: latest public version per probe with a Score under the spec."""
        return board_entries(spec=self.spec, query=self.query)

    def _rows(self, *, deprecated: bool | None, lo: int, hi: int) -> list[BoardRow]:
        q = self.query
        is_deprecated = Q(probe_version__probe__status=Probe.Status.DEPRECATED)
        qs = self._entries()
        if deprecated is not None:
            # one side of the board: ranked on its own, so PostgreSQL can read the page from the
            # top of the ``score_board_key`` index
            qs = qs.filter(is_deprecated) if deprecated else qs.exclude(is_deprecated)
        qs = qs.ranked(weights=self.spec.weights, split=deprecated is None)
        if q.sort == "score":
            order = board_rank_order(descending=q.descending)
        else:
            column = _SORT_EXPRESSIONS[q.sort]() if q.sort in _SORT_EXPRESSIONS else _component_value(q.sort)
            direction = column.desc(nulls_last=True) if q.descending else column.asc(nulls_last=True)
            order = [direction, F("is_deprecated").asc(), *board_rank_order()]
        page = _board_values(qs.order_by(*order), values=False, recall=True)[lo:hi]
        return [_board_row(f, weights=self.spec.weights, values=False) for f in page]


#: How long a board count may be served from the cache: as long as the page itself may be cached
#: by anyone (the public pages' and the API's ``Cache-Control: max-age``).
BOARD_COUNT_TTL_S = PUBLIC_MAX_AGE_S


def board_stamp() -> str:
    """Changes whenever an entry can appear, leave or change side: a new Score (a newly scored
    probe or version), a new probe, a deprecation. Two index lookups."""
    scores = Score.objects.aggregate(last=Max("pk"))
    probes = Probe.objects.aggregate(last=Max("pk"), deprecated=Max("deprecated_at"))
    deprecated = probes["deprecated"].timestamp() if probes["deprecated"] else 0
    return f"{scores['last']}:{probes['last']}:{deprecated}"


def board_cached(key: str, compute):
    """``compute()`` cached under ``key`` and the current :func:`board_stamp`, for at most
    BOARD_COUNT_TTL_S seconds. Counting every entry is the one step of a board page whose cost
    grows with the board (the page itself is read from the top of an index); the stamp makes a
    new entry or a deprecation show at once, the TTL bounds anything else (a deleted probe)."""
    full_key = f"{key}:{board_stamp()}"
    found = cache.get(full_key)
    if found is None:
        found = compute()
        cache.set(full_key, found, timeout=BOARD_COUNT_TTL_S)
    return found


def _component_value(name: str) -> Func:
    return Cast(KeyTextTransform("value", KeyTransform(name, "components")), FloatField())


_SORT_EXPRESSIONS: dict[str, Callable[[], F | Func | CombinedExpression]] = {
    "name": lambda: Lower("probe_version__probe__name"),
    "model": lambda: F("probe_version__probe__base_model_id"),
    "recall": lambda: Cast(KeyTextTransform(RECALL_KEY, "measurements"), FloatField()),
    "lift": lambda: Cast(KeyTextTransform(LIFT_KEY, "measurements"), FloatField()),
    "controlled": lambda: Cast(KeyTextTransform(CONTROLLED_AUROC_KEY, "measurements"), FloatField()),
    "utility": lambda: Cast(KeyTextTransform(UTILITY_KEY, "measurements"), FloatField()),
    "stress": lambda: Cast(KeyTextTransform(STRESS_KEY, "measurements"), FloatField()),
    # ranks: "descending" (the default) puts the best first, i.e. the smallest rank or delta
    "borda": lambda: F("rank_interval__borda_rank") * -1,
    "delta": lambda: F("rank_interval__rank_delta") * -1,
}


#: the board's value columns whose spread :func:`board_columns` reads (the rank and the
#: ProbeScore always separate the entries they rank)
FLAT_COLUMNS = (*COMPONENTS, "recall", "lift", "controlled", "utility", "stress")


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
    keys = [k for k in FLAT_COLUMNS if not (k == "auroc_ea" and board.query.category == EVAL_AWARENESS)]
    expressions = {k: _SORT_EXPRESSIONS[k]() if k in _SORT_EXPRESSIONS else _component_value(k) for k in keys}
    aggregates: dict[str, Aggregate] = {}
    for k, expression in expressions.items():
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


def board_ranked_in_database(query: BoardQuery, *, values: bool) -> bool:
    """Whether the board can be read a page at a time (:class:`RankedRows`): the default ranking,
    with no text search (which filters after ranking) and no compared spec; the measured-only
    ranking, a search and a spec comparison read every ranked entry (:func:`board_rows`), ranked by
    the same ranker in the database, and filter or compare them in Python."""
    return not (values or query.measured_only or query.q or query.compare or query.sort == "measured")


def _sort(rows: list[BoardRow], query: BoardQuery) -> list[BoardRow]:
    if query.sort == "score" and query.descending:
        return rows  # already in rank order
    if query.sort == "score":
        return list(reversed(rows))
    if query.sort == "name":
        key = lambda r: r.name.casefold()  # noqa: E731
    elif query.sort == "model":
        key = lambda r: r.base_model  # noqa: E731
    elif query.sort == "measured":
        key = lambda r: r.measured_key  # noqa: E731
    elif query.sort == "recall":
        key = lambda r: r.recall  # noqa: E731
    elif query.sort == "lift":
        board_details_attach(rows)  # the measurements of every row (one query)
        key = lambda r: r.lift_over_text  # noqa: E731
    elif query.sort == "controlled":
        board_details_attach(rows)
        key = lambda r: r.controlled_auroc  # noqa: E731
    elif query.sort == "utility":
        board_details_attach(rows)
        key = lambda r: r.direction_utility  # noqa: E731
    elif query.sort == "stress":
        board_details_attach(rows)
        key = lambda r: r.stress_auroc  # noqa: E731
    elif query.sort in ("borda", "delta"):
        board_details_attach(rows)
        attr = "borda_rank" if query.sort == "borda" else "rank_delta"
        key = lambda r: None if getattr(r, attr) is None else -getattr(r, attr)  # noqa: E731
    else:
        key = lambda r: r.component_value(query.sort, measured_only=query.measured_only)  # noqa: E731
    present = [r for r in rows if key(r) is not None]
    missing = [r for r in rows if key(r) is None]  # always last, whichever the direction
    present.sort(key=key, reverse=query.descending)
    return present + missing


def _matches(row: BoardRow, needle: str) -> bool:
    haystack = [row.name, row.probe, *(str(a) for a in row.authors)]
    return any(needle in h.casefold() for h in haystack)


def board_get(*, query: BoardQuery, values: bool = False) -> Board:
    """The board of one category (or of every category when ``query.category`` is None).

    Queries: the specs, the category with its tasks, the rows, and the rows under the compared spec
    when ``query.compare`` is given — never one per probe.
    """
    specs = weights_spec_list()
    spec = resolve_spec(specs, query.spec, param="spec")
    compare = resolve_spec(specs, query.compare, param="compare") if query.compare else None
    if compare is not None and compare.version == spec.version:
        compare = None
    category = None
    if query.category:
        category = (
            Category.objects.filter(slug=query.category)
            .prefetch_related(Prefetch("tasks", queryset=Task.objects.order_by("slug")))
            .first()
        )
        if category is None:
            raise BoardQueryError(f"unknown category {query.category!r}", param="category")
    if board_ranked_in_database(query, values=values):
        ranked = RankedRows(spec=spec, query=query)
        return Board(
            spec=spec,
            specs=specs,
            compare=None,
            query=replace(query, spec=spec.version, compare=None),
            category=category,
            rows=ranked,
            ranked_count=len(ranked),
        )
    rows = board_rows(spec=spec, query=query, values=values)
    if compare is not None:
        others = board_rows(spec=compare, query=query)
        by_slug = {r.probe: r for r in others}
        for row in rows:
            other = by_slug.get(row.probe)
            if other is not None:
                row.compare_rank, row.compare_total = other.rank, other.total
    ranked_count = len(rows)
    if query.q:
        board_authors_attach(rows)
        needle = query.q.casefold()
        rows = [r for r in rows if _matches(r, needle)]
    return Board(
        spec=spec,
        specs=specs,
        compare=compare,
        query=replace(query, spec=spec.version, compare=compare.version if compare else None),
        category=category,
        rows=_sort(rows, query),
        ranked_count=ranked_count,
    )


@dataclass
class CategorySummary:
    category: Category
    count: int = 0
    top: list[BoardRow] = field(default_factory=list)

    @property
    def is_open(self) -> bool:
        return self.count == 0


def board_overview(
    *, spec: str | None = None, top: int = 3
) -> tuple[WeightsSpec, list[WeightsSpec], list[CategorySummary]]:
    """Every category with its number of public entries and its top entries (open slots: 0)."""
    specs = weights_spec_list()
    resolved = resolve_spec(specs, spec, param="spec")
    summaries = {c.slug: CategorySummary(c) for c in Category.objects.prefetch_related("tasks")}
    rows = board_rows(spec=resolved, query=BoardQuery())
    for row in rows:
        summary = summaries.get(row.category)
        if summary is None:
            continue
        summary.count += 1
        if len(summary.top) < top and not row.deprecated:
            summary.top.append(row)
    return resolved, specs, list(summaries.values())


def category_tabs() -> list[dict]:
    """The category tabs: slug, name and the number of probes with a public version (cached, see
    :func:`board_cached`)."""

    def count() -> dict[str, int]:
        public = ProbeVersion.objects.public().filter(probe_id=OuterRef("pk"))
        return dict(
            Probe.objects.filter(Exists(public)).values_list("category_id").annotate(n=Count("pk")).order_by()
        )

    counts = board_cached("board-tabs", count)
    return [
        {"slug": c.slug, "name": c.name, "count": counts.get(c.slug, 0)}
        for c in Category.objects.only("slug", "name", "order")
    ]


def board_filter_choices() -> dict:
    """What the filter form offers: base models and licenses (two queries)."""
    return {
        "models": list(BaseModel.objects.values("slug", "name")),
        "licenses": list(License.objects.values_list("spdx_id", flat=True)),
    }
