"""The stress axis: the artifact on each task's stress split (the test rows rewritten in form, and
hard negatives), scored like any split and read against the clean train and test runs by the score
writer (``evaluator.axes.stress``); beside the ProbeScore, never in it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaluator.axes.stress import stress_metrics, stress_summary
from evaluator.data.registry.tasks import STRESS_SPLIT
from evaluator.metrics.measure import ScoredExamples
from leaderboard import runner
from leaderboard.axes import score
from leaderboard.axes.base import FINISHED, Axis, AxisRuns, Planned, Summary
from leaderboard.models import EvaluationRun, ProbeVersion, Task
from leaderboard.policy import SECONDARY_QUEUE

Run = EvaluationRun
KIND = "stress"


def plan(version: ProbeVersion, tasks: list[Task]) -> list[Planned]:
    """(version, stress, task, "stress", model) for each task with a stress split (tasks.yaml's
    ``stress``; an on-policy task has none)."""
    reg = runner.registry()
    model = version.probe.base_model_id
    return [
        (version, KIND, t, STRESS_SPLIT, model)
        for t in tasks
        if t.slug in reg.tasks and reg.task(t.slug).stress is not None
    ]


def stress_measurements(
    stresses: Mapping[str, EvaluationRun], by_task: Mapping[str, Mapping[str, EvaluationRun]]
) -> dict[str, Any]:
    """Each task's stress run read against its clean train and test runs (evaluator.axes.stress),
    summed up by :func:`evaluator.axes.stress.stress_summary`; the means wait while a stress run is
    still queued or running. {} when no stress run exists."""
    if not stresses:
        return {}
    per_task, pending = {}, []
    for task_id, run in sorted(stresses.items()):
        splits = by_task.get(task_id, {})
        if run.status not in FINISHED:
            pending.append(task_id)
            continue
        if run.status != Run.Status.SUCCEEDED or "train" not in splits or "test" not in splits:
            continue  # a failed stress run leaves the task out (its error is on the run)
        train = ScoredExamples.from_records(splits["train"].example_scores)
        test = ScoredExamples.from_records(splits["test"].example_scores)
        stress = ScoredExamples.from_records(run.example_scores)
        per_task[task_id] = stress_metrics(
            train_negatives=train.scores[train.labels == 0],
            test=(test.ids, test.labels, test.scores),
            stress=(stress.ids, stress.labels, stress.scores),
        )
    return stress_summary(per_task, pending=pending)


def summarise(measured: AxisRuns) -> Summary:
    return Summary(
        stored={"stress": stress_measurements({r.task_id: r for r in measured.runs}, measured.clean)}
    )


AXIS = Axis(
    name=KIND,
    queue=SECONDARY_QUEUE,
    label="Stress",
    description="the artifact on each task that has a stress split, read against the clean train "
    "and test runs",
    # the stress split, scored like any split; summed up by the score writer
    execute=score.execute,
    plan=plan,
    summarise=summarise,
    metric_rows=("stress_auroc", "stress_recall"),
    legacy_setting="STRESS_RUNS",
)
