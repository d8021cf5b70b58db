"""The board read a page at a time (:class:`RankedRows`), ranked in the database, and the cached
counts of its entries (the one step of a board page whose cost grows with the board)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from django.core.cache import cache
from django.db.models import Count, F, Max, Q

from leaderboard.models import Probe, Score, WeightsSpec, board_rank_order
from leaderboard.policy import PUBLIC_MAX_AGE_S
from leaderboard.selectors.board.query import BoardQuery, board_entries
from leaderboard.selectors.board.rows import BoardRow, board_row, board_values, sort_metric
from leaderboard.selectors.board.sorting import sort_expression

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


def board_ranked_in_database(query: BoardQuery, *, values: bool) -> bool:
    """Whether the board can be read a page at a time (:class:`RankedRows`): the default ranking,
    with no text search (which filters after ranking) and no compared spec; the measured-only
    ranking, a search and a spec comparison read every ranked entry (``rows.board_rows``), ranked by
    the same ranker in the database, and filter or compare them in Python."""
    return not (values or query.measured_only or query.q or query.compare or query.sort == "measured")


class RankedRows(Sequence[BoardRow]):
    """A board read a page at a time: ``len()`` counts the entries, a slice fetches one page.

    Each page is one query: the entries (``Score.objects.on_board``) filtered as the board is,
    numbered by the board's ranker (``Score.objects.ranked``: a window function over the norm-2
    key, ``models.board_rank_order``), ordered and cut with LIMIT/OFFSET — so only the shown rows
    leave the database. On PostgreSQL the default order reads the ``score_board_key`` index from
    the top and stops at the page; other column sorts still rank every entry in the database.
    Active entries are ranked; deprecated ones follow, unranked (as ``rows.board_rows`` does).
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
            column = sort_expression(q.sort)
            direction = column.desc(nulls_last=True) if q.descending else column.asc(nulls_last=True)
            order = [direction, F("is_deprecated").asc(), *board_rank_order()]
        metric = sort_metric(q.sort)
        page = board_values(qs.order_by(*order), values=False, metric=metric)[lo:hi]
        return [board_row(f, weights=self.spec.weights, values=False, metric=metric) for f in page]
