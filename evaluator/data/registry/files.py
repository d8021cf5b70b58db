"""Reading the registry's files: the project root, YAML read with a :class:`RegistryError` naming
the file, required fields, SHA-256 of a file's bytes."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import yaml

from evaluator.errors import RegistryError

#: a pinned SHA-256: 64 lowercase hex characters
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """SHA-256 (64 lowercase hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise RegistryError(f"{path}: file not found")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: not valid YAML: {exc}") from None


def require(entry: dict, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(entry, dict):
        raise RegistryError(f"{where}: expected a mapping, got {type(entry).__name__}")
    missing = [k for k in keys if entry.get(k) in (None, "")]
    if missing:
        raise RegistryError(f"{where}: missing required field(s) {', '.join(missing)}")


def default_root() -> Path:
    """The project root (the directory holding tasks.yaml)."""
    return Path(__file__).resolve().parents[3]
