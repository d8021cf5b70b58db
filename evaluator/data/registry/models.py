"""The base models (registry/models.yaml): each model's pinned package, file and shape, read and
validated."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.data.registry.files import SHA256, read_yaml, require
from evaluator.errors import RegistryError


@dataclass(frozen=True)
class ModelSpec:
    id: str
    name: str
    family: str
    architecture: str
    n_layers: int
    d_model: int
    license: str
    package: str
    package_version: str
    file: str  # path inside the installed package (or the name of the file joined from parts)
    format: str  # "gguf" | "hf_dir"
    weights_sha256: str
    dtype: str = "float32"
    encoder: bool = False
    #: import name of the package (found without importing it); default: package with _ for -
    module: str = ""
    #: bf16 compute validated to give the same probe results as fp32 (used where bf16 is native)
    bf16_ok: bool = False
    #: the file is the raw chunks of these modules joined in order: each part distribution ships its
    #: chunk as the one file under ``<module>/data/``, read as data, never imported (every part is
    #: installed --no-deps at ``package_version``)
    parts: tuple[str, ...] = ()
    #: run only where the deployment names it (PROBEBENCH_MODELS): too big to load by default
    on_request: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def part_packages(self) -> tuple[str, ...]:
        """The PyPI names of the part wheels (module names with - for _)."""
        return tuple(m.replace("_", "-") for m in self.parts)


def load_models(path: Path) -> dict[str, ModelSpec]:
    data = read_yaml(path) or {}
    known = {f.name for f in dataclasses.fields(ModelSpec)} - {"extra"}
    required = (
        "id",
        "family",
        "architecture",
        "n_layers",
        "d_model",
        "license",
        "package",
        "package_version",
        "file",
        "format",
        "weights_sha256",
    )
    out: dict[str, ModelSpec] = {}
    for i, entry in enumerate(data.get("models") or []):
        require(entry, required, f"{path}: models[{i}]")
        sha = str(entry["weights_sha256"])
        if not SHA256.match(sha):
            raise RegistryError(f"{path}: model {entry['id']}: weights_sha256 must be 64 lowercase hex")
        if entry["format"] not in ("gguf", "hf_dir"):
            raise RegistryError(f"{path}: model {entry['id']}: format must be gguf or hf_dir")
        parts = entry.get("parts")
        if parts is not None:
            if (
                not isinstance(parts, list)
                or not parts
                or not all(isinstance(m, str) and m.isidentifier() for m in parts)
                or len(set(parts)) != len(parts)
            ):
                raise RegistryError(
                    f"{path}: model {entry['id']}: parts must be a list of distinct module names, in join order"
                )
            if entry["format"] != "gguf":
                raise RegistryError(f"{path}: model {entry['id']}: parts apply to a gguf file")
        if "assembled" in entry:
            raise RegistryError(
                f"{path}: model {entry['id']}: assembled is not accepted (it ran the package's own"
                " assembler): list the chunk modules under parts, in join order"
            )
        if not isinstance(entry.get("on_request", False), bool):
            raise RegistryError(f"{path}: model {entry['id']}: on_request must be true or false")
        kwargs = {k: v for k, v in entry.items() if k in known}
        if parts is not None:
            kwargs["parts"] = tuple(parts)
        kwargs.setdefault("name", entry["id"])
        kwargs["extra"] = {k: v for k, v in entry.items() if k not in known}
        out[entry["id"]] = ModelSpec(**kwargs)
    return out
