"""Shared pieces of the task builders: rows, task metadata, seeded splitting, checks, writing.

A builder is a pure function ``build(ctx) -> BuiltTask``: it reads pinned archives through
``ctx.archive(package)``, draws every random choice from :func:`rng` (seeded by task id and a
purpose string, so adding a draw in one place never shifts another), and returns its rows grouped
by split. :func:`write_task` serialises them byte-reproducibly in the ARCHITECTURE.md row format.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import textwrap
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from evaluator.data.domains import DomainError, validate_domain
from evaluator.errors import EvaluatorError

SPLIT_ORDER: tuple[str, ...] = ("train", "test", "distshift", "holdout_pool")
MINTED = "2026-11-21"
#: The largest share of positives (or negatives) a split may hold; every builder balances exactly
#: where its pairs allow, this is the safety net.
MAX_LABEL_SHARE = 0.55


class BuildError(EvaluatorError):
    """A builder produced splits that break the split-file contract (overlap, imbalance...)."""


@dataclass(frozen=True)
class Row:
    """One example. ``key`` is stable across rebuilds and becomes ``id = f"{task_id}-{key}"``."""

    key: str
    group: str
    label: int
    text: str
    meta: dict[str, Any] = field(default_factory=dict)
    #: subject-matter domain (evaluator.data.domains.DOMAINS), from the source's own metadata
    domain: str = ""
    #: the dataset, and the finer field it gives (risk area, category), where the source has one
    source: str = ""

    def to_dict(self, task_id: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": f"{task_id}-{self.key}",
            "group": self.group,
            "label": self.label,
            "text": self.text,
            "meta": self.meta,
            "domain": self.domain,
        }
        if self.source:
            out["source"] = self.source
        return out


def tag(rows: Iterable[Row], domain: str, source: str = "") -> list[Row]:
    """``rows`` with one domain (and source) for all: for a task whose source is about one subject."""
    return [replace(r, domain=domain, source=source) for r in rows]


def tag_splits(splits: dict[str, list[Row]], domain: str, source: str = "") -> dict[str, list[Row]]:
    return {name: tag(rows, domain, source) for name, rows in splits.items()}


@dataclass(frozen=True)
class TaskMeta:
    """Everything tasks.yaml says about a task except its split hashes (filled in at write time)."""

    id: str
    category: str
    family: str
    name: str
    description: str
    positive: str
    negative: str
    source: dict[str, str]  # package, version, path, license, citation
    templates: dict[str, Any]  # single, optional contrast_pair [pos, neg]
    caveats: str
    minted: str = MINTED

    @property
    def card(self) -> str:
        return f"registry/cards/{self.id}.md"


@dataclass
class BuiltTask:
    meta: TaskMeta
    splits: dict[str, list[Row]]
    #: an on-policy task: base model id -> its own splits (``splits`` is then empty)
    splits_by_model: dict[str, dict[str, list[Row]]] = field(default_factory=dict)

    @property
    def on_policy(self) -> bool:
        return bool(self.splits_by_model)


@dataclass
class BuildContext:
    """What a builder may use: a way to open pinned archives. Nothing else leaks in."""

    open_archive: Callable[[str], Any]
    #: on-policy builders: (task id, model id, [(key, prompt)], max_new_tokens) -> {key: greedy
    #: output}, from the committed generations (running the model only for missing ones)
    generate: Callable[[str, str, list[tuple[str, str]], int], dict[str, str]] | None = None
    _cache: dict[str, Any] = field(default_factory=dict)

    def generations(
        self, task_id: str, model_id: str, items: list[tuple[str, str]], max_new_tokens: int
    ) -> dict[str, str]:
        if self.generate is None:
            raise BuildError(f"{task_id}: an on-policy builder needs the model's generations")
        return self.generate(task_id, model_id, items, max_new_tokens)

    def archive(self, package: str):
        if package not in self._cache:
            self._cache[package] = self.open_archive(package)
        return self._cache[package]

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """Compute a parsed source once per build run (e.g. the 16 MB cities file)."""
        if f"memo:{key}" not in self._cache:
            self._cache[f"memo:{key}"] = compute()
        return self._cache[f"memo:{key}"]


# --------------------------------------------------------------------------- randomness


def rng(task_id: str, purpose: str) -> random.Random:
    """A generator seeded by (task id, purpose): str seeds hash with SHA-512, stable across runs."""
    return random.Random(f"probebench:{task_id}:{purpose}")


def stable_shuffle(items: Sequence, task_id: str, purpose: str) -> list:
    out = list(items)
    rng(task_id, purpose).shuffle(out)
    return out


def stable_hash(*parts: object) -> int:
    """A deterministic integer from strings (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big")


# --------------------------------------------------------------------------- text


_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalise(text: str) -> str:
    """Case-, accent-, punctuation- and whitespace-insensitive form used for overlap checks."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return _NON_WORD.sub(" ", text).strip()


def n_words(text: str) -> int:
    return len(text.split())


def clean(text: str) -> str:
    """Collapse runs of whitespace (keeping newlines) and strip."""
    lines = [" ".join(line.split()) for line in text.strip().splitlines()]
    return "\n".join(lines)


# --------------------------------------------------------------------------- splitting


def partition(
    items: Sequence, sizes: dict[str, int], task_id: str, purpose: str = "split"
) -> dict[str, list]:
    """Shuffle ``items`` (seeded) and cut consecutive blocks of the given sizes, in SPLIT_ORDER.

    ``sizes`` counts items (usually groups). Raises when there are too few items.
    """
    need = sum(sizes.values())
    if need > len(items):
        raise BuildError(f"{task_id}: {purpose}: need {need} items, the source yields {len(items)}")
    shuffled = stable_shuffle(items, task_id, purpose)
    out: dict[str, list] = {}
    start = 0
    for name in [s for s in SPLIT_ORDER if s in sizes] + [s for s in sizes if s not in SPLIT_ORDER]:
        out[name] = shuffled[start : start + sizes[name]]
        start += sizes[name]
    return out


# --------------------------------------------------------------------------- checks


def check_splits(task_id: str, splits: dict[str, list[Row]]) -> None:
    """Enforce the split-file contract: unique ids, disjoint groups and normalised texts across
    splits, both labels present and balanced within MAX_LABEL_SHARE, no empty text, every row's
    domain in the vocabulary (evaluator.data.domains)."""
    seen_keys: dict[str, str] = {}
    seen_groups: dict[str, str] = {}
    seen_text: dict[str, str] = {}
    for split, rows in splits.items():
        if not rows:
            raise BuildError(f"{task_id}: split {split} is empty")
        share = sum(r.label for r in rows) / len(rows)
        if not (1 - MAX_LABEL_SHARE) <= share <= MAX_LABEL_SHARE:
            raise BuildError(f"{task_id}: split {split} is unbalanced: {share:.1%} positives")
        for row in rows:
            if row.label not in (0, 1) or not row.text.strip():
                raise BuildError(f"{task_id}: row {row.key}: bad label or empty text")
            try:
                validate_domain(row.domain, where=f"{task_id}: row {row.key}")
            except DomainError as exc:
                raise BuildError(str(exc)) from None
            if row.key in seen_keys:
                raise BuildError(f"{task_id}: key {row.key} appears twice ({seen_keys[row.key]}, {split})")
            seen_keys[row.key] = split
            other = seen_groups.setdefault(row.group, split)
            if other != split:
                raise BuildError(f"{task_id}: group {row.group} is in both {other} and {split}")
            norm = normalise(row.text)
            other = seen_text.setdefault(norm, split)
            if other != split:
                raise BuildError(
                    f"{task_id}: the same text (normalised) is in both {other} and {split}: {row.key}"
                )


# --------------------------------------------------------------------------- writing


def serialise(task_id: str, rows: Iterable[Row]) -> bytes:
    """The exact bytes of a split file: one sorted-key JSON object per line, ``\\n`` endings."""
    lines = [json.dumps(r.to_dict(task_id), ensure_ascii=False, sort_keys=True) for r in rows]
    return ("\n".join(lines) + "\n").encode("utf-8")


def order_rows(task_id: str, split: str, rows: list[Row]) -> list[Row]:
    """File order: sorted by key, then a seeded shuffle so labels and pairs interleave."""
    return stable_shuffle(sorted(rows, key=lambda r: r.key), task_id, f"order:{split}")


def split_relpath(task_id: str, split: str, *, model: str | None = None) -> str:
    if model is not None:
        return f"registry/splits/{task_id}/{model}/{split}.jsonl"
    return f"registry/splits/{task_id}/{split}.jsonl"


def write_task(built: BuiltTask, root: Path) -> dict[str, dict[str, Any]]:
    """Write every split of ``built`` under ``root``; return split -> {path, rows, sha256}
    (for an on-policy task model -> split -> {...}, files under ``<task>/<model>/``)."""
    if built.on_policy:
        return {
            model: _write_splits(built.meta.id, splits, root, model=model)
            for model, splits in built.splits_by_model.items()
        }
    return _write_splits(built.meta.id, built.splits, root)


def _write_splits(
    task_id: str, splits: dict[str, list[Row]], root: Path, *, model: str | None = None
) -> dict[str, dict[str, Any]]:
    check_splits(task_id if model is None else f"{task_id}/{model}", splits)
    out: dict[str, dict[str, Any]] = {}
    for split in SPLIT_ORDER:
        if split not in splits:
            continue
        rows = order_rows(task_id, split, splits[split])
        data = serialise(task_id, rows)
        rel = split_relpath(task_id, split, model=model)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        out[split] = {"path": rel, "rows": len(rows), "sha256": hashlib.sha256(data).hexdigest()}
    return out


def read_split(path: Path) -> list[dict[str, Any]]:
    """Read one committed split file back into dicts."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def rewrite_tasks(path: Path, edit) -> None:
    """Re-serialise the ``tasks:`` block of tasks.yaml after ``edit(entries) -> entries``; the
    lines above it (header comments, categories) are kept byte for byte."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("tasks:")]
    if len(starts) != 1:
        raise EvaluatorError(f"{path}: expected exactly one top-level 'tasks:' line, found {len(starts)}")
    entries = edit((yaml.safe_load(text) or {}).get("tasks") or [])
    body = yaml.safe_dump(entries, sort_keys=False, allow_unicode=True, width=110, default_flow_style=False)
    block = (
        "tasks:\n"
        "  # Entries of buildable tasks are written by `python -m evaluator build-data`"
        " (evaluator/builders/).\n" + textwrap.indent(body, "  ")
    )
    path.write_text("".join(lines[: starts[0]]) + block, encoding="utf-8")
