"""The steering axis: direction utility (``evaluator.axes.steer``), whether the probe's direction
steers the model on each task with a behavioural readout; beside the ProbeScore, never in it."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from evaluator.axes.steer import direction_utility, steer_plan, steer_probe
from evaluator.errors import EvaluatorError
from leaderboard import runner
from leaderboard.axes.base import Axis, AxisRuns, Planned, Summary
from leaderboard.models import EvaluationRun, ProbeVersion, Task
from leaderboard.policy import SECONDARY_QUEUE
from leaderboard.runner import Progress, RunOutcome

Run = EvaluationRun
KIND = "steer"


def plan(version: ProbeVersion, tasks: list[Task]) -> list[Planned]:
    """(version, steer, task, "test", model) for each task whose readout applies to the probe (a
    linear probe on a decoder model, under a protocol with steering settings)."""
    reg = runner.registry()
    if reg.protocol().steering is None:
        return []
    model = version.probe.base_model_id
    by_slug = {t.slug: t for t in tasks}
    slugs = steer_plan(registry=reg, base_model=model, probe_kind=version.kind, task_ids=list(by_slug))
    return [(version, KIND, by_slug[s], "test", model) for s in slugs]


def execute(run: EvaluationRun, progress: Progress) -> RunOutcome:
    """Direction utility on one task: the steer JSON of that task is the stored result."""
    probe = runner.probe_for(run.probe_version)
    out = steer_probe(
        probe,
        registry=runner.registry(),
        cache_dir=settings.CACHE_DIR,
        tasks=[run.task_id],
        protocol=runner.protocol(),
        load=runner.loaded_model,
        progress=progress,
    )
    if not out["eligible"]:
        raise EvaluatorError(f"direction utility: {out['reason']}")
    outcome = RunOutcome(
        metrics={"steer": out["tasks"][run.task_id], "settings": out["settings"]},
        timings={"total": out["seconds"]},
    )
    return runner.measured(outcome, runner.loaded_model(probe.base_model))


def steer_summary(runs: list[EvaluationRun]) -> dict[str, Any]:
    """Direction utility folded into the stored measurements (beside the ProbeScore, never in
    it): ``direction_utility`` (mean utility_z over the judged tasks; None when none is) and
    ``steer``: per task the readout's validation, the chosen strength and its fluency, each
    intervention's effect against the random directions, the prompting baseline and the
    generated-text readout (the full steer JSON stays on the run)."""
    tasks = {}
    for run in runs:
        result = (run.metrics or {}).get("steer") if run.status == Run.Status.SUCCEEDED else None
        if not result or result.get("readout") is None:
            continue
        baseline = result.get("prompt_baseline") or {}
        tasks[run.task_id] = {
            "judged": bool(result.get("judged")),
            "reason": result.get("reason", ""),
            "utility_z": result.get("utility_z"),
            "p_value": result.get("p_value"),
            "readout_auroc": result["readout"]["auroc"],
            "n": result["readout"]["n"],
            "strength": result.get("strength"),
            "perplexity_ratio": (result.get("fluency") or {}).get("ratio"),
            "prompt_effect": baseline.get("effect"),
            "generated": result.get("generated"),
            **{
                kind: {
                    k: result[kind].get(k)
                    for k in (
                        "effect",
                        "random_mean",
                        "random_sd",
                        "utility_z",
                        "p_value",
                        "z_spread",
                        "random_effects",
                    )
                }
                for kind in ("addition", "ablation")
                if result.get(kind)
            },
        }
    return {"direction_utility": direction_utility(list(tasks.values())), "steer": tasks}


def summarise(measured: AxisRuns) -> Summary:
    return Summary(stored={"steer": steer_summary(measured.runs)})


AXIS = Axis(
    name=KIND,
    queue=SECONDARY_QUEUE,
    label="Direction utility",
    description="the probe's direction steering the model on each task with a behavioural readout "
    "(seeded subsets of test, the strength sweep on train)",
    execute=execute,
    plan=plan,
    summarise=summarise,
    metric_rows=("direction_utility",),
    legacy_setting="STEER_RUNS",
)
