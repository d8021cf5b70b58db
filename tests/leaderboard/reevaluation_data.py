"""Data for the re-evaluation and leakage tests, without a model: scored probe versions on the
small registry (the ``small_registry`` fixture, tests/leaderboard/conftest.py) and holdout runs
finished with chosen AUROCs (what a worker would have stored)."""

from __future__ import annotations

import shutil
from pathlib import Path

from leaderboard import models as m
from tests.leaderboard.board_data import public_probe

MODEL = "smollm2-135m-instruct"
TRUTH_TASK = "cities-truth-v1"  # hallucination
EA_TASK = "benchmark-vs-user-v1"  # eval_awareness
HOLDOUT_SIZE = 16


def scored(
    slug: str, *, reference_auroc: float = 0.90, category: str = "hallucination", **kwargs
) -> m.ProbeVersion:
    """A public, scored version of a new probe on SmolLM2, measured on the category's tasks."""
    tasks = list(m.Task.objects.filter(category_id=category, status=m.Task.Status.ACTIVE))
    return public_probe(
        slug=slug,
        category=category,
        base_model=MODEL,
        auroc=reference_auroc,
        tasks=tasks,
        reference_auroc=reference_auroc,
        **kwargs,
    )


def synthetic_scores(auroc: float, n: int = 10) -> list[dict]:
    """Per-example records of n positives and n negatives whose AUROC is exactly ``auroc``
    (a multiple of 1/n²): negatives score 0..n-1, each positive beats a chosen number of them."""
    correct = round(auroc * n * n)
    records = [{"id": f"neg-{j}", "label": 0, "score": float(j), "prob": 0.5} for j in range(n)]
    for i in range(n):
        beats = min(n, correct)
        correct -= beats
        records.append({"id": f"pos-{i}", "label": 1, "score": beats - 0.5, "prob": 0.5})
    return records


def finish_holdout_runs(cycle: m.ReevaluationCycle, holdout_auroc: dict[str, float | None]) -> None:
    """Finish every holdout run of the cycle as a worker would: probe slug → AUROC (None: fails)."""
    for run in cycle.runs.select_related("probe_version__probe"):
        value = holdout_auroc[run.probe_version.probe.slug]
        if value is None:
            m.EvaluationRun.objects.filter(pk=run.pk).update(
                status=m.EvaluationRun.Status.FAILED, error="worker lost", error_kind="infrastructure"
            )
        else:
            m.EvaluationRun.objects.filter(pk=run.pk).update(
                status=m.EvaluationRun.Status.SUCCEEDED,
                example_scores=synthetic_scores(value),
                split_sha256=cycle.holdout_for(run.task_id, run.base_model_id)["sha256"],
            )


def run_cycle(quarter: str, by, holdout_auroc: dict[str, float | None]) -> m.ReevaluationCycle:
    """Start a cycle (no dispatch), finish its runs with the given AUROCs, complete it."""
    from leaderboard.services.reevaluation import cycle_advance, reevaluation_start

    cycle = reevaluation_start(quarter=quarter, by=by, dispatch=False)
    finish_holdout_runs(cycle, holdout_auroc)
    cycle_advance(cycle_id=cycle.pk)
    cycle.refresh_from_db()
    return cycle


def registry_copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest
