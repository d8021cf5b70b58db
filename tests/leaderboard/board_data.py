"""Test data for the public board: probes with scored versions, built with the factories and scored
by the real ProbeScore function (evaluator.metrics.scoring) under WeightsSpec rows from the registry."""

from __future__ import annotations

import math

from leaderboard import models as m
from leaderboard.selectors.board.query import weights_spec_list
from tests.factories import (
    BaseModelFactory,
    ProbeFactory,
    ProbeVersionFactory,
    ScoreFactory,
    SubmissionFactory,
    TaskFactory,
    TaskSplitFactory,
    UserFactory,
)

MODEL_A = "board-model-a"
MODEL_B = "board-model-b"


def board_owner():
    """One owner for every board probe (hashing a password per probe would dominate the tests)."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(username="board-owner").first() or UserFactory(
        username="board-owner"
    )


def ensure_models() -> tuple[m.BaseModel, m.BaseModel]:
    """Two base models of our own (the registry's models.yaml may or may not list any)."""
    a = BaseModelFactory(slug=MODEL_A, name="Board Model A", d_model=576, n_layers=30)
    b = BaseModelFactory(slug=MODEL_B, name="Board Model B", d_model=640, n_layers=18)
    return a, b


def ensure_tasks(category: str = "hallucination", n: int = 2) -> list[m.Task]:
    tasks = []
    for i in range(n):
        task = TaskFactory(slug=f"board-{category.replace('_', '-')}-{i}-v1", category_id=category)
        if not task.splits.exists():
            for split, rows in (("train", 600), ("test", 300), ("distshift", 120), ("holdout_pool", 420)):
                TaskSplitFactory(task=task, name=split, rows=rows)
        tasks.append(task)
    return tasks


def roc_points(auroc: float, n: int = 40) -> list[list[float]]:
    """A smooth ROC curve whose area is close to ``auroc`` (tpr = fpr ** k, area 1 / (k + 1))."""
    k = max(1 / max(auroc, 1e-3) - 1, 1e-3)
    return [[i / n, (i / n) ** k] for i in range(n + 1)]


def reliability_bins(shift: float = 0.05) -> list[dict]:
    bins = []
    for b in range(10):
        lo, hi = b / 10, (b + 1) / 10
        mean_prob = (lo + hi) / 2
        bins.append(
            {
                "bin": b,
                "lo": lo,
                "hi": hi,
                "n": 30,
                "mean_prob": mean_prob,
                "positive_rate": min(max(mean_prob - shift, 0.0), 1.0),
            }
        )
    return bins


def task_result(
    auroc: float, *, half_width: float = 0.03, ea_imputed: bool = False, ds_imputed: bool = False
) -> dict:
    return {
        "auroc": auroc,
        "auroc_ci": [round(auroc - half_width, 6), round(min(auroc + half_width, 1.0), 6)],
        "auroc_ea": round(auroc * 0.9, 6),
        "auroc_ea_imputed": ea_imputed,
        "auroc_ds": round(auroc * 0.8, 6),
        "auroc_ds_imputed": ds_imputed,
        "ece": 0.05,
        "brier": 0.18,
        "recall_at_1pct_fpr": 0.2,
        "n_test": 300,
        "roc": roc_points(auroc),
        "reliability": reliability_bins(),
        "baselines": {"random_direction": 0.52, "diff_of_means": round(auroc - 0.05, 6)},
        "lift": {"random_direction": round(auroc - 0.52, 6), "diff_of_means": 0.05},
    }


def public_probe(
    *,
    slug: str,
    name: str | None = None,
    category: str = "hallucination",
    base_model: str = MODEL_A,
    license: str = "Apache-2.0",
    auroc: float = 0.8,
    ece: float = 0.05,
    latency_ms: float = 200.0,
    auroc_ea: float | None = None,
    auroc_ds: float | None = None,
    rho_ce: float | None = None,
    tasks: list[m.Task] | None = None,
    spec: str | None = None,
    status: str = m.Submission.Status.SCORED,
    number: int = 1,
    probe: m.Probe | None = None,
    authors: list[str] | None = None,
    extra_measurements: dict | None = None,
    **version_kwargs,
) -> m.ProbeVersion:
    """A probe version with a submission in ``status`` and a Score under ``spec`` (None: under
    every weights spec, as the score writer does)."""
    if probe is None:
        probe = ProbeFactory(
            slug=slug,
            name=name or slug.replace("-", " ").title(),
            category_id=category,
            base_model_id=base_model,
            owner=board_owner(),
        )
    version = ProbeVersionFactory(
        probe=probe, number=number, license_id=license, authors=authors or ["A. Researcher"], **version_kwargs
    )
    SubmissionFactory(probe_version=version, status=status)
    score_for(
        version,
        spec=spec,
        auroc=auroc,
        ece=ece,
        latency_ms=latency_ms,
        auroc_ea=auroc_ea,
        auroc_ds=auroc_ds,
        rho_ce=rho_ce,
        tasks=tasks,
        extra_measurements=extra_measurements,
    )
    return version


def score_for(
    version: m.ProbeVersion,
    *,
    spec: str | None = None,
    auroc: float = 0.8,
    ece: float = 0.05,
    latency_ms: float = 200.0,
    auroc_ea: float | None = None,
    auroc_ds: float | None = None,
    rho_ce: float | None = None,
    tasks: list[m.Task] | None = None,
    extra_measurements: dict | None = None,
) -> m.Score:
    measured = {"auroc": auroc, "ece": ece, "latency_ms": latency_ms, "license": version.license_id}
    if version.probe.category_id == "eval_awareness":
        measured["ea_not_applicable"] = True
    for key, value in (("auroc_ea", auroc_ea), ("auroc_ds", auroc_ds), ("rho_ce", rho_ce)):
        if value is not None:
            measured[key] = value
    per_task = {
        t.slug: task_result(auroc, ea_imputed=auroc_ea is None, ds_imputed=auroc_ds is None)
        for t in (tasks or [])
    }
    extra = {"brier": 0.18, "latency_device": "cpu", "model_forward_ms": 12.5} | (extra_measurements or {})
    if isinstance(extra.get("goodhart_resistance"), (int, float)):
        measured["goodhart"] = extra["goodhart_resistance"]
    specs = [m.WeightsSpec.objects.get(version=spec)] if spec else weights_spec_list()
    scores = [
        ScoreFactory(
            probe_version=version, spec=row, measured=measured, extra_measurements=extra, per_task=per_task
        )
        for row in specs
    ]
    return scores[-1]  # the newest spec's: the board's default


def add_spec(version: str = "v0.0.9", **weights) -> m.WeightsSpec:
    """A second weights spec: by default AUROC-heavy, with latency and license lighter."""
    base = m.WeightsSpec.objects.get(version="v0.0.1")
    new = dict(base.weights)
    new.update(
        weights
        or {
            "auroc": 0.30,
            "auroc_ea": 0.25,
            "auroc_ds": 0.15,
            "calibration": 0.10,
            "rho_ce": 0.10,
            "latency": 0.05,
            "license": 0.05,
        }
    )
    assert math.isclose(sum(new.values()), 1.0)
    return m.WeightsSpec.objects.create(
        version=version,
        released="2026-12-01",
        description="test spec",
        weights=new,
        imputation=dict(base.imputation),
        sha256="0" * 64,
    )
