"""``canary``: check the committed canary (registry/canary.json) on this machine, or write it.

    python -m evaluator canary [--models ID,ID] [--json]
        each model's verdict: agree, or differ / stale with the row, expected, got, difference and
        tolerance; exit status 1 when any model differs or its canary is stale
    python -m evaluator canary --write [--models ID,ID]
        measure the expected scores with the real models under the protocol and write the file

The reference probe of a model's canary (``canary_probe``): among the manifest's reference probes
on the model that read one prompt, on a task whose splits are the same for every model (not
on-policy), the one at the deepest layer, so that the check runs the most of the model; ties by
slug. Its rows: ``evaluator.axes.canary.rows_choose`` (four of each label of the test split).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluator.axes.canary import (
    Canary,
    CanaryEntry,
    canary_measure,
    canary_path,
    canary_read,
    canary_verdicts,
    canary_write,
)
from evaluator.commands.base import cache_registry_json_args, default_cache_dir
from evaluator.commands.reference_probes.manifest import ReferenceEntry, load_manifest
from evaluator.data.registry.load import Registry, load_registry
from evaluator.errors import EvaluatorError, InfrastructureError


class CanaryResult(dict):
    """The command's JSON; ``exit_code`` 1 when a model's canary differs or is stale."""

    exit_code = 0


def canary_args(p: argparse.ArgumentParser) -> None:
    cache_registry_json_args(p)
    p.add_argument("--models", default=None, help="comma-separated base model ids (default: every model)")
    p.add_argument(
        "--canary-file", type=Path, default=None, help="the canary file (default: registry/canary.json)"
    )
    p.add_argument("--device", default=None, help="cpu, cuda, … (default: CUDA when available)")
    p.add_argument(
        "--write",
        action="store_true",
        help="measure the expected scores with the real models and write the canary file",
    )


def models_selected(registry: Registry, raw: str | None) -> list[str]:
    """The base models named by ``--models`` (every registry model when None), each checked."""
    if raw is None:
        return list(registry.models)
    names = [m.strip() for m in raw.split(",") if m.strip()]
    unknown = [m for m in names if m not in registry.models]
    if unknown or not names:
        raise EvaluatorError(
            f"--models {raw!r}: unknown base model(s) {', '.join(unknown) or '(none named)'};"
            f" known: {', '.join(registry.models)}"
        )
    return names


def canary_probe(
    registry: Registry, entries: Sequence[ReferenceEntry], model_id: str
) -> ReferenceEntry | None:
    """The reference probe a model's canary scores (the module's rule), or None when it has none."""
    candidates: list[tuple[int, str, ReferenceEntry]] = []
    for entry in entries:
        if entry.base_model != model_id:
            continue
        try:
            meta = json.loads((entry.directory(registry.root) / "probe.json").read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            continue
        task_id = (meta.get("recipe") or {}).get("task")
        if meta.get("input") != "single" or task_id not in registry.tasks:
            continue
        task = registry.task(task_id)
        if task.on_policy or task.split_spec("test", model_id) is None:
            continue
        candidates.append((-int(meta["layer"]), entry.slug, entry))
    return min(candidates, key=lambda c: c[:2])[2] if candidates else None


def _load(registry: Registry, cache_dir: Path, device: str | None):
    # imported when called: `python -m evaluator --help` never loads torch
    from evaluator.core.models import load_model

    def load(model_id: str):
        return load_model(
            model_id, registry=registry, cache_dir=cache_dir, device=device, protocol=registry.protocol()
        )

    return load


def canary_write_models(
    registry: Registry, models: Sequence[str], *, path: Path, cache_dir: Path, device: str | None
) -> CanaryResult:
    """Measure each model's canary entry and write the file; a model that cannot be loaded here
    (its package is not installed) keeps the entry it had, if any."""
    manifest = load_manifest(registry)
    previous = canary_read(path) if path.is_file() else None
    load = _load(registry, cache_dir, device)
    entries: dict[str, CanaryEntry] = {}
    if previous is not None and previous.protocol == registry.protocol().id:
        entries = {e.model: e for e in previous.entries}
    written: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    environment: dict[str, Any] = previous.environment if previous is not None else {}
    for model_id in models:
        ref = canary_probe(registry, manifest, model_id)
        if ref is None:
            skipped.append({"model": model_id, "reason": "no reference probe reading one prompt"})
            continue
        try:
            lm = load(model_id)
        except InfrastructureError as exc:
            kept = " (its previous entry is kept)" if model_id in entries else ""
            skipped.append({"model": model_id, "reason": f"{exc}{kept}"})
            continue
        print(f"canary: measuring {model_id} with {ref.slug}", file=sys.stderr)
        entry = canary_measure(lm, registry, ref.path, slug=ref.slug)
        entries[model_id] = entry
        environment = lm.environment()
        written.append({"model": model_id, "probe": entry.probe, "task": entry.task, "rows": len(entry.rows)})
    order = list(registry.models)
    canary = Canary(
        protocol=registry.protocol().id,
        entries=tuple(
            sorted(entries.values(), key=lambda e: order.index(e.model) if e.model in order else 99)
        ),
        environment=environment,
    )
    canary_write(path, canary)
    return CanaryResult(written=str(path), models=written, skipped=skipped)


def run_canary(args: argparse.Namespace) -> CanaryResult:
    registry = load_registry(args.registry)
    path = args.canary_file or canary_path(registry.root)
    cache_dir = args.cache_dir or default_cache_dir()
    if args.write:
        models = models_selected(registry, args.models)
        return canary_write_models(registry, models, path=path, cache_dir=cache_dir, device=args.device)
    canary = canary_read(path)
    models = models_selected(registry, args.models) if args.models else [e.model for e in canary.entries]
    verdicts = canary_verdicts(canary, registry, models, load=_load(registry, cache_dir, args.device))
    result = CanaryResult(
        canary=str(path),
        protocol=canary.protocol,
        agree=not any(v.refuses for v in verdicts),
        models=[v.to_dict() for v in verdicts],
    )
    result.exit_code = 0 if result["agree"] else 1
    return result


def canary_summary(result: object) -> str:
    if not isinstance(result, dict):
        return f"{result}\n"
    if "written" in result:
        lines = [f"wrote {result['written']}"]
        lines += [f"  {m['model']}: {m['probe']} on {m['task']}, {m['rows']} rows" for m in result["models"]]
        lines += [f"  {s['model']}: skipped: {s['reason']}" for s in result["skipped"]]
        return "\n".join(lines) + "\n"
    lines = [m["line"] for m in result["models"]]
    lines.append("canary: every model agrees" if result["agree"] else "canary: FAILED")
    return "\n".join(lines) + "\n"
