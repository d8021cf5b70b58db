"""Stale records: what a ``reference.json`` was measured with that has changed since
(``record_problems``), and ``reevaluate`` (measure the committed artifact again, no refit)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluator.commands.reference_probes.evaluation import (
    declared_from,
    environment,
    evaluate_reference,
    read_sidecar,
    write_sidecar,
)
from evaluator.commands.reference_probes.manifest import ReferenceEntry, ea_reference_for
from evaluator.core.probes import ARTIFACT_NAME, METADATA_NAME, load_probe
from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.errors import EvaluatorError, RegistryError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.data.registry.load import Registry


def _file_sha256(path: Path) -> str | None:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def record_problems(
    entry: ReferenceEntry, entries: Sequence[ReferenceEntry], registry: Registry
) -> list[str]:
    """Why ``entry``'s committed reference.json no longer describes what ``python -m evaluator
    evaluate`` would measure with its defaults today ([] when it is current). Reads files only."""

    directory = entry.directory(registry.root)
    try:
        sidecar = read_sidecar(directory)
    except EvaluatorError as exc:
        return [str(exc)]
    problems: list[str] = []
    artifact = _file_sha256(directory / ARTIFACT_NAME)
    if sidecar.get("artifact_sha256") != artifact:
        problems.append(f"artifact is {artifact}, the record says {sidecar.get('artifact_sha256')}")
    evaluation = sidecar.get("evaluation") or {}
    ea = ea_reference_for(entries, entry.base_model)
    want_ref = None if (ea is None or entry.role == EVAL_AWARENESS) else ea.path
    if evaluation.get("reference_probe") != want_ref:
        problems.append(
            f"auroc_ea was measured against {evaluation.get('reference_probe')}; the current"
            f" eval-awareness reference of {entry.base_model} is {want_ref}"
        )
    elif want_ref is not None:
        ref_sha = _file_sha256(registry.root / want_ref / ARTIFACT_NAME)
        if evaluation.get("reference_probe_sha256") != ref_sha:
            problems.append(f"{want_ref} has changed since auroc_ea was measured against it")
    model = registry.model(entry.base_model)
    if (evaluation.get("model") or {}).get("weights_sha256") != model.weights_sha256:
        problems.append(f"{entry.base_model}'s pinned weights have changed")
    tasks = evaluation.get("tasks") or {}
    if not tasks:
        problems.append("the record has no task measurements")
    for task_id, measured in tasks.items():
        try:
            task = registry.task(task_id)
        except RegistryError:
            problems.append(f"task {task_id} is no longer in tasks.yaml")
            continue
        pinned = task.splits_for(entry.base_model if task.on_policy else None)
        for split, sha in (measured.get("split_sha256") or {}).items():
            spec = pinned.get(split)
            if spec is None or spec.sha256 != sha:
                problems.append(f"{task_id}/{split} was measured on a split file that is no longer pinned")
    try:
        declared = json.loads((directory / METADATA_NAME).read_text(encoding="utf-8"))["declared_metrics"]
    except (FileNotFoundError, KeyError, ValueError):
        declared = None
    if evaluation.get("aggregate") and declared != declared_from(evaluation):
        problems.append("probe.json's declared_metrics are not the record's measured aggregate")
    return problems


def reevaluate(
    entry: ReferenceEntry,
    entries: Sequence[ReferenceEntry],
    registry: Registry,
    *,
    cache_dir: str | Path,
    device: str | None,
    dtype: str | None,
) -> dict[str, Any]:
    """Measure the committed artifact again (no refit) against the current eval-awareness
    reference, rewrite probe.json's declared metrics and reference.json's evaluation; the
    artifact's bytes, the layer sweep or selection and train_auroc are kept. Returns the sidecar."""

    directory = entry.directory(registry.root)
    sidecar = read_sidecar(directory)
    before = load_probe(directory, registry=registry).sha256
    ea = ea_reference_for(entries, entry.base_model)
    ref_dir = ea.directory(registry.root) if (ea is not None and entry.role != EVAL_AWARENESS) else None
    evaluation = evaluate_reference(
        directory, registry, cache_dir=cache_dir, reference_probe=ref_dir, device=device, dtype=dtype
    )
    meta_path = directory / METADATA_NAME
    metadata = json.loads(meta_path.read_text(encoding="utf-8"))
    metadata["declared_metrics"] = declared_from(evaluation)
    tmp = meta_path.with_name(f".{METADATA_NAME}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, meta_path)
    after = load_probe(directory, registry=registry)  # validates what was written
    if after.sha256 != before:
        raise EvaluatorError(f"{entry.slug}: the artifact changed while it was re-measured")
    sidecar |= {
        "artifact_sha256": after.sha256,
        "evaluation": evaluation,
        "environment": environment(),
        "command": f"python -m evaluator reference-probes --reevaluate --only {entry.slug}",
    }
    write_sidecar(directory, sidecar)
    return sidecar
