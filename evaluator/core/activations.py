"""Activations of a split or a prompt list, through a content-addressed cache on disk.

The vectors come from :func:`evaluator.core.harvest.harvest` (float32, whatever the compute
dtype) and are stored as float32.

The cache key is the SHA-256 of (weights hash, tokenizer hash, compute dtype, layer, position,
input kind, template hash, split-file hash, max length, harvester + code version), so a changed
template, split, tokenizer or code version can never hit a stale entry. Entries are written to a
temporary file and renamed into place, so two processes filling the same entry at once are safe
(both write identical bytes; one rename wins) and a reader never sees half a file.

A miss keeps every layer: :func:`split_activations` harvests, in the one forward it needs anyway,
all the layers of the residual stream the cache lacks and stores one entry per layer, so a probe
at any other layer of the same split, position and input reads the cache without a forward.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator import CODE_VERSION
from evaluator.core.harvest import (
    HarvestConfig,
    Progress,
    _check_positions,
    _no_progress,
    harvest,
    render_prompts,
    run_inputs_check,
)
from evaluator.data.builders.stress import TAILS, content_end_text
from evaluator.data.registry.tasks import STRESS_CONTENT_END_SPLIT
from evaluator.errors import RegistryError, SplitHashMismatch

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.data.registry.load import Registry
    from evaluator.data.registry.tasks import TaskSpec

log = logging.getLogger(__name__)

#: Bumped whenever harvesting changes the vectors it produces (pooling, padding, truncation).
HARVESTER_VERSION = "harvest-1"


# --------------------------------------------------------------------------- split files


@dataclass(frozen=True)
class SplitRows:
    """The rows of one verified split file."""

    task_id: str
    split: str
    sha256: str  # re-computed from the bytes that were parsed
    ids: list[str]
    groups: list[str]
    labels: np.ndarray  # "n" int64, 1 = the task's positive meaning
    texts: list[str]
    #: each row's ``meta`` mapping ({} where a row has none)
    meta: list[dict] = field(default_factory=list)


def read_split(
    registry: Registry,
    task_id: str,
    split: str,
    *,
    path: str | Path | None = None,
    expected_sha256: str | None = None,
    model: str | None = None,
) -> SplitRows:
    """Read a split file, re-hashing exactly the bytes it parses.

    A tasks.yaml split is checked against its pinned hash and row count. An extra split that is
    not in tasks.yaml (a quarterly holdout minted from the pool) is given as ``path`` with the
    ``expected_sha256`` recorded when it was minted; ``split`` then only names it. ``model``: the
    base model whose own files an on-policy task is read from (required for such a task).
    Raises SplitHashMismatch on changed bytes, RegistryError on a missing file or wrong row count.
    """
    task = registry.task(task_id)
    expected_rows: int | None = None
    if path is None:
        found = task.split_spec(split, model)
        if found is None:
            splits = task.splits_for(model)
            where = f" for base model {model}" if task.on_policy else ""
            raise RegistryError(f"task {task_id} has no {split!r} split{where}; it has {', '.join(splits)}")
        spec = found
        path, expected_sha256, expected_rows = registry.root / spec.path, spec.sha256, spec.rows
    elif not expected_sha256:
        raise RegistryError(f"task {task_id}: split file {path} needs its expected SHA-256")
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RegistryError(f"task {task_id}: split file {path} is missing") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise SplitHashMismatch(str(path), str(expected_sha256), actual)
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    if expected_rows is not None and len(rows) != expected_rows:
        raise RegistryError(f"task {task_id}: {path} has {len(rows)} rows, tasks.yaml says {expected_rows}")
    if split == STRESS_CONTENT_END_SPLIT:
        rows, actual = _content_end_rows(rows, actual, where=str(path))
    return SplitRows(
        task_id=task_id,
        split=split,
        sha256=actual,
        ids=[str(r["id"]) for r in rows],
        groups=[str(r.get("group", r["id"])) for r in rows],
        labels=np.array([int(r["label"]) for r in rows], dtype=np.int64),
        texts=[str(r["text"]) for r in rows],
        meta=[r["meta"] if isinstance(r.get("meta"), dict) else {} for r in rows],
    )


#: the version of the content-end cut (in the derived split's hash, so in every cache key over it)
CONTENT_END_RULE = "content-end-v1"


def _content_end_rows(rows: list[dict], sha256: str, *, where: str) -> tuple[list[dict], str]:
    """The stress rows whose transform has a tail, each text cut where its content ends
    (evaluator.data.builders.stress.content_end_text), and the derived split's hash: the stress
    file's hash and the rule's version, so it never collides with a file's."""
    out = []
    for r in rows:
        transform = str((r.get("meta") or {}).get("stress", ""))
        if transform not in TAILS:
            continue
        try:
            out.append({**r, "text": content_end_text(str(r["text"]), transform)})
        except ValueError as exc:
            raise RegistryError(f"{where}: row {r['id']}: {exc}") from None
    return out, hashlib.sha256(f"{sha256}\n{CONTENT_END_RULE}".encode()).hexdigest()


# --------------------------------------------------------------------------- the cache


class ActivationCache:
    """Content-addressed store of activation matrices under ``<cache_dir>/activations/``.

    An entry is one safetensors file named by its key, holding named float32 arrays and a JSON
    metadata string (the key's parts, the example ids).
    """

    def __init__(self, cache_dir: str | Path):
        self.root = Path(cache_dir) / "activations"

    @staticmethod
    def make_key(parts: dict[str, Any]) -> str:
        """SHA-256 of the canonical JSON of the key parts."""
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.safetensors"

    def has(self, key: str) -> bool:
        """Whether an entry exists (not read: a damaged one is found, and replaced, on ``get``)."""
        return self.path(key).is_file()

    def get(self, key: str) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
        """(arrays, metadata), or None on a miss. A damaged entry counts as a miss."""
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        path = self.path(key)
        if not path.is_file():
            return None
        try:
            arrays = load_file(path)
            with open(path, "rb") as fh:
                header_len = int.from_bytes(fh.read(8), "little")
                header = json.loads(fh.read(header_len))
            meta = json.loads(header.get("__metadata__", {}).get("probebench", "{}"))
        except (SafetensorError, OSError, ValueError) as exc:
            log.warning("activation cache entry %s is unreadable (%s); treating as a miss", path, exc)
            return None
        return arrays, meta

    def put(self, key: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
        """Write an entry atomically (temporary file in the same directory, fsync, rename)."""
        from safetensors.numpy import save_file

        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            save_file(
                {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items()},
                str(tmp),
                metadata={"probebench": json.dumps(meta, sort_keys=True)},
            )
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        return path


@dataclass
class SplitActivations:
    """Activations of one split at one layer/position for one input kind.

    ``X`` is what the probe reads: φ(x) for ``single``, φ(x⁺) − φ(x⁻) for ``contrast_pair``
    (then ``X_pos``/``X_neg`` hold the two sides).
    """

    task_id: str
    split: str
    split_sha256: str
    model_id: str
    layer: int
    position: str
    input_kind: str
    ids: list[str]
    groups: list[str]
    labels: np.ndarray  # "n"
    X: np.ndarray  # "n d_model" float32
    cache_key: str
    cache_hit: bool
    seconds: float
    X_pos: np.ndarray | None = None  # "n d_model", contrast_pair only
    X_neg: np.ndarray | None = None
    key_parts: dict[str, Any] = field(default_factory=dict)


def cache_key_parts(
    lm: LoadedModel,
    task: TaskSpec,
    *,
    split_sha256: str,
    layer: int,
    position: str,
    input_kind: str,
    config: HarvestConfig,
) -> dict[str, Any]:
    """Everything that determines the vectors of one cache entry."""
    return {
        "weights_sha256": lm.weights_sha256,
        "tokenizer_sha256": lm.tokenizer_sha256,
        "dtype": lm.dtype_name,
        "layer": layer,
        "position": position,
        "input": input_kind,
        "template_sha256": task.template_hash(input_kind),
        "split_sha256": split_sha256,
        "max_length": min(config.max_length, lm.max_length),
        "harvester": f"{CODE_VERSION}/{HARVESTER_VERSION}",
    }


def residual_layers(lm: LoadedModel) -> list[int]:
    """Every layer a probe on ``lm`` may read: 0 (the embedding output) to ``n_layers``."""
    return list(range(lm.n_layers + 1))


@dataclass(frozen=True)
class _Entry:
    key: str
    parts: dict[str, Any]
    arrays: dict[str, np.ndarray]
    hit: bool


def _through_cache(
    lm: LoadedModel,
    prompts: Callable[[], list[str]],
    *,
    layers: Sequence[int],
    position: str,
    parts_of: Callable[[int], dict[str, Any]],
    pack: Callable[[np.ndarray], dict[str, np.ndarray]],
    accept: Callable[[dict[str, Any]], bool],
    meta: dict[str, Any],
    cache: ActivationCache | None,
    config: HarvestConfig,
    progress: Progress,
    all_layers: bool,
) -> dict[int, _Entry]:
    """{layer: entry} for ``layers``: read from the cache, or harvested in one pass and stored.

    A miss harvests, in the same forward, every layer of the residual stream the cache does not
    hold yet (``all_layers``, with a cache): one forward over a prompt list then serves a probe
    at any layer later. The entries stay one per layer under the same content keys, so an entry
    written by a one-layer harvest is read as it was and a read costs one layer's file.
    ``accept(metadata)`` rejects a hit whose rows are not the ones asked for.
    """
    result: dict[int, _Entry] = {}
    missing: dict[int, tuple[str, dict[str, Any]]] = {}
    for layer in sorted(set(layers)):
        parts = parts_of(layer)
        key = ActivationCache.make_key(parts)
        hit = cache.get(key) if cache is not None else None
        if hit is not None and accept(hit[1]):
            result[layer] = _Entry(key, parts, hit[0], True)
        else:
            missing[layer] = (key, parts)
    if not missing:
        return result
    todo = dict(missing)
    if cache is not None and all_layers:
        for layer in residual_layers(lm):
            if layer not in todo and layer not in result:
                parts = parts_of(layer)
                key = ActivationCache.make_key(parts)
                if not cache.has(key):
                    todo[layer] = (key, parts)
    harvested = harvest(
        lm, prompts(), layers=sorted(todo), positions=[position], config=config, progress=progress
    )
    for layer, (key, parts) in todo.items():
        arrays = pack(harvested.pop((layer, position)))
        if cache is not None:
            cache.put(key, arrays, meta | {"key": parts})
        if layer in missing:
            result[layer] = _Entry(key, parts, arrays, False)
    return result


def split_activations(
    lm: LoadedModel,
    registry: Registry,
    task_id: str,
    split: str,
    *,
    layers: Sequence[int],
    position: str,
    input_kind: str = "single",
    cache: ActivationCache | None = None,
    config: HarvestConfig | None = None,
    progress: Progress | None = None,
    split_file: str | Path | None = None,
    split_sha256: str | None = None,
    all_layers: bool = True,
) -> dict[int, SplitActivations]:
    """Activations of a verified split at several layers: {layer: SplitActivations}.

    Layers found in the cache cost a file read; the missing ones are harvested together in one
    pass over the split and then stored. With a cache and ``all_layers`` (the default), that
    pass keeps every layer of the model (:func:`residual_layers`) the cache lacks, so a later
    probe at another layer of the same split, position and input reads the cache without a
    forward; ``all_layers=False`` stops the forward at the deepest missing layer (the vectors are
    the same either way). ``split_file``/``split_sha256``: a split outside tasks.yaml (a minted
    holdout), see read_split.
    """
    config = config or HarvestConfig()
    progress = progress or _no_progress
    run_inputs_check(
        registry,
        task_id,
        split if split_file is None else None,
        model_id=lm.id,
        n_layers=lm.n_layers,
        layers=layers,
        position=position,
        input_kind=input_kind,
    )
    start = time.perf_counter()
    rows = read_split(registry, task_id, split, path=split_file, expected_sha256=split_sha256, model=lm.id)
    task = registry.task(task_id)
    n = len(rows.ids)

    def parts_of(layer: int) -> dict[str, Any]:
        return cache_key_parts(
            lm,
            task,
            split_sha256=rows.sha256,
            layer=layer,
            position=position,
            input_kind=input_kind,
            config=config,
        )

    def pack(matrix: np.ndarray) -> dict[str, np.ndarray]:
        return {"X": matrix} if input_kind == "single" else {"X_pos": matrix[:n], "X_neg": matrix[n:]}

    entries = _through_cache(
        lm,
        lambda: render_prompts(task, rows.texts, input_kind),
        layers=layers,
        position=position,
        parts_of=parts_of,
        pack=pack,
        accept=lambda meta: meta.get("ids") == rows.ids,
        meta={"ids": rows.ids, "task": task_id, "split": split},
        cache=cache,
        config=config,
        progress=progress,
        all_layers=all_layers,
    )
    progress(1.0, "harvest")
    return {
        layer: _package(rows, lm, layer, position, input_kind, e.arrays, e.key, e.parts, e.hit, start)
        for layer, e in entries.items()
    }


def prompts_key_parts(
    lm: LoadedModel, prompts: Sequence[str], *, layer: int, position: str, config: HarvestConfig
) -> dict[str, Any]:
    """The key of an entry harvested from a list of rendered prompts that is not a split (the
    word ablations of cross-model transfer): the prompts' own hash stands for split and template."""
    return {
        "weights_sha256": lm.weights_sha256,
        "tokenizer_sha256": lm.tokenizer_sha256,
        "dtype": lm.dtype_name,
        "layer": layer,
        "position": position,
        "prompts_sha256": hashlib.sha256(json.dumps(list(prompts)).encode()).hexdigest(),
        "n_prompts": len(prompts),
        "max_length": min(config.max_length, lm.max_length),
        "harvester": f"{CODE_VERSION}/{HARVESTER_VERSION}",
    }


def prompt_activations(
    lm: LoadedModel,
    prompts: Sequence[str],
    *,
    layer: int,
    position: str,
    cache: ActivationCache | None,
    config: HarvestConfig | None = None,
    progress: Progress | None = None,
    all_layers: bool = True,
) -> tuple[np.ndarray, str, bool]:
    """("n d_model" float32, cache key, hit) of rendered ``prompts`` at one layer, through the
    cache as :func:`split_activations` (a miss keeps every layer the cache lacks)."""
    config = config or HarvestConfig()
    progress = progress or _no_progress
    _check_positions([position])
    prompts = list(prompts)
    entries = _through_cache(
        lm,
        lambda: prompts,
        layers=[layer],
        position=position,
        parts_of=lambda k: prompts_key_parts(lm, prompts, layer=k, position=position, config=config),
        pack=lambda matrix: {"X": matrix},
        accept=lambda meta: meta.get("n_prompts") == len(prompts),
        meta={"n_prompts": len(prompts)},
        cache=cache,
        config=config,
        progress=progress,
        all_layers=all_layers,
    )
    progress(1.0, "harvest")
    entry = entries[layer]
    return entry.arrays["X"], entry.key, entry.hit


def _package(
    rows: SplitRows,
    lm: LoadedModel,
    layer: int,
    position: str,
    input_kind: str,
    arrays: dict[str, np.ndarray],
    key: str,
    parts: dict[str, Any],
    hit: bool,
    start: float,
) -> SplitActivations:
    if input_kind == "single":
        X, X_pos, X_neg = arrays["X"], None, None
    else:
        X_pos, X_neg = arrays["X_pos"], arrays["X_neg"]
        X = X_pos - X_neg
    return SplitActivations(
        task_id=rows.task_id,
        split=rows.split,
        split_sha256=rows.sha256,
        model_id=lm.id,
        layer=layer,
        position=position,
        input_kind=input_kind,
        ids=rows.ids,
        groups=rows.groups,
        labels=rows.labels,
        X=X,
        X_pos=X_pos,
        X_neg=X_neg,
        cache_key=key,
        cache_hit=hit,
        seconds=time.perf_counter() - start,
        key_parts=parts,
    )
