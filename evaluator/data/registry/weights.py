"""The weights specs (registry/weights/<version>.yaml): the ProbeScore components and their
weights under each spec, read and validated (norm 1, the component cap)."""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.data.registry.files import read_yaml, require, sha256_file
from evaluator.errors import RegistryError

#: The components of ProbeScore (docs/METHODOLOGY.md), in display order.
COMPONENTS: tuple[str, ...] = (
    "auroc",
    "auroc_ea",
    "auroc_ds",
    "calibration",
    "rho_ce",
    "latency",
    "license",
    "goodhart",
)
#: Components added after the first weights spec, with the spec that introduced each: a spec older
#: than that may leave it out (weight 0 under it), so adding a component never changes the scores
#: stored under an earlier spec. A spec from that version on must name it.
COMPONENT_SINCE: dict[str, str] = {"goodhart": "v0.0.2"}
MAX_COMPONENT_WEIGHT = 0.30  # Norm 1: the component cap.
#: Imputation rules a spec may name beside its defaults (``imputation_rules``), per component.
#: ``category_lowest``: a probe whose component was not measured gets the lowest value measured on
#: a probe of its category (the default in ``imputation`` only where the category has none), so
#: that being unmeasured never pays more than being measured.
IMPUTATION_RULES: dict[str, tuple[str, ...]] = {"goodhart": ("category_lowest",)}
_SPEC_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")


@dataclass(frozen=True)
class WeightsSpec:
    version: str
    released: str
    description: str
    weights: dict[str, float]
    imputation: dict[str, float]
    sha256: str  # of the spec file's bytes
    #: component → rule (:data:`IMPUTATION_RULES`); a component without one gets its default
    imputation_rules: dict[str, str] = field(default_factory=dict)


def load_weights_spec(path: Path) -> WeightsSpec:
    data = read_yaml(path) or {}
    require(data, ("version", "weights"), str(path))
    version = data["version"]
    if not _SPEC_VERSION.match(version):
        raise RegistryError(f"{path}: version {version!r} must look like v0.0.1")
    weights = data["weights"]
    if not isinstance(weights, dict):
        raise RegistryError(f"{path}: weights must be a mapping of component to weight")
    named = [
        c for c in COMPONENTS if c not in COMPONENT_SINCE or _version_at_least(version, COMPONENT_SINCE[c])
    ]
    if set(weights) != set(named):
        raise RegistryError(
            f"{path}: weights must name exactly the components {', '.join(named)} (spec {version});"
            f" got {', '.join(sorted(weights))}"
        )
    for name, w in weights.items():
        if not isinstance(w, (int, float)) or w < 0:
            raise RegistryError(f"{path}: weight {name} must be a non-negative number, got {w!r}")
        if w > MAX_COMPONENT_WEIGHT + 1e-9:
            raise RegistryError(
                f"{path}: weight {name} = {w} exceeds the component cap of {MAX_COMPONENT_WEIGHT} (norm 1)"
            )
    total = sum(weights.values())
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise RegistryError(f"{path}: weights sum to {total:.6g}, they must sum to 1.0")
    imputation = data.get("imputation") or {}
    for name in ("auroc_ea", "auroc_ds", "rho_ce", *(c for c in COMPONENT_SINCE if c in weights)):
        if name not in imputation:
            raise RegistryError(f"{path}: imputation.{name} is required")
    rules = data.get("imputation_rules") or {}
    if not isinstance(rules, dict):
        raise RegistryError(f"{path}: imputation_rules must be a mapping of component to rule")
    for name, rule in rules.items():
        if rule not in IMPUTATION_RULES.get(name, ()):
            accepted = "; ".join(f"{c}: {', '.join(r)}" for c, r in IMPUTATION_RULES.items())
            raise RegistryError(
                f"{path}: imputation_rules.{name} = {rule!r} is not a rule; accepted: {accepted}"
            )
    released = data.get("released", "")
    if isinstance(released, dt.date):
        released = released.isoformat()
    return WeightsSpec(
        version=version,
        released=str(released),
        description=data.get("description", ""),
        weights={k: float(weights.get(k, 0.0)) for k in COMPONENTS},
        imputation={k: float(v) for k, v in imputation.items()},
        sha256=sha256_file(path),
        imputation_rules={str(k): str(v) for k, v in rules.items()},
    )


def _version_at_least(version: str, since: str) -> bool:
    """Whether spec ``version`` ("v0.0.2") is ``since`` or later."""

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.lstrip("v").split("."))

    return key(version) >= key(since)


def load_weights_specs(directory: Path) -> dict[str, WeightsSpec]:
    specs: dict[str, WeightsSpec] = {}
    for path in sorted(directory.glob("*.yaml")):
        spec = load_weights_spec(path)
        if spec.version in specs:
            raise RegistryError(f"{path}: weights spec {spec.version} is defined twice")
        specs[spec.version] = spec
    if not specs:
        raise RegistryError(f"{directory}: no weights spec files (*.yaml)")
    return specs
