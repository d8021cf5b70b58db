"""Evaluating a reference probe and its files: the evaluation with the base model's eval-awareness
reference, the artifact and the ``reference.json`` sidecar written and read."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator import CODE_VERSION
from evaluator.axes.evaluate import evaluate_probe
from evaluator.commands.reference_probes.sweep import SweepResult
from evaluator.commands.reference_probes.training import TrainedReference, build_metadata
from evaluator.core.probes import load_probe, save_probe
from evaluator.errors import EvaluatorError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.harvest import HarvestConfig, Progress
    from evaluator.data.registry.load import Registry

SIDECAR = "reference.json"
#: the per-task numbers recorded in reference.json (and re-checked by the tests)
RECORDED_TASK_METRICS = (
    "auroc",
    "auroc_ci",
    "auroc_ea",
    "auroc_ea_status",
    "auroc_ds",
    "ece",
    "brier",
    "n_test",
)
DECLARED = ("auroc", "auroc_ea", "auroc_ds", "ece", "brier")


def environment() -> dict[str, Any]:
    """Library versions recorded beside the numbers."""
    import sklearn
    import torch
    import transformers

    return {
        "code_version": CODE_VERSION,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scikit_learn": sklearn.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def evaluate_reference(
    directory: Path,
    registry: Registry,
    *,
    cache_dir: str | Path,
    reference_probe: Path | None,
    device: str | None,
    dtype: str | None,
    config: HarvestConfig | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """evaluate_probe on the probe's category tasks (test, distshift, train), with the base
    model's eval-awareness reference probe, the reproduction check, no cross-model transfer."""

    result = evaluate_probe(
        directory,
        registry=registry,
        cache_dir=cache_dir,
        reference_probe=reference_probe,
        compute_transfer=False,
        compute_reproduction=True,
        latency_reps=100,
        device=device,
        dtype=dtype,
        harvest_config=config,
        progress=progress,
    ).to_dict()
    tasks = {
        task_id: {k: t["metrics"][k] for k in RECORDED_TASK_METRICS}
        | {
            "random_direction_auroc": t["baselines"]["random_direction_auroc"],
            "diff_of_means_auroc": t["baselines"]["diff_of_means_auroc"],
            "split_sha256": {s: r["split_sha256"] for s, r in t["runs"].items()},
        }
        for task_id, t in result["tasks"].items()
    }
    aggregate = {
        k: result["aggregate"][k] for k in ("auroc", "auroc_ea", "auroc_ds", "ece", "brier", "n_test")
    }
    repro = result.get("reproduction") or {}
    return {
        "tool": "evaluator.evaluate.evaluate_probe (compute_transfer=False)",
        "reference_probe": str(reference_probe.relative_to(registry.root)) if reference_probe else None,
        "reference_probe_sha256": result["config"].get("reference_probe_sha256"),
        "model": result["model"],
        "tasks": tasks,
        "aggregate": aggregate,
        "imputed": result["imputed"],
        "reproduction": {k: repro.get(k) for k in ("cosine", "auroc_diff", "reproduced")} if repro else None,
        "latency_ms": result["latency"]["probe_ms"] if isinstance(result.get("latency"), dict) else None,
    }


def declared_from(evaluation: dict[str, Any]) -> dict[str, float]:
    """declared_metrics for probe.json: the measured aggregate, rounded to 4 decimals."""
    agg = evaluation["aggregate"]
    return {k: round(float(agg[k]), 4) for k in DECLARED if agg.get(k) is not None}


def write_reference(
    trained: TrainedReference,
    registry: Registry,
    *,
    cache_dir: str | Path,
    reference_probe: Path | None,
    device: str | None,
    dtype: str | None,
    config: HarvestConfig | None = None,
) -> dict[str, Any]:
    """Write probe.safetensors + probe.json, evaluate, then add the declared metrics to
    probe.json and write reference.json. Returns the sidecar."""

    directory = trained.entry.directory(registry.root)
    save_probe(directory, trained.tensors, trained.metadata, artifact_metadata=trained.artifact_metadata)
    load_probe(directory, registry=registry)  # validates what was written
    evaluation = evaluate_reference(
        directory,
        registry,
        cache_dir=cache_dir,
        reference_probe=reference_probe,
        device=device,
        dtype=dtype,
        config=config,
    )
    metadata = build_metadata(
        trained.entry, trained.recipe, trained.sweep, registry, declared=declared_from(evaluation)
    )
    save_probe(directory, trained.tensors, metadata, artifact_metadata=trained.artifact_metadata)
    probe = load_probe(directory, registry=registry)
    sidecar = {
        "slug": trained.entry.slug,
        "role": trained.entry.role,
        "artifact_sha256": probe.sha256,
        ("layer_sweep" if isinstance(trained.sweep, SweepResult) else "selection"): trained.sweep.to_dict(),
        "train_auroc": trained.train_auroc,
        "evaluation": evaluation,
        "environment": environment(),
        "command": f"python -m evaluator reference-probes --only {trained.entry.slug}",
    }
    write_sidecar(directory, sidecar)
    return sidecar


def write_sidecar(directory: Path, sidecar: dict[str, Any]) -> None:
    (directory / SIDECAR).write_text(
        json.dumps(sidecar, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def read_sidecar(directory: Path) -> dict[str, Any]:
    """The recorded sweep and metrics of the probe in ``directory`` (reference.json)."""
    try:
        return json.loads((directory / SIDECAR).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvaluatorError(f"{directory / SIDECAR}: not found (train the probe first)") from None
