"""Quarterly holdouts: drawn from a task's pool with the cycle's secret seed.

When a cycle starts it draws a secret (32 random bytes, ``secrets.token_bytes``); the holdout of
each task (and, for an on-policy task, of each base model) is a sample of its pool in an order
seeded by SHA-256(secret | task | model) (``draw_seed``), avoiding every row used by an earlier
quarter's holdout while the pool still has enough unused groups. Rows of one group (paired items)
are always taken together, and the holdout is label-balanced. The file bytes are canonical JSONL,
so its SHA-256 identifies it: the cycle publishes that hash, the pool's and the secret's before any
run (the commitment) and reveals the secret and the rows when it completes, so anyone can check
the draw (``python -m evaluator verify-holdout``). Which pool, and how many rows:
``evaluator.data.pools``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluator.data.texts import text_hash
from evaluator.errors import EvaluatorError

QUARTER = re.compile(r"^(?P<year>20\d\d)Q(?P<q>[1-4])$")
DEFAULT_SIZE = 100
#: the name of the draw below, published with every commitment (a new scheme is a new name)
SCHEME = "probebench-holdout-v1"
SECRET_BYTES = 32


def quarter_validate(quarter: str) -> str:
    if not isinstance(quarter, str) or not QUARTER.match(quarter):
        raise EvaluatorError(f"quarter {quarter!r} must look like 2026Q4 (a year and Q1..Q4)")
    return quarter


def read_rows(path: str | Path) -> list[dict]:
    """The rows of a split file (JSONL, docs/ARCHITECTURE.md)."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise EvaluatorError(f"{path}: line {line_no} is not JSON: {exc}") from None
    return rows


def rows_to_bytes(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode("utf-8")


@dataclass(frozen=True)
class Holdout:
    task_id: str
    quarter: str
    rows: list[dict]
    sha256: str
    reused_rows: int  # rows already used by an earlier quarter (only when the pool ran out)
    model: str = ""  # the base model of an on-policy task's holdout, else ""

    @property
    def ids(self) -> list[str]:
        return [r["id"] for r in self.rows]

    def to_bytes(self) -> bytes:
        return rows_to_bytes(self.rows)


def draw_seed(secret: bytes, task_id: str, model: str = "") -> int:
    """The seed of one holdout's draw: the first 8 bytes of SHA-256(secret | "|task|model"), big-endian."""
    return int.from_bytes(hashlib.sha256(secret + f"|{task_id}|{model}".encode()).digest()[:8], "big")


def mint_holdout(
    *,
    task_id: str,
    quarter: str,
    pool: list[dict],
    secret: bytes,
    model: str = "",
    used_ids: set[str] | frozenset = frozenset(),
    size: int = DEFAULT_SIZE,
    forbidden_texts: set[str] | frozenset = frozenset(),
) -> Holdout:
    """Sample about ``size`` rows (half per label where the pool allows) from ``pool``.

    Groups are the sampling unit: the rows of one group (a true/false pair, say) are taken
    together, and a group is taken only while every label it holds still needs rows, so the
    holdout stays label-balanced. Groups with no row in ``used_ids`` (earlier quarters'
    holdouts) come first, in an order seeded by ``draw_seed(secret, task_id, model)``; only when
    they cannot fill the holdout are used groups drawn (counted in ``reused_rows``). A row whose
    normalised text is in ``forbidden_texts`` (the hashes of the task's public splits, see
    :func:`evaluator.data.texts.text_hash`) is never drawn, nor is its group. Deterministic for a
    given (secret, task_id, model, pool, used_ids, size, forbidden_texts); the pool's order does
    not matter.
    """
    quarter_validate(quarter)
    if not isinstance(secret, bytes) or len(secret) < 16:
        raise EvaluatorError(f"task {task_id}: a holdout is drawn with a secret of at least 16 bytes")
    if size < 2:
        raise EvaluatorError(f"task {task_id}: a holdout needs at least 2 rows, not {size}")
    if not pool:
        raise EvaluatorError(f"task {task_id}: the holdout pool is empty")
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in pool:
        groups[str(row.get("group", row["id"]))].append(row)
    if forbidden_texts:
        groups = {
            g: rows
            for g, rows in groups.items()
            if not any(text_hash(r.get("text", "")) in forbidden_texts for r in rows)
        }
    names = sorted(groups)
    stale_set = {g for g in names if any(r["id"] in used_ids for r in groups[g])}
    fresh = [g for g in names if g not in stale_set]
    stale = [g for g in names if g in stale_set]
    rng = np.random.default_rng(draw_seed(secret, task_id, model))
    order = [fresh[i] for i in rng.permutation(len(fresh))] + [stale[i] for i in rng.permutation(len(stale))]
    want = {0: size // 2, 1: size - size // 2}
    have = {0: 0, 1: 0}
    chosen: list[dict] = []
    reused = 0
    for g in order:
        if have[0] >= want[0] and have[1] >= want[1]:
            break
        labels = [int(r["label"]) for r in groups[g]]
        if any(have[label] >= want[label] for label in set(labels)):
            continue
        chosen.extend(groups[g])
        for label in labels:
            have[label] += 1
        if g in stale_set:
            reused += len(groups[g])
    if len({r["label"] for r in chosen}) < 2:
        raise EvaluatorError(f"task {task_id}: the holdout pool does not hold both labels")
    chosen.sort(key=lambda r: r["id"])
    data = rows_to_bytes(chosen)
    return Holdout(task_id, quarter, chosen, hashlib.sha256(data).hexdigest(), reused, model)
