"""The metric reliability table (evaluator/reliability.py, committed as registry/reliability.json):
shown on the methodology page; a metric it flags is not a sort order of the board."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluator.reliability import DIAGNOSTICS, RECORD, read_record

#: the board's sort keys that order by one metric of the table (sort key → metric name)
SORT_METRIC = {
    "auroc": "auroc",
    "auroc_ds": "auroc_ds",
    "recall": "recall_at_1pct_fpr",
    "lift": "lift_over_text",
    "controlled": "controlled_auroc",
}


@lru_cache(maxsize=1)
def _read(path: Path, mtime_ns: int) -> dict[str, Any] | None:  # noqa: ARG001 - the cache key
    return read_record(path.parents[1])


def reliability() -> dict[str, Any] | None:
    """The committed table (re-read when the file changes), or None when there is none."""
    path = Path(settings.REGISTRY_ROOT) / RECORD
    try:
        mtime = path.stat().st_mtime_ns
    except FileNotFoundError:
        return None
    return _read(path, mtime)


def flagged_metrics() -> list[str]:
    found = reliability()
    return list(found.get("flagged") or []) if found else []


def flagged_sort(sort: str) -> str | None:
    """The flagged metric a board sort key orders by, or None when the sort is not flagged."""
    metric = SORT_METRIC.get(sort)
    return metric if metric is not None and metric in flagged_metrics() else None


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
    }
