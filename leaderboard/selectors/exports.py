"""The per-example bulk exports on disk (written by ``leaderboard.services.exports``): where a
quarter's file lives and which quarters have one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluator.data.holdouts import quarter_validate
from evaluator.errors import EvaluatorError

#: the splits whose per-row scores are public (the holdouts are not)
EXPORT_SPLITS = ("train", "test", "distshift")
EXPORT_NAME = "examples.jsonl.gz"
MANIFEST_NAME = "manifest.json"
COLUMNS = ("probe", "version", "base_model", "category", "task", "split", "id", "label", "score", "prob")


def exports_dir() -> Path:
    return Path(settings.DATA_DIR) / "exports"


def examples_export_path(quarter: str) -> Path:
    """Where a quarter's file lives (the quarter is checked: it becomes a directory name)."""
    return exports_dir() / quarter_validate(quarter) / EXPORT_NAME


def examples_exports_list() -> list[dict[str, Any]]:
    """Every quarter written (its manifest), newest quarter first."""
    root = exports_dir()
    if not root.is_dir():
        return []
    found = []
    for manifest in root.glob(f"*/{MANIFEST_NAME}"):
        try:
            data = json.loads(manifest.read_text())
            quarter_validate(str(data.get("quarter")) if isinstance(data, dict) else "")
        except (OSError, ValueError, EvaluatorError):  # a damaged manifest is not listed
            continue
        if (manifest.parent / EXPORT_NAME).is_file() and manifest.parent.name == data["quarter"]:
            found.append(data)
    return sorted(found, key=lambda d: d["quarter"], reverse=True)
