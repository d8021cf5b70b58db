"""``--check``: a freshly trained reference probe compared with the committed artifact (same layer,
same tensors, direction cosine and max abs difference within tolerance)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluator.commands.reference_probes.training import TrainedReference
from evaluator.core.probes import Probe, ProbeMetadata, tensors_kind
from evaluator.metrics.results import fields_dict

#: --check: a retrained artifact matches the committed one when its direction has at least this
#: cosine with the committed one and every tensor is within atol + rtol·max|tensor|
CHECK_MIN_COSINE = 0.999
CHECK_RTOL = 1e-3
CHECK_ATOL = 1e-5


@dataclass
class CheckResult:
    slug: str
    ok: bool
    committed_layer: int | None
    retrained_layer: int
    cosine: float | None
    max_abs_diff: float | None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:

        return fields_dict(self)


def compare_artifacts(
    slug: str, committed: dict[str, np.ndarray], committed_meta: dict[str, Any], trained: TrainedReference
) -> CheckResult:
    """Compare a retrained probe with the committed one (layer, recipe, tensors)."""

    problems: list[str] = []
    layer = committed_meta.get("layer")
    if layer != trained.recipe.layer:
        problems.append(f"layer: committed {layer}, the sweep now chooses {trained.recipe.layer}")
    if committed_meta.get("recipe") != trained.recipe.to_dict():
        problems.append("recipe in probe.json differs from the manifest's recipe at the chosen layer")
    if sorted(committed) != sorted(trained.tensors):
        problems.append(f"tensor names: committed {sorted(committed)}, retrained {sorted(trained.tensors)}")
    cosine = max_abs = None
    if not problems:
        diffs = []
        for name, new in trained.tensors.items():
            old = np.asarray(committed[name], dtype=np.float64)
            new = np.asarray(new, dtype=np.float64)
            if old.size == new.size == 1:  # a scalar bias is stored as shape [1] by save_probe
                old, new = old.reshape(1), new.reshape(1)
            if old.shape != new.shape:
                problems.append(f"tensor {name}: shape {old.shape} vs {new.shape}")
                continue
            diff = float(np.abs(old - new).max()) if old.size else 0.0
            diffs.append(diff)
            bound = CHECK_ATOL + CHECK_RTOL * float(np.abs(old).max() if old.size else 0.0)
            if diff > bound:
                problems.append(f"tensor {name}: max abs diff {diff:.3g} > {bound:.3g}")
        max_abs = max(diffs) if diffs else 0.0
        meta = ProbeMetadata.from_dict(committed_meta)

        def direction(tensors: dict[str, np.ndarray]) -> np.ndarray | None:
            arrays = {k: np.asarray(v, dtype=np.float64) for k, v in tensors.items()}
            return Probe(metadata=meta, tensors=arrays, kind=tensors_kind(arrays)).direction()

        a, b = direction(committed), direction(trained.tensors)
        if a is not None and b is not None:
            cosine = float(a @ b / ((np.linalg.norm(a) * np.linalg.norm(b)) or 1.0))
            if cosine < CHECK_MIN_COSINE:
                problems.append(f"direction cosine {cosine:.5f} < {CHECK_MIN_COSINE}")
    return CheckResult(slug, not problems, layer, trained.recipe.layer, cosine, max_abs, problems)
