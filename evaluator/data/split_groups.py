"""What group each row of a split file belongs to: its ``domain`` and its ``source`` (top-level
keys of a split row, evaluator.data.domains; absent in a file written before they existed), read for
the score writer's breakdown (evaluator.metrics.breakdown) and the category page's "named domains"
note. A row's source names the dataset and then, after ``:``, the finer field the dataset gives
(``donotanswer:information_hazard:S009private``); the breakdown groups by the dataset, the part
before the first ``:``, so that a group holds enough rows to measure.

A file is read once per (path, pinned SHA-256) and checked against the pin first, so a cached
answer always describes the pinned bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from evaluator.data.domains import NAMED_DOMAINS
from evaluator.errors import RegistryError

#: what separates a source's dataset from the finer field it gives
SOURCE_SEPARATOR = ":"


def _value(raw: object) -> str | None:
    if raw is None or raw == "":
        return None
    return raw if isinstance(raw, str) else json.dumps(raw, sort_keys=True)


def source_dataset(source: str | None) -> str | None:
    """The dataset a row's ``source`` names: its part before the first :data:`SOURCE_SEPARATOR`."""
    return None if source is None else source.split(SOURCE_SEPARATOR, 1)[0]


@lru_cache(maxsize=256)
def _read(path: str, sha256: str) -> dict[str, dict[str, str | None]]:
    p = Path(path)
    if not p.is_file():
        raise RegistryError(f"split file {path} is missing")
    data = p.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise RegistryError(f"split file {path} has SHA-256 {actual}, the registry pins {sha256}")
    out: dict[str, dict[str, str | None]] = {}
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RegistryError(f"split file {path} line {number}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict) or "id" not in row:
            raise RegistryError(f"split file {path} line {number}: a row is an object with an id")
        out[str(row["id"])] = {
            "domain": _value(row.get("domain")),
            "source": source_dataset(_value(row.get("source"))),
        }
    return out


def row_groups(path: str | Path, sha256: str) -> dict[str, dict[str, str | None]]:
    """Row id → ``{"domain": ..., "source": ...}`` (the source's dataset, :func:`source_dataset`;
    None where the row names none) of the split file at ``path``, which must have the pinned ``sha256`` (RegistryError otherwise)."""
    return dict(_read(str(path), sha256))


def domains_present(path: str | Path, sha256: str) -> frozenset[str]:
    """The domains a split file's rows name."""
    return frozenset(g["domain"] for g in _read(str(path), sha256).values() if g["domain"] is not None)


def named_domains_missing(domains: Iterable[str]) -> list[str]:
    """The methodology's named domains (evaluator.data.domains.NAMED_DOMAINS, in its order) not
    among ``domains``."""
    present = set(domains)
    return [d for d in NAMED_DOMAINS if d not in present]
