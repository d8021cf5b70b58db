"""The whole board as one file: ``/leaderboard.csv`` (one record per entry, the columns of
:func:`export_columns`) and ``/leaderboard.json``; both serialize the rows with the board's own
serializer (``board.LeaderboardRowOutput``), so they agree with the API field for field."""

from __future__ import annotations

import csv
import io
import json

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from evaluator.data.registry.weights import COMPONENTS
from evaluator.metrics import metric_table
from leaderboard.api.read.base import PublicReadApi
from leaderboard.api.read.board import (
    BOARD_PARAMETERS,
    LeaderboardOutput,
    LeaderboardRowOutput,
    board_meta,
    request_board,
)
from leaderboard.http import public_cache
from leaderboard.selectors.board.rows import Board, board_details_attach


def export_columns() -> list[str]:
    cols = [
        "spec",
        "rank",
        "probe",
        "name",
        "category",
        "base_model",
        "version",
        "license",
        "authors",
        "total",
        "measured_total",
        "auroc_ci_lo",
        "auroc_ci_hi",
        "auroc_ci_kind",
        "score_ci_lo",
        "score_ci_hi",
        "rank_ci_lo",
        "rank_ci_hi",
        "tied_for_first",
        "tie_group",
        "borda_rank",
        "rank_delta",
        "rank_delta_quarter",
        *metric_table.exported_columns(),
    ]
    for name in COMPONENTS:
        cols += [f"{name}_value", f"{name}_weight", f"{name}_contribution", f"{name}_imputed", f"{name}_raw"]
    cols += [
        "reproduced",
        "stability_quarters",
        "deprecated",
        "deprecated_reason",
        "leakage",
        "declared_gaps",
        "reference",
        "compare_spec",
        "compare_rank",
        "compare_total",
        "rank_change",
        "computed_at",
        "url",
    ]
    return cols


#: A spreadsheet reads a cell starting with one of these as a formula (CSV injection): text cells
#: that do are exported with a leading single quote. Numbers are written as numbers.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return str(value)


def flatten_row(row: dict, *, spec: str, compare: str | None) -> dict:
    """One API row as one CSV record (the columns of :func:`export_columns`)."""
    ci = row["auroc_ci"] or [None, None]
    badges = row["badges"]
    flat = {
        "spec": spec,
        "rank": row["rank"],
        "probe": row["probe"],
        "name": row["name"],
        "category": row["category"],
        "base_model": row["base_model"],
        "version": row["version"],
        "license": row["license"],
        "authors": "; ".join(row["authors"]),
        "total": row["total"],
        "measured_total": row["measured_total"],
        "auroc_ci_lo": ci[0],
        "auroc_ci_hi": ci[1],
        "auroc_ci_kind": row["auroc_ci_kind"],
    }
    interval = row["rank_interval"] or {}
    score_ci, rank_ci = interval.get("score_ci") or [None, None], interval.get("rank_ci") or [None, None]
    flat |= {
        "score_ci_lo": score_ci[0],
        "score_ci_hi": score_ci[1],
        "rank_ci_lo": rank_ci[0],
        "rank_ci_hi": rank_ci[1],
        "tied_for_first": interval.get("tied_for_first"),
        "tie_group": interval.get("tie_group"),
        "borda_rank": row.get("borda_rank"),
        "rank_delta": row.get("rank_delta"),
        "rank_delta_quarter": row.get("rank_delta_quarter"),
        **metric_table.exported_values(row),
    }
    for name in COMPONENTS:
        comp = row["components"].get(name) or {}
        for key in ("value", "weight", "contribution", "imputed", "raw"):
            flat[f"{name}_{key}"] = comp.get(key)
    flat |= {
        "reproduced": badges["reproduced"],
        "stability_quarters": badges["stability_quarters"],
        "deprecated": badges["deprecated"],
        "deprecated_reason": badges["deprecated_reason"],
        "leakage": badges["leakage"],
        "declared_gaps": json.dumps(badges["declared_gaps"], sort_keys=True)
        if badges["declared_gaps"]
        else "",
        "reference": badges["reference"],
        "compare_spec": compare,
        "compare_rank": row["compare_rank"],
        "compare_total": row["compare_total"],
        "rank_change": row["rank_change"],
        "computed_at": row["computed_at"],
        "url": row["url"],
    }
    return {k: _cell(v) for k, v in flat.items()}


def _export_filename(board: Board, ext: str) -> str:
    scope = board.query.category or "all"
    return f"probebench-{scope}-{board.spec.version}.{ext}"


@public_cache
class LeaderboardCsvApi(PublicReadApi):
    @extend_schema(
        operation_id="leaderboard_csv",
        summary="The whole board as CSV (same rows and filters as /leaderboard, no pagination)",
        parameters=BOARD_PARAMETERS,
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="one row per entry")},
    )
    def get(self, request):
        board = request_board(request)
        entries = list(board.rows)  # every entry (ranked in the database or not): one query
        board_details_attach(entries)
        rows = LeaderboardRowOutput(entries, many=True).data
        compare = board.compare.version if board.compare else None
        buf = io.StringIO()
        # RFC 4180 line ends: a cell holding a carriage return is quoted too, not read as a row end
        writer = csv.DictWriter(buf, fieldnames=export_columns(), lineterminator="\r\n")
        writer.writeheader()
        for row in rows:
            writer.writerow(flatten_row(row, spec=board.spec.version, compare=compare))
        response = HttpResponse(buf.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{_export_filename(board, "csv")}"'
        return response


@public_cache
class LeaderboardJsonExportApi(PublicReadApi):
    renderer_classes = [JSONRenderer]

    @extend_schema(
        operation_id="leaderboard_json_export",
        summary="The whole board as one JSON document (same rows as /leaderboard, no pagination)",
        parameters=BOARD_PARAMETERS,
        responses=LeaderboardOutput,
    )
    def get(self, request):
        board = request_board(request)
        entries = list(board.rows)
        board_details_attach(entries)
        data = board_meta(board) | {
            "count": len(entries),
            "next": None,
            "previous": None,
            "results": LeaderboardRowOutput(entries, many=True).data,
        }
        response = Response(data)
        response["Content-Disposition"] = f'attachment; filename="{_export_filename(board, "json")}"'
        return response
