"""The per-example bulk export: once a quarter, every public entry's per-row scores on the public
splits in one file, so anyone can recompute any board number, or a new one, without our code.

    examples_export_write   write one quarter's file (when a cycle completes; `export_examples`)

(``leaderboard.selectors.exports`` lists what was written.)

A quarter's file is ``<DATA_DIR>/exports/<quarter>/examples.jsonl.gz``: one JSON object per line,
``{"probe", "version", "base_model", "category", "task", "split", "id", "label", "score", "prob"}``,
for the latest public version of every probe (deprecated ones included, as the board lists them)
and its score runs outside any cycle on ``EXPORT_SPLITS`` (the quarterly holdouts stay private).
Beside it ``manifest.json``: the quarter, row and entry counts, the file's SHA-256 and size, when it
was written and the code version. Both are written to temporary names and renamed into place, so a
reader never meets half a file, and a rewrite replaces the quarter's file whole.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from django.utils import timezone

from evaluator import CODE_VERSION
from evaluator.metrics.measure import example_records
from leaderboard.models import EvaluationRun
from leaderboard.selectors.exports import (
    COLUMNS,
    EXPORT_NAME,
    EXPORT_SPLITS,
    MANIFEST_NAME,
    examples_export_path,
)
from leaderboard.selectors.shared import scored_versions_all


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def examples_export_write(quarter: str) -> dict[str, Any]:
    """Write the quarter's file and manifest; returns the manifest."""
    path = examples_export_path(quarter)
    counts = {"rows": 0, "entries": 0}

    def write(fh) -> None:
        # mtime 0: the same rows give the same bytes, so the hash says whether anything changed
        with gzip.GzipFile(fileobj=fh, mode="wb", mtime=0) as gz:
            for version in scored_versions_all():  # public versions only
                runs = (
                    EvaluationRun.objects.filter(
                        probe_version=version,
                        kind=EvaluationRun.Kind.SCORE,
                        cycle=None,
                        status=EvaluationRun.Status.SUCCEEDED,
                        split__in=EXPORT_SPLITS,
                    )
                    .order_by("task_id", "split")
                    .only("task_id", "split", "example_scores")
                )
                head = {
                    "probe": version.probe.slug,
                    "version": version.number,
                    "base_model": version.probe.base_model_id,
                    "category": version.probe.category_id,
                }
                wrote = False
                for run in runs.iterator():
                    for e in example_records(run.example_scores):
                        line = head | {"task": run.task_id, "split": run.split, **e.to_dict()}
                        gz.write((json.dumps(line, allow_nan=False) + "\n").encode())
                        counts["rows"] += 1
                        wrote = True
                counts["entries"] += wrote

    _atomic_write(path, write)
    data = path.read_bytes()
    manifest = {
        "quarter": quarter,
        "file": EXPORT_NAME,
        "rows": counts["rows"],
        "entries": counts["entries"],
        "splits": list(EXPORT_SPLITS),
        "columns": list(COLUMNS),
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "written_at": timezone.now().isoformat(),
        "code_version": CODE_VERSION,
    }
    _atomic_write(path.with_name(MANIFEST_NAME), lambda fh: fh.write(json.dumps(manifest, indent=1).encode()))
    return manifest
