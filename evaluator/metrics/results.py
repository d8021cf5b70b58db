"""Small helpers shared by the result dataclasses: JSON conversion and progress sub-ranges."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

Progress = Callable[[float, str], None]


def jsonable(value: Any) -> Any:
    """Recursively convert dataclasses, numpy scalars/arrays and tuples into JSON-able values.
    Non-finite floats become None (JSON has no NaN)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict"):
            return value.to_dict()
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def fields_dict(obj: Any, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON form of a dataclass's fields, minus ``skip``."""
    return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.name not in skip}


def no_progress(fraction: float, step: str) -> None:  # noqa: ARG001
    return None


def sub_progress(progress: Progress, lo: float, hi: float, prefix: str = "") -> Progress:
    """A callback mapping [0, 1] onto [lo, hi] of ``progress`` (a stage of a longer job)."""

    def report(fraction: float, step: str) -> None:
        fraction = min(max(fraction, 0.0), 1.0)
        progress(lo + (hi - lo) * fraction, f"{prefix}{step}" if prefix else step)

    return report
