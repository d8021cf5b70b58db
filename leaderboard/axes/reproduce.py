"""The reproduction axis: a probe's recipe re-run on its source model, compared with the artifact
(``evaluator.axes.reproduction``). It fills no metric row: its result is the reproduction mark the
probe version records beside its Score. The transfer axis re-fits the same recipe (``recipe_task``,
``recipe_applies`` are shared with it)."""

from __future__ import annotations

from django.conf import settings

from evaluator.axes.reproduction import reproduction_check
from evaluator.core.applicability import ModelReads, ProbeReads, applicability
from leaderboard import runner
from leaderboard.axes.base import Axis, AxisRuns, Planned, Summary
from leaderboard.models import BaseModel, EvaluationRun, ProbeVersion, Task
from leaderboard.policy import SECONDARY_QUEUE
from leaderboard.runner import Progress, RunOutcome

Run = EvaluationRun
KIND = "reproduce"


def recipe_task(version: ProbeVersion) -> tuple[ProbeReads, Task] | None:
    """What a version's recipe reads (its input and position, the version's by default) and the
    task it is trained on; None without a recipe."""
    if not version.recipe:
        return None
    reads = ProbeReads(
        input=version.recipe.get("input") or version.input,
        position=version.recipe.get("position") or version.position,
    )
    return reads, Task.objects.get(slug=version.recipe["task"])


def recipe_applies(recipe: ProbeReads, task: Task, model: BaseModel) -> bool:
    """Whether the recipe can be re-run on ``model`` on its task (the layer is the model's choice)."""
    return applicability(recipe, task, ModelReads(id=model.slug, n_layers=model.n_layers))[0]


def plan(version: ProbeVersion, tasks: list[Task]) -> list[Planned]:
    """(version, reproduce, recipe task, "train", model): with a recipe that can read its task on
    the probe's own base model."""
    found = recipe_task(version)
    if found is None:
        return []
    recipe, task = found
    probe = version.probe
    if not recipe_applies(recipe, task, probe.base_model):
        return []
    return [(version, KIND, task, "train", probe.base_model_id)]


def execute(run: EvaluationRun, progress: Progress) -> RunOutcome:
    probe = runner.probe_for(run.probe_version)
    lm = runner.loaded_model(probe.base_model)
    result = reproduction_check(
        probe,
        registry=runner.registry(),
        cache_dir=settings.CACHE_DIR,
        lm=lm,
        harvest_config=runner.harvest_config(),
        progress=progress,
        protocol=runner.protocol(),
    )
    outcome = RunOutcome(
        metrics={"reproduction": result.to_dict()},
        timings={"total": result.seconds},
        cache_key=result.train_cache_key,
    )
    return runner.measured(outcome, lm)


def summarise(measured: AxisRuns) -> Summary:
    """The reproduction a version records (None until its run has succeeded) and why it could not
    be made ("" unless its run failed)."""
    run = measured.runs[-1] if measured.runs else None
    return Summary(
        computed={
            "reproduction": run.metrics.get("reproduction")
            if run is not None and run.status == Run.Status.SUCCEEDED
            else None,
            "reproduce_error": run.error if run is not None and run.status == Run.Status.FAILED else "",
        }
    )


AXIS = Axis(
    name=KIND,
    queue=SECONDARY_QUEUE,
    label="Reproduction",
    description="the recipe re-run on the source model, compared with the artifact",
    execute=execute,
    plan=plan,
    summarise=summarise,
    legacy_setting="RECIPE_RUNS",
)
