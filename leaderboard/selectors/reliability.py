"""The metric reliability table (evaluator/commands/reliability.py): the newest one a quarterly cycle
measured (``DATA_DIR/reliability/QUARTER.json``, leaderboard.services.reliability), else the one
committed as registry/reliability.json. Shown on the methodology page; a metric it flags is not a
sort order of the board."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluator.commands.reliability import DIAGNOSTICS, RECORD, read_record
from evaluator.data.holdouts import quarter_validate
from evaluator.errors import EvaluatorError
from evaluator.metrics.metric_table import column_metric


def reliability_dir() -> Path:
    return Path(settings.DATA_DIR) / "reliability"


def _newest_cycle_table() -> Path | None:
    """The newest quarter's table a cycle wrote (a file not named after a quarter is ignored)."""
    root = reliability_dir()
    if not root.is_dir():
        return None
    found = []
    for path in root.glob("*.json"):
        try:
            found.append((quarter_validate(path.stem), path))
        except EvaluatorError:
            continue
    return max(found)[1] if found else None


@lru_cache(maxsize=4)
def _read(path: Path, mtime_ns: int) -> dict[str, Any] | None:  # noqa: ARG001 - the cache key
    if path.name == RECORD.name and path.parent.name == RECORD.parent.name:
        return read_record(path.parents[1])
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a damaged cycle table: the committed one is shown instead
        return None


def reliability() -> dict[str, Any] | None:
    """The newest cycle's table, else the committed one (re-read when the file changes); None when
    there is neither."""
    for path in (_newest_cycle_table(), Path(settings.REGISTRY_ROOT) / RECORD):
        if path is None:
            continue
        try:
            mtime = path.stat().st_mtime_ns
        except FileNotFoundError:
            continue
        found = _read(path, mtime)
        if isinstance(found, dict) and isinstance(found.get("metrics"), dict):
            return found
    return None


def flagged_metrics() -> list[str]:
    found = reliability()
    return list(found.get("flagged") or []) if found else []


def flagged_sort(sort: str) -> str | None:
    """The flagged metric a board sort key orders by (a metric's own column, or the component
    computed from it: ``metric_table.column_metric``; or the per-task metric a column averages over
    part of the tasks, its ``of``), or None when the sort is not flagged."""
    metric = column_metric(sort)
    if metric is None:
        return None
    flagged = flagged_metrics()
    # an in-domain or cross-domain mean is as unreliable as the per-task metric it averages
    return next((name for name in (metric.name, metric.of) if name and name in flagged), None)


def reliability_rows() -> dict[str, Any] | None:
    """The table as the methodology page lays it out: one row per metric, a cell per diagnostic."""
    found = reliability()
    if not found:
        return None
    rows = []
    for metric, row in (found.get("metrics") or {}).items():
        cells = [row.get("diagnostics", {}).get(name) for name in DIAGNOSTICS]
        rows.append(
            {
                "metric": metric,
                "version": (found.get("metric_versions") or {}).get(metric),
                "mean": row.get("reseed_mean"),
                "sd": row.get("reseed_sd"),
                "cells": cells,
                "flagged": bool(row.get("flagged")),
            }
        )
    return {
        "subject": found.get("subject") or {},
        "seeds": found.get("seeds"),
        "diagnostics": list(DIAGNOSTICS),
        "rows": rows,
        "flagged": list(found.get("flagged") or []),
        "command": found.get("command"),
        "quarter": found.get("quarter"),
    }
