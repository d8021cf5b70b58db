"""Direction utility's null (evaluator.axes.steer): seeded random unit directions, and the
probe's effect against theirs (the empirical one-sided p-value, z pooled and per seed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: the floor of the random sd of the addition effect (readout units)
ADDITION_SD_FLOOR = 1e-9


def random_directions(d_model: int, *, k: int, seed: int) -> np.ndarray:
    """K seeded random unit directions "k d_model" (float64)."""
    rng = np.random.default_rng(seed)
    out = rng.standard_normal((k, d_model))
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def empirical_p(effect: float, randoms: np.ndarray) -> float:
    """One-sided: (1 + #random effects ≥ effect) / (1 + #random), never 0."""
    return float((1 + int(np.sum(randoms >= effect))) / (1 + randoms.size))


def _against_random(effect: float, pools: Sequence[np.ndarray], floor: float) -> dict[str, Any]:
    """The probe's effect against the random directions: pooled z and p-value, and z per seed."""
    randoms = np.concatenate(pools)
    mean, sd = float(randoms.mean()), float(randoms.std(ddof=1))
    per_seed = [(float(effect) - float(p.mean())) / max(float(p.std(ddof=1)), floor) for p in pools]
    return {
        "effect": float(effect),
        "random_mean": mean,
        "random_sd": sd,
        "sd_floor": floor,
        "n_random": int(randoms.size),
        "p_value": empirical_p(effect, randoms),
        "utility_z": (float(effect) - mean) / max(sd, floor),
        "z_by_seed": per_seed,
        "z_spread": float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else 0.0,
        "random_effects": [float(x) for x in randoms],
    }
