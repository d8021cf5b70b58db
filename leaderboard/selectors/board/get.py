"""A board as the pages and the API ask for it (``board_get``), every category's summary for the
index (``board_overview``), and the category tabs."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from django.db.models import Count, Exists, OuterRef, Prefetch

from leaderboard.models import Category, Probe, ProbeVersion, Task, WeightsSpec
from leaderboard.selectors.board.query import BoardQuery, BoardQueryError, resolve_spec, weights_spec_list
from leaderboard.selectors.board.ranked import RankedRows, board_cached, board_ranked_in_database
from leaderboard.selectors.board.rows import Board, BoardRow, board_authors_attach, board_rows
from leaderboard.selectors.board.sorting import rows_sort


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
        rows=rows_sort(rows, query),
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
    :func:`~leaderboard.selectors.board.ranked.board_cached`)."""

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
