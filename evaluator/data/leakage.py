"""Text overlap between declared training data and the test splits.

Two texts match when they are equal after normalisation: Unicode NFKC, case folded, every
punctuation character replaced by a space, whitespace collapsed to single spaces, ends stripped.
A text is compared by the SHA-256 of its normalised UTF-8 bytes, so a submitter can declare
external training data without uploading it: they publish the hashes (``python -m evaluator
text-hashes FILE``) and we intersect them with the hashes of every test split.

Pure: reads split files under a registry root, never touches a database. The normalisation and
the hash are :mod:`evaluator.data.texts`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.data.holdouts import read_rows
from evaluator.data.registry.load import Registry
from evaluator.data.registry.tasks import TaskSpec
from evaluator.data.texts import text_hash

EXAMPLES_KEPT = 10  # overlapping row ids kept as evidence per test split


def split_text_hashes(path: str | Path) -> list[tuple[str, str]]:
    """(row id, normalised-text hash) of every row of one split file."""
    return [(str(row["id"]), text_hash(str(row.get("text", "")))) for row in read_rows(path)]


@dataclass(frozen=True)
class SplitOverlap:
    """Declared training texts found in one test split."""

    task_id: str
    split: str
    rows: int  # test rows whose normalised text was declared
    split_rows: int  # rows in that test split
    sources: tuple[str, ...]  # what declared them: "task/split" or "text_sha256"
    example_ids: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {
            "task": self.task_id,
            "split": self.split,
            "rows": self.rows,
            "split_rows": self.split_rows,
            "sources": list(self.sources),
            "example_ids": list(self.example_ids),
        }


def split_files(spec: TaskSpec, split: str) -> list[str]:
    """The files of one split of a task: one, or one per base model for an on-policy task."""
    if spec.on_policy:
        return [s[split].path for _, s in sorted(spec.splits_by_model.items()) if split in s]
    return [spec.splits[split].path] if split in spec.splits else []


def declared_text_sources(
    registry: Registry,
    *,
    tasks: Iterable[str],
    splits: Iterable[str],
    text_sha256: Iterable[str] = (),
) -> dict[str, set[str]]:
    """Normalised-text hash → what declared it: every row of each declared task split, plus the
    hashes a submitter uploaded for external data."""
    sources: dict[str, set[str]] = {}
    for task_id in tasks:
        spec = registry.task(task_id)
        for split in splits:
            for path in split_files(spec, split):
                for _, h in split_text_hashes(registry.root / path):
                    sources.setdefault(h, set()).add(f"{task_id}/{split}")
    for h in text_sha256:
        sources.setdefault(h, set()).add("text_sha256")
    return sources


def overlapping_test_splits(
    registry: Registry,
    declared: dict[str, set[str]],
    *,
    tasks: Iterable[str] | None = None,
) -> list[SplitOverlap]:
    """The test splits (of ``tasks``, default every task) holding a row whose normalised text the
    training data declares."""
    found = []
    wanted = None if tasks is None else set(tasks)
    for task_id, spec in sorted(registry.tasks.items()):
        paths = split_files(spec, "test")
        if not paths or (wanted is not None and task_id not in wanted):
            continue
        rows = [row for path in paths for row in split_text_hashes(registry.root / path)]
        shared = [(row_id, h) for row_id, h in rows if h in declared]
        if not shared:
            continue
        found.append(
            SplitOverlap(
                task_id=task_id,
                split="test",
                rows=len(shared),
                split_rows=len(rows),
                sources=tuple(sorted(set().union(*(declared[h] for _, h in shared)))),
                example_ids=tuple(sorted(row_id for row_id, _ in shared)[:EXAMPLES_KEPT]),
            )
        )
    return found
