"""What the pages show in words: component labels, formula text and the policy numbers the
methodology page explains. No database access; selectors and views import it, templates render it.
"""

from __future__ import annotations

import math

from evaluator.measure import DECLARED_GAP
from evaluator.metrics import ECE_BINS
from evaluator.registry import MAX_COMPONENT_WEIGHT
from evaluator.scoring import ECE_RANGE, LATENCY_RANGE_MS, RHO_RANGE
from leaderboard.policy import (
    DEPRECATE_POINTS,
    DIFF_POINTS,
    LEAKAGE_POINTS,
    REVIEW_GOAL_DAYS,
    STABILITY_MIN_QUARTERS,
)

#: The policy numbers of SPEC.md §5–§6 that the pages explain (the methodology page renders these,
#: never a number written in a template), from the modules that apply them (leaderboard.policy,
#: evaluator). AUROC "points" are AUROC × 100.
POLICY = {
    "max_component_weight": MAX_COMPONENT_WEIGHT,
    "diff_drop_points": DIFF_POINTS,
    "deprecate_drop_points": DEPRECATE_POINTS,
    "stability_min_quarters": STABILITY_MIN_QUARTERS,
    "declared_gap_points": DECLARED_GAP * 100,
    "leakage_test_over_holdout_points": LEAKAGE_POINTS,
    "review_goal_days": REVIEW_GOAL_DAYS,
    "ece_range": ECE_RANGE,
    "latency_range_ms": LATENCY_RANGE_MS,
    "rho_range": RHO_RANGE,
}

COMPONENT_LABELS = {
    "auroc": "AUROC",
    "auroc_ea": "AUROC (EA-corrected)",
    "auroc_ds": "AUROC (dist. shift)",
    "calibration": "Calibration",
    "rho_ce": "Transfer ρ",
    "latency": "Latency",
    "license": "License",
}
COMPONENT_SHORT = {
    "auroc": "AUROC",
    "auroc_ea": "AUROC-EA",
    "auroc_ds": "AUROC-DS",
    "calibration": "Calib.",
    "rho_ce": "ρ CE",
    "latency": "Latency",
    "license": "License",
}
#: How each component's value is computed from what was measured (SPEC.md §4). The numbers in
#: these strings come from evaluator.scoring's clamp ranges.
COMPONENT_FORMULAS = {
    "auroc": "mean test-split AUROC over the category's active tasks",
    "auroc_ea": "AUROC counting only pairs inside the same eval-awareness reference-probe quintile",
    "auroc_ds": "mean AUROC on the tasks' distribution-shift splits",
    "calibration": f"1 − 2·ECE, ECE clamped to [{ECE_RANGE[0]:g}, {ECE_RANGE[1]:g}] ({ECE_BINS} equal-width bins)",
    "rho_ce": f"mean Pearson ρ of word-ablation effects across base models, clamped to "
    f"[{RHO_RANGE[0]:g}, {RHO_RANGE[1]:g}]",
    "latency": f"1 − log10(ms)/{math.log10(LATENCY_RANGE_MS[1]):g}, ms clamped to "
    f"[{LATENCY_RANGE_MS[0]:g}, {LATENCY_RANGE_MS[1]:g}]",
    "license": "the openness score L of the probe's license (registry)",
}
