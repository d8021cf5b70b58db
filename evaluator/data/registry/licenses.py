"""The licenses (registry/licenses.yaml): each license's score, read and validated."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evaluator.data.registry.files import read_yaml, require
from evaluator.errors import RegistryError


@dataclass(frozen=True)
class LicenseSpec:
    id: str
    name: str
    score: float


def load_licenses(path: Path) -> dict[str, LicenseSpec]:
    data = read_yaml(path) or {}
    out: dict[str, LicenseSpec] = {}
    for i, entry in enumerate(data.get("licenses") or []):
        require(entry, ("id", "score"), f"{path}: licenses[{i}]")
        score = entry["score"]
        if not isinstance(score, (int, float)) or not 0.2 <= score <= 1.0:
            raise RegistryError(f"{path}: license {entry['id']}: score must be in [0.2, 1.0], got {score!r}")
        out[entry["id"]] = LicenseSpec(entry["id"], entry.get("name", entry["id"]), float(score))
    if not out:
        raise RegistryError(f"{path}: no licenses defined")
    return out
