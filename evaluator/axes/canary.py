"""The canary: a few committed rows of a reference probe, scored again where numbers are measured.

``registry/canary.json`` lists, per base model, one reference probe (its artifact and SHA-256),
a task and eight rows of its test split (four per label), each with the score s(x) it got when the
file was written (``python -m evaluator canary --write``: the real model under the measurement
protocol, never values typed by hand). :func:`canary_check` harvests those rows again with the
model as it is loaded here, at the probe's layer and position, scores them and compares every row
with its expected score within the protocol's per-example tolerance,
``|Δs| ≤ score_atol + score_rtol · max|s|`` (the bound two environments of the protocol may
differ by). The rows are harvested afresh, never read from the activation cache: a cached vector
would hide the very numerics the canary is there to test.

A canary whose inputs moved (another protocol, model weights, artifact, split file or probe
layer) is stale: its verdict says so and fails too, since its expected values no longer describe
what a run would compute. A worker runs the check before it takes any run (leaderboard.tasks).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.core.activations import SplitRows, read_split
from evaluator.core.harvest import HarvestConfig, harvest, render_prompts
from evaluator.core.models import MissingModelPackage
from evaluator.core.probes import load_probe
from evaluator.data.registry.files import sha256_file
from evaluator.errors import EvaluatorError, InfrastructureError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.core.probes import Probe
    from evaluator.data.registry.load import Registry
    from evaluator.data.registry.tasks import TaskSpec

#: where the canary lives, from the registry root
CANARY_FILE = Path("registry") / "canary.json"
CANARY_VERSION = 1
#: rows of each label in a model's canary
ROWS_PER_LABEL = 4
#: the split the rows come from
CANARY_SPLIT = "test"
#: the rows' order key: SHA-256 of this, the task and the row id (the first of each label are taken)
ROW_SEED = "canary-v1"


@dataclass(frozen=True)
class CanaryRow:
    id: str
    label: int
    expected: float  # s(x) when the canary was written


@dataclass(frozen=True)
class CanaryEntry:
    """One base model's canary: the probe, where its rows come from, the expected scores."""

    model: str
    weights_sha256: str
    probe: str  # the reference probe's slug
    artifact: str  # the probe's directory, from the registry root
    artifact_sha256: str  # of its probe.safetensors
    layer: int
    position: str
    input: str
    task: str
    split: str
    split_sha256: str
    rows: tuple[CanaryRow, ...]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rows"] = [asdict(r) for r in self.rows]
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> CanaryEntry:
        keys = [f for f in cls.__dataclass_fields__ if f != "rows"]
        if not isinstance(data, dict) or any(k not in data for k in [*keys, "rows"]):
            raise EvaluatorError(f"{where}: an entry needs {', '.join([*keys, 'rows'])}")
        rows = data["rows"]
        if not isinstance(rows, list) or not rows:
            raise EvaluatorError(f"{where}: {data['model']}: rows must be a non-empty list")
        parsed = []
        for i, r in enumerate(rows):
            ok = isinstance(r, dict) and isinstance(r.get("id"), str) and r.get("label") in (0, 1)
            expected = r.get("expected") if isinstance(r, dict) else None
            if not ok or not isinstance(expected, (int, float)) or not math.isfinite(expected):
                raise EvaluatorError(
                    f"{where}: {data['model']}: rows[{i}] needs an id, a label 0/1 and a finite expected score"
                )
            parsed.append(CanaryRow(id=r["id"], label=int(r["label"]), expected=float(expected)))
        values = {k: data[k] for k in keys}
        values["layer"] = int(values["layer"])
        return cls(**values, rows=tuple(parsed))


@dataclass(frozen=True)
class Canary:
    """The whole canary file: the protocol it was measured under and one entry per base model."""

    protocol: str
    entries: tuple[CanaryEntry, ...]
    #: where the expected values were measured (evaluator.core.environment), for the record
    environment: dict[str, Any] = field(default_factory=dict)

    def entry(self, model_id: str) -> CanaryEntry | None:
        return next((e for e in self.entries if e.model == model_id), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CANARY_VERSION,
            "protocol": self.protocol,
            "written_by": "python -m evaluator canary --write",
            "environment": self.environment,
            "models": [e.to_dict() for e in self.entries],
        }


def canary_path(root: str | Path) -> Path:
    return Path(root) / CANARY_FILE


def canary_read(path: str | Path) -> Canary:
    """The canary file, validated; EvaluatorError naming the file when it is missing or malformed."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvaluatorError(f"{path}: no canary file (python -m evaluator canary --write)") from None
    except json.JSONDecodeError as exc:
        raise EvaluatorError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != CANARY_VERSION:
        raise EvaluatorError(f"{path}: expected a canary file of version {CANARY_VERSION}")
    if not isinstance(data.get("protocol"), str) or not isinstance(data.get("models"), list):
        raise EvaluatorError(f"{path}: needs a protocol id and a list of models")
    entries = tuple(CanaryEntry.from_dict(e, str(path)) for e in data["models"])
    env = data.get("environment")
    return Canary(
        protocol=data["protocol"], entries=entries, environment=env if isinstance(env, dict) else {}
    )


def canary_write(path: str | Path, canary: Canary) -> Path:
    path = Path(path)
    text = json.dumps(canary.to_dict(), indent=2, ensure_ascii=False) + "\n"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


# --------------------------------------------------------------------------- the rows


def rows_choose(rows: SplitRows, per_label: int = ROWS_PER_LABEL) -> list[int]:
    """The indices of the canary rows of a split: per label, the first ``per_label`` rows ranked by
    SHA-256 of (ROW_SEED, task, row id), returned in the split's order."""

    def rank(i: int) -> str:
        return hashlib.sha256(f"{ROW_SEED}/{rows.task_id}/{rows.ids[i]}".encode()).hexdigest()

    chosen: list[int] = []
    for label in (1, 0):
        pool = sorted((i for i in range(len(rows.ids)) if int(rows.labels[i]) == label), key=rank)
        if len(pool) < per_label:
            raise EvaluatorError(
                f"task {rows.task_id} {rows.split}: {len(pool)} rows of label {label}, the canary needs {per_label}"
            )
        chosen += pool[:per_label]
    return sorted(chosen)


def rows_scores(
    lm: LoadedModel,
    probe: Probe,
    task: TaskSpec,
    texts: Sequence[str],
    *,
    config: HarvestConfig,
) -> np.ndarray:
    """s(x) of ``texts``: their prompts harvested now (no cache) at the probe's layer and position,
    φ(x⁺) − φ(x⁻) for a contrast pair, scored by the probe (float64)."""
    meta = probe.metadata
    prompts = render_prompts(task, texts, meta.input)
    X = harvest(lm, prompts, layers=[meta.layer], positions=[meta.position], config=config)[
        (meta.layer, meta.position)
    ]
    if meta.input == "contrast_pair":
        X = X[: len(texts)] - X[len(texts) :]
    return probe.score(X)


def canary_measure(
    lm: LoadedModel,
    registry: Registry,
    probe_dir: str,
    *,
    slug: str,
    config: HarvestConfig | None = None,
) -> CanaryEntry:
    """A model's canary entry, measured now: the reference probe at ``probe_dir`` (from the
    registry root) on the canary rows of its recipe's task (what ``canary --write`` records)."""
    probe = load_probe(registry.root / probe_dir, registry=registry)
    meta = probe.metadata
    if meta.base_model != lm.id:
        raise EvaluatorError(f"canary: {slug} reads {meta.base_model}, not {lm.id}")
    task_id = (meta.recipe or {}).get("task") or next(iter(meta.trained_on or []), None)
    if not task_id:
        raise EvaluatorError(f"canary: {slug} names no task (no recipe, no trained_on)")
    rows = read_split(registry, task_id, CANARY_SPLIT, model=lm.id)
    picked = rows_choose(rows)
    config = config or HarvestConfig.from_protocol(registry.protocol())
    scores = rows_scores(lm, probe, registry.task(task_id), [rows.texts[i] for i in picked], config=config)
    return CanaryEntry(
        model=lm.id,
        weights_sha256=lm.weights_sha256,
        probe=slug,
        artifact=str(probe_dir),
        artifact_sha256=probe.sha256,
        layer=meta.layer,
        position=meta.position,
        input=meta.input,
        task=task_id,
        split=CANARY_SPLIT,
        split_sha256=rows.sha256,
        rows=tuple(
            CanaryRow(id=rows.ids[i], label=int(rows.labels[i]), expected=float(s))
            for i, s in zip(picked, scores, strict=True)
        ),
    )


# --------------------------------------------------------------------------- the check

#: a verdict's status; the first two refuse a worker (its numbers, or the canary, cannot be trusted)
AGREE, DIFFER, STALE, UNAVAILABLE, UNCHECKED = "agree", "differ", "stale", "unavailable", "unchecked"
REFUSING = (DIFFER, STALE)


@dataclass
class CanaryVerdict:
    """One model's canary: ``status`` (AGREE, DIFFER, STALE, UNAVAILABLE: the model could not be
    loaded here, UNCHECKED: the canary file has no entry for it), the reason in one line, and per
    row the expected and the measured score, their difference (None where the score is not a
    number) and the protocol's tolerance."""

    model: str
    status: str
    reason: str = ""
    probe: str = ""
    task: str = ""
    protocol: str = ""
    tolerance: float | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0  # the check: the probe and the rows read, harvested and scored
    load_seconds: float = 0.0  # loading the model before it (0 when it was loaded already)

    @property
    def refuses(self) -> bool:
        return self.status in REFUSING

    @property
    def worst(self) -> dict[str, Any] | None:
        return max(self.rows, key=lambda r: math.inf if r["diff"] is None else r["diff"], default=None)

    def line(self) -> str:
        """The verdict in one line, naming model, probe, row, expected, got, difference, tolerance."""
        head = f"{self.model}: {self.status}"
        w = self.worst
        if self.status not in (AGREE, DIFFER) or w is None or self.tolerance is None:
            return f"{head}: {self.reason}" if self.reason else head
        beyond = sum(not r["within"] for r in self.rows)
        which = (
            "worst"
            if self.status == AGREE
            else f"{beyond} of {len(self.rows)} rows beyond the tolerance, worst"
        )
        return (
            f"{head}: probe {self.probe} on {self.task}/{CANARY_SPLIT} ({len(self.rows)} rows,"
            f" protocol {self.protocol}); {which} row {w['id']} (label {w['label']}):"
            f" expected {_num(w['expected'])}, got {_num(w['got'])}, |Δ| {_num(w['diff'], 3)}"
            f" {'≤' if w['within'] else '>'} tolerance {self.tolerance:.3g}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"refuses": self.refuses, "line": self.line()}


def _num(value: float | None, digits: int = 6) -> str:
    return "not a number" if value is None else f"{value:.{digits}g}"


def _inputs(
    entry: CanaryEntry, lm: LoadedModel, registry: Registry, *, protocol_id: str
) -> tuple[str, Probe | None, list[str]]:
    """(why the entry no longer describes what a run would compute here, "" when it does; the
    probe; the texts of its rows in the entry's order)."""
    current = registry.protocol().id
    if protocol_id != current:
        return f"measured under protocol {protocol_id}, the registry's protocol is {current}", None, []
    if lm.weights_sha256 != entry.weights_sha256:
        return (
            f"measured on weights {entry.weights_sha256[:12]}, the registry pins {lm.weights_sha256[:12]}",
            None,
            [],
        )
    try:
        sha = sha256_file(registry.root / entry.artifact / "probe.safetensors")
    except FileNotFoundError:
        return f"the artifact {entry.artifact}/probe.safetensors is missing", None, []
    if sha != entry.artifact_sha256:
        return (
            f"the artifact {entry.artifact} hashes to {sha[:12]}, the canary names {entry.artifact_sha256[:12]}",
            None,
            [],
        )
    probe = load_probe(registry.root / entry.artifact, registry=registry)
    meta = probe.metadata
    if (meta.base_model, meta.layer, meta.position, meta.input) != (
        entry.model,
        entry.layer,
        entry.position,
        entry.input,
    ):
        return (
            f"the probe {entry.probe} now reads {meta.base_model} layer {meta.layer}, {meta.position}, {meta.input}",
            None,
            [],
        )
    spec = registry.task(entry.task).split_spec(entry.split, entry.model)
    if spec is None or spec.sha256 != entry.split_sha256:
        return f"the split {entry.task}/{entry.split} changed since the canary was written", None, []
    rows = read_split(registry, entry.task, entry.split, model=entry.model)
    where = {row_id: i for i, row_id in enumerate(rows.ids)}
    for r in entry.rows:
        if r.id not in where or int(rows.labels[where[r.id]]) != r.label:
            return f"row {r.id} is not in {entry.task}/{entry.split} with label {r.label}", None, []
    return "", probe, [rows.texts[where[r.id]] for r in entry.rows]


def canary_check(
    entry: CanaryEntry,
    lm: LoadedModel,
    registry: Registry,
    *,
    protocol_id: str,
    config: HarvestConfig | None = None,
) -> CanaryVerdict:
    """Score the entry's rows with ``lm`` as it is loaded and compare each with its expected score
    within the protocol's per-example tolerance (``protocol_id``: the canary file's protocol)."""
    if lm.id != entry.model:
        raise EvaluatorError(f"canary: the entry of {entry.model} checked with {lm.id}")
    start = time.perf_counter()
    verdict = CanaryVerdict(
        model=entry.model, status=STALE, probe=entry.probe, task=entry.task, protocol=protocol_id
    )
    reason, probe, texts = _inputs(entry, lm, registry, protocol_id=protocol_id)
    if probe is None:
        verdict.reason = f"{reason}; write the canary again (python -m evaluator canary --write)"
        verdict.seconds = time.perf_counter() - start
        return verdict
    config = config or HarvestConfig.from_protocol(registry.protocol())
    got = rows_scores(lm, probe, registry.task(entry.task), texts, config=config)
    expected = np.array([r.expected for r in entry.rows])
    tolerance = registry.protocol().tolerances.score_bound(float(np.abs(expected).max()))
    verdict.tolerance = tolerance
    for r, g in zip(entry.rows, got, strict=True):
        finite = math.isfinite(float(g))
        diff = abs(float(g) - r.expected) if finite else None
        verdict.rows.append(
            {
                "id": r.id,
                "label": r.label,
                "expected": r.expected,
                "got": float(g) if finite else None,
                "diff": diff,
                "within": diff is not None and diff <= tolerance,
            }
        )
    verdict.status = AGREE if all(r["within"] for r in verdict.rows) else DIFFER
    verdict.seconds = time.perf_counter() - start
    return verdict


def canary_verdicts(
    canary: Canary,
    registry: Registry,
    models: Sequence[str],
    *,
    load: Callable[[str], LoadedModel],
) -> list[CanaryVerdict]:
    """Each model's verdict, the model loaded by ``load`` (the caller's normal way: the worker's
    kept models, or the command line's). A model the canary has no entry for is UNCHECKED; one
    whose package is not installed here is UNAVAILABLE (no run can use it either); one that fails
    to load otherwise (weights that do not hash to the registry's) differs."""
    out = []
    for model_id in models:
        entry = canary.entry(model_id)
        if entry is None:
            out.append(
                CanaryVerdict(model=model_id, status=UNCHECKED, reason="the canary has no entry for it")
            )
            continue

        def failed(status: str, reason: str, entry: CanaryEntry = entry) -> CanaryVerdict:
            return CanaryVerdict(
                model=entry.model,
                status=status,
                reason=reason,
                probe=entry.probe,
                task=entry.task,
                protocol=canary.protocol,
            )

        start = time.perf_counter()
        try:
            lm = load(model_id)
        except MissingModelPackage as exc:
            out.append(failed(UNAVAILABLE, str(exc)))
            continue
        except InfrastructureError as exc:
            out.append(failed(DIFFER, f"not loaded: {exc}"))
            continue
        loaded = time.perf_counter() - start
        try:
            verdict = canary_check(entry, lm, registry, protocol_id=canary.protocol)
        except EvaluatorError as exc:  # a split file or artifact that no longer reads
            verdict = failed(STALE, f"not checked: {exc}")
        verdict.load_seconds = loaded
        out.append(verdict)
    return out
