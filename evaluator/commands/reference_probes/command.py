"""The ``reference-probes`` command: its options, the cache directory, which probes, and the run
(retrain, ``--check``, ``--reevaluate``, ``--check-records``)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from evaluator.commands.base import default_cache_dir as cli_default
from evaluator.commands.reference_probes.check import compare_artifacts
from evaluator.commands.reference_probes.evaluation import write_reference
from evaluator.commands.reference_probes.manifest import ReferenceEntry, ea_reference_for, load_manifest
from evaluator.commands.reference_probes.stale import record_problems, reevaluate
from evaluator.commands.reference_probes.training import train_reference
from evaluator.core.activations import ActivationCache
from evaluator.core.probes import load_probe, save_probe
from evaluator.data.registry.load import load_registry
from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.errors import EvaluatorError, UnknownNameError

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see evaluator/commands/train_cli.py


def reference_probes_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", default=None, help="comma-separated slugs (default: every manifest entry)")
    p.add_argument("--check", action="store_true", help="retrain in memory and compare; write nothing")
    p.add_argument("--no-evaluate", action="store_true", help="write the artifacts, skip evaluate_probe")
    p.add_argument(
        "--reevaluate",
        action="store_true",
        help="keep the committed artifacts; measure them again and rewrite reference.json (no refit)",
    )
    p.add_argument(
        "--check-records",
        action="store_true",
        help="list every reference.json that is stale (no model is loaded); exit 1 if any",
    )
    p.add_argument(
        "--manifest", type=Path, default=None, help="default registry/reference_probes/manifest.yaml"
    )
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="model + activation cache (default $PROBEBENCH_CACHE_DIR, $PROBEBENCH_DATA_DIR/cache or ./var/cache)",
    )
    p.add_argument("--device", default="cpu", help="default cpu: the committed artifacts were made there")
    p.add_argument("--dtype", default="float32", choices=["auto", "float32", "bfloat16"])


def default_cache_dir() -> Path:
    """$PROBEBENCH_CACHE_DIR, else the CLI's default ($PROBEBENCH_DATA_DIR/cache or ./var/cache)."""
    env = os.environ.get("PROBEBENCH_CACHE_DIR")
    return Path(env) if env else cli_default()


def select(entries: list[ReferenceEntry], only: str | None) -> list[ReferenceEntry]:
    """The entries named in ``only`` (comma-separated slugs), in manifest order; all when empty."""
    if not only:
        return entries
    wanted = [s.strip() for s in only.split(",") if s.strip()]
    slugs = [e.slug for e in entries]
    for s in wanted:
        if s not in slugs:
            raise UnknownNameError("reference probe", s, slugs)
    return [e for e in entries if e.slug in wanted]


def run_reference_probes(args: argparse.Namespace) -> dict[str, Any]:
    """Retrain (and evaluate and write, or --check) the manifest's reference probes."""
    # imported when called: tests replace evaluator.core.models.load_model (no model may load)
    from evaluator.core.models import load_model

    reg = load_registry(args.registry)
    entries = load_manifest(reg, args.manifest)
    chosen = select(entries, args.only)
    cache_dir = args.cache_dir or default_cache_dir()
    if args.check_records:
        stale = {e.slug: p for e in chosen if (p := record_problems(e, entries, reg))}
        if stale:
            raise EvaluatorError(
                "stale reference records (python -m evaluator reference-probes --reevaluate --only SLUG):\n"
                + "\n".join(f"{slug}: {'; '.join(p)}" for slug, p in stale.items())
            )
        return {"check_records": True, "current": [e.slug for e in chosen]}
    if args.reevaluate:
        out = []
        for entry in chosen:
            start = time.perf_counter()
            sidecar = reevaluate(
                entry, entries, reg, cache_dir=cache_dir, device=args.device, dtype=args.dtype
            )
            out.append(
                {
                    "slug": entry.slug,
                    "aggregate": sidecar["evaluation"]["aggregate"],
                    "seconds": time.perf_counter() - start,
                }
            )
        return {"reevaluate": True, "probes": out}
    cache = ActivationCache(cache_dir)
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    for entry in chosen:
        start = time.perf_counter()
        lm = load_model(
            entry.base_model, registry=reg, cache_dir=cache_dir, device=args.device, dtype=args.dtype
        )
        trained = train_reference(entry, lm, reg, cache=cache)
        directory = entry.directory(reg.root)
        if args.check:
            committed = load_probe(directory, registry=reg)
            check = compare_artifacts(entry.slug, committed.tensors, committed.metadata.to_dict(), trained)
            if not check.ok:
                failures.append(f"{entry.slug}: {'; '.join(check.problems)}")
            results.append(check.to_dict())
            continue
        ea = ea_reference_for(entries, entry.base_model)
        ref_dir = ea.directory(reg.root) if (ea is not None and entry.role != EVAL_AWARENESS) else None
        if args.no_evaluate:
            save_probe(
                directory, trained.tensors, trained.metadata, artifact_metadata=trained.artifact_metadata
            )
            results.append(
                {"slug": entry.slug, "layer": trained.recipe.layer, "cv_auroc": trained.sweep.best}
            )
            continue
        sidecar = write_reference(
            trained, reg, cache_dir=cache_dir, reference_probe=ref_dir, device=args.device, dtype=args.dtype
        )
        results.append(
            {
                "slug": entry.slug,
                "base_model": entry.base_model,
                "task": entry.task,
                "method": trained.recipe.method,
                "layer": trained.recipe.layer,
                "cv_auroc": trained.sweep.best,
                "test_auroc": sidecar["evaluation"]["tasks"][entry.task]["auroc"],
                "aggregate": sidecar["evaluation"]["aggregate"],
                "seconds": time.perf_counter() - start,
            }
        )
    if failures:
        raise EvaluatorError("reference probes differ from the committed artifacts:\n" + "\n".join(failures))
    return {"check": bool(args.check), "probes": results}
