"""ProbeScore: the weighted composite of eight components.

    ProbeScore = w_auroc·AUROC + w_ea·AUROC_ea + w_ds·AUROC_ds + w_ece·(1 − 2·ECE)
               + w_ce·ρ_CE + w_lat·(1 − log10(ms)/4) + w_lic·L + w_gh·G

G, the Goodhart resistance, is measured by the robustness runs: under protocol p2 the area under the
graded attack's relative-recall curve (evaluator.axes.attack_graded), under p1 the recall under the
soft-suffix attack relative to the clean recall (evaluator.axes.attack); a spec older than v0.0.2
gives it weight 0. An unmeasured G gets the spec's default, or under a spec whose
``imputation_rules`` say ``category_lowest`` (v0.0.3 on) the lowest G measured in the probe's
category (``goodhart_floor``), flagged: never a midpoint.

Weights and imputation factors come only from a weights spec (registry/weights/*.yaml); nothing
here hard-codes them. Missing measurements are imputed conservatively and flagged (norm 3).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from evaluator.data.registry.licenses import LicenseSpec
from evaluator.data.registry.weights import COMPONENTS, WeightsSpec
from evaluator.errors import EvaluatorError, UnknownNameError

ECE_RANGE = (0.0, 0.5)
LATENCY_RANGE_MS = (1.0, 10_000.0)
RHO_RANGE = (0.0, 1.0)


def _clamp(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


@dataclass(frozen=True)
class Component:
    value: float  # the component in [0, 1] that the weight multiplies
    weight: float
    contribution: float  # value × weight
    imputed: bool
    raw: float | None  # what was measured (AUROC, ECE, ms, ...), None when imputed
    note: str = ""


@dataclass(frozen=True)
class ProbeScore:
    spec: str
    total: float
    measured_total: float | None  # weighted mean of the measured components only
    components: dict[str, Component]

    def to_dict(self) -> dict:
        return {
            "spec": self.spec,
            "total": self.total,
            "measured_total": self.measured_total,
            "components": {k: asdict(v) for k, v in self.components.items()},
        }


@dataclass(frozen=True)
class Measurements:
    """What the workers measured for one probe version; None means not measured."""

    auroc: float
    ece: float
    latency_ms: float
    license: str
    auroc_ea: float | None = None
    auroc_ds: float | None = None
    rho_ce: float | None = None
    #: probes of the eval_awareness category: the correction does not apply, raw AUROC is used
    ea_not_applicable: bool = False
    #: Goodhart resistance (evaluator.axes.attack.attack_metrics, mean over tasks); None: not measured
    goodhart: float | None = None
    #: why it was not measured (shown as the imputed component's note)
    goodhart_note: str = ""
    #: the lowest Goodhart resistance measured on another probe of the category (graded, under the
    #: current protocol), and whose it is; None: none is measured. Read only by a spec whose
    #: imputation rule for goodhart is ``category_lowest``, and only when ``goodhart`` is None.
    goodhart_floor: float | None = None
    goodhart_floor_source: str = ""
    #: set when auroc_ds is a mean over tasks of which some had no distshift split and were
    #: imputed per task; the component is then flagged imputed with this note
    auroc_ds_partial_note: str = ""

    @classmethod
    def from_dict(cls, data: dict) -> Measurements:
        required = ("auroc", "ece", "latency_ms", "license")
        missing = [k for k in required if data.get(k) is None]
        if missing:
            raise EvaluatorError(f"components: missing required value(s) {', '.join(missing)}")
        known = {
            "auroc",
            "auroc_ea",
            "auroc_ds",
            "ece",
            "rho_ce",
            "latency_ms",
            "license",
            "ea_not_applicable",
            "auroc_ds_partial_note",
            "goodhart",
            "goodhart_note",
            "goodhart_floor",
            "goodhart_floor_source",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise EvaluatorError(
                f"components: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(sorted(known))}"
            )
        for key in (
            "auroc",
            "auroc_ea",
            "auroc_ds",
            "ece",
            "rho_ce",
            "latency_ms",
            "goodhart",
            "goodhart_floor",
        ):
            v = data.get(key)
            if v is not None and (not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise EvaluatorError(f"components: {key} must be a finite number or null, got {v!r}")
        for key in ("auroc", "auroc_ea", "auroc_ds", "goodhart", "goodhart_floor"):
            v = data.get(key)
            if v is not None and not 0.0 <= v <= 1.0:
                raise EvaluatorError(f"components: {key} must lie in [0, 1], got {v}")
        if data["latency_ms"] <= 0:
            raise EvaluatorError(f"components: latency_ms must be positive, got {data['latency_ms']}")
        return cls(**{k: data[k] for k in known if k in data})


def probe_score(m: Measurements, *, spec: WeightsSpec, licenses: dict[str, LicenseSpec]) -> ProbeScore:
    """Compute the ProbeScore of one set of measurements under one weights spec."""

    if m.license not in licenses:
        raise UnknownNameError("license", m.license, sorted(licenses))
    imp = spec.imputation

    values: dict[str, tuple[float, bool, float | None, str]] = {}
    values["auroc"] = (m.auroc, False, m.auroc, "")
    if m.ea_not_applicable:
        values["auroc_ea"] = (m.auroc, False, None, "n/a for eval_awareness probes: raw AUROC used")
    elif m.auroc_ea is None:
        values["auroc_ea"] = (imp["auroc_ea"] * m.auroc, True, None, f"imputed {imp['auroc_ea']}× raw AUROC")
    else:
        values["auroc_ea"] = (m.auroc_ea, False, m.auroc_ea, "")
    if m.auroc_ds is None:
        values["auroc_ds"] = (imp["auroc_ds"] * m.auroc, True, None, f"imputed {imp['auroc_ds']}× raw AUROC")
    elif m.auroc_ds_partial_note:
        values["auroc_ds"] = (m.auroc_ds, True, m.auroc_ds, m.auroc_ds_partial_note)
    else:
        values["auroc_ds"] = (m.auroc_ds, False, m.auroc_ds, "")
    values["calibration"] = (1.0 - 2.0 * _clamp(m.ece, *ECE_RANGE), False, m.ece, "")
    if m.rho_ce is None:
        values["rho_ce"] = (imp["rho_ce"], True, None, f"default {imp['rho_ce']} (no re-fit possible)")
    else:
        values["rho_ce"] = (_clamp(m.rho_ce, *RHO_RANGE), False, m.rho_ce, "")
    ms = _clamp(m.latency_ms, *LATENCY_RANGE_MS)
    values["latency"] = (1.0 - math.log10(ms) / 4.0, False, m.latency_ms, "")
    lic = licenses[m.license]
    values["license"] = (lic.score, False, lic.score, lic.id)
    if m.goodhart is not None:
        values["goodhart"] = (_clamp(m.goodhart, 0.0, 1.0), False, m.goodhart, "")
    else:
        # a spec older than the component leaves it out (weight 0): the value is shown, never counted
        default = imp.get("goodhart", 0.5)
        why = m.goodhart_note or "not measured"
        if spec.imputation_rules.get("goodhart") == "category_lowest" and m.goodhart_floor is not None:
            floor = _clamp(m.goodhart_floor, 0.0, 1.0)
            source = f" ({m.goodhart_floor_source})" if m.goodhart_floor_source else ""
            note = f"the category's lowest measured, {floor:.3g}{source} ({why})"
            values["goodhart"] = (floor, True, None, note)
        else:
            values["goodhart"] = (default, True, None, f"default {default} ({why})")

    components = {}
    for name in COMPONENTS:
        value, imputed, raw, note = values[name]
        w = spec.weights[name]
        components[name] = Component(value, w, value * w, imputed, raw, note)
    total = sum(c.contribution for c in components.values())
    measured = [c for c in components.values() if not c.imputed]
    measured_weight = sum(c.weight for c in measured)
    measured_total = sum(c.contribution for c in measured) / measured_weight if measured_weight > 0 else None
    return ProbeScore(spec.version, total, measured_total, components)


def ranking_key(total: float, license_contribution: float) -> tuple[float, float]:
    """Sort key (descending) implementing norm 2, the license floor.

    License can never decide a ranking on its own: entries are ordered by their ProbeScore without
    the license contribution, and license only breaks exact ties. So a closed probe with a higher
    AUROC ranks above an open one with a lower AUROC when the other axes are equal, even when the
    open probe's total (which includes the license) is higher.
    """
    return (round(total - license_contribution, 12), total)
