"""The transfer axis: a probe's recipe re-fit on every other enabled base model, and the per-word
ablation effects on both models correlated (``evaluator.axes.transfer``): ρ_CE, one Pearson per
target model."""

from __future__ import annotations

from django.conf import settings

from evaluator.axes.transfer import cross_model_transfer
from evaluator.core.recipes import transfer_refusal
from leaderboard import runner
from leaderboard.axes.base import FINISHED, Axis, AxisRuns, Planned, Summary
from leaderboard.axes.reproduce import recipe_applies, recipe_task
from leaderboard.models import EvaluationRun, ProbeVersion, Task
from leaderboard.policy import SECONDARY_QUEUE
from leaderboard.runner import Progress, RunOutcome
from leaderboard.selectors.shared import enabled_models

Run = EvaluationRun
KIND = "transfer"


def plan(version: ProbeVersion, tasks: list[Task]) -> list[Planned]:
    """(version, transfer, recipe task, "test", target) for each other enabled base model whose own
    split the recipe can read (the re-fit is on the target's split)."""
    found = recipe_task(version)
    if found is None or transfer_refusal((version.recipe or {}).get("method", "")):
        return []  # no recipe, or one that cannot be re-fit on another model (an SAE's is that model's)
    recipe, task = found
    return [
        (version, KIND, task, "test", target.slug)
        for target in enabled_models().exclude(slug=version.probe.base_model_id)
        if recipe_applies(recipe, task, target)
    ]


def execute(run: EvaluationRun, progress: Progress) -> RunOutcome:
    probe = runner.probe_for(run.probe_version)
    [result] = cross_model_transfer(
        probe,
        targets=[run.base_model_id],
        registry=runner.registry(),
        cache_dir=settings.CACHE_DIR,
        config=runner.harvest_config(),
        progress=progress,
        load=runner.loaded_model,
    )
    outcome = RunOutcome(
        metrics={"transfer": result.to_dict()},
        timings={"total": result.seconds},
        cache_key=result.refit_train_cache_key,
    )
    return runner.measured(outcome, runner.loaded_model(run.base_model_id))


def summarise(measured: AxisRuns) -> Summary:
    """ρ per target model (stored), the Pearsons ρ_CE is the mean of once every target is measured
    (None while one is pending or after one failed: ρ_CE then takes its default, with the reason)."""
    runs = measured.runs
    pearsons = [
        r.metrics["transfer"]["pearson"]
        for r in runs
        if r.status == Run.Status.SUCCEEDED and "transfer" in r.metrics
    ]
    failed = [r.base_model_id for r in runs if r.status == Run.Status.FAILED]
    # a secondary run still queued (the board scores a probe once its primary runs are done)
    pending = [r.base_model_id for r in runs if r.status not in FINISHED]
    imputed = {}
    if failed:
        imputed["rho_ce"] = f"transfer failed on {', '.join(failed)}: default used"
    elif pending:
        imputed["rho_ce"] = (
            f"pending: transfer to {', '.join(pending)} not measured yet (default used until it is)"
        )
    return Summary(
        stored={"transfer": {r.base_model_id: r.metrics.get("transfer", {}).get("pearson") for r in runs}},
        scored={"transfer_pearsons": pearsons if runs and not failed and not pending else None},
        imputed=imputed,
    )


AXIS = Axis(
    name=KIND,
    queue=SECONDARY_QUEUE,
    label="Cross-model transfer",
    description="the recipe re-fit on another base model; per-word ablation effects on both (ρ_CE)",
    execute=execute,
    plan=plan,
    summarise=summarise,
    metric_rows=("rho_ce",),
    legacy_setting="RECIPE_RUNS",
)
