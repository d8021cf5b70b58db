"""The stress axis: the artifact on each task's stress split (the test rows rewritten in form, and
hard negatives) and on its content-end split (the wrapped rows cut where their content ends), each
scored like any split and read against the clean train and test runs by the score writer
(``evaluator.axes.stress``); beside the ProbeScore, never in it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaluator.axes.stress import stress_metrics, stress_summary
from evaluator.data.registry.tasks import STRESS_CONTENT_END_SPLIT, STRESS_SPLIT
from evaluator.metrics.measure import ScoredExamples
from leaderboard import runner
from leaderboard.axes import score
from leaderboard.axes.base import FINISHED, Axis, AxisRuns, Planned, Summary
from leaderboard.models import EvaluationRun, ProbeVersion, Task
from leaderboard.policy import SECONDARY_QUEUE

Run = EvaluationRun
KIND = "stress"


def plan(version: ProbeVersion, tasks: list[Task]) -> list[Planned]:
    """(version, stress, task, split, model) for each task with a stress split (tasks.yaml's
    ``stress``; an on-policy task has none), for both readings: ``stress`` (where the probe reads)
    and ``stress_content_end`` (the wrapped rows cut where their content ends)."""
    reg = runner.registry()
    model = version.probe.base_model_id
    return [
        (version, KIND, t, split, model)
        for t in tasks
        if t.slug in reg.tasks and reg.task(t.slug).stress is not None
        for split in (STRESS_SPLIT, STRESS_CONTENT_END_SPLIT)
    ]


def stress_measurements(
    stresses: Mapping[str, EvaluationRun],
    by_task: Mapping[str, Mapping[str, EvaluationRun]],
    content_end: Mapping[str, EvaluationRun] | None = None,
) -> dict[str, Any]:
    """Each task's stress run read against its clean train and test runs (evaluator.axes.stress),
    with its content-end run where one exists (a board filled before the second reading has none:
    its deployed numbers stand alone), summed up by :func:`evaluator.axes.stress.stress_summary`;
    the means wait while a run is still queued or running. {} when no stress run exists."""
    if not stresses:
        return {}
    content_end = content_end or {}
    per_task, pending = {}, []
    for task_id, run in sorted(stresses.items()):
        splits = by_task.get(task_id, {})
        cut_run = content_end.get(task_id)
        if run.status not in FINISHED or (cut_run is not None and cut_run.status not in FINISHED):
            pending.append(task_id)
            continue
        if run.status != Run.Status.SUCCEEDED or "train" not in splits or "test" not in splits:
            continue  # a failed stress run leaves the task out (its error is on the run)
        train = ScoredExamples.from_records(splits["train"].example_scores)
        test = ScoredExamples.from_records(splits["test"].example_scores)
        stress = ScoredExamples.from_records(run.example_scores)
        cut = None
        if cut_run is not None and cut_run.status == Run.Status.SUCCEEDED:
            c = ScoredExamples.from_records(cut_run.example_scores)
            cut = (c.ids, c.labels, c.scores)
        per_task[task_id] = stress_metrics(
            train_negatives=train.scores[train.labels == 0],
            test=(test.ids, test.labels, test.scores),
            stress=(stress.ids, stress.labels, stress.scores),
            content_end=cut,
        )
    return stress_summary(per_task, pending=pending)


def summarise(measured: AxisRuns) -> Summary:
    runs = [r for r in measured.runs if r.split == STRESS_SPLIT]
    cut = {r.task_id: r for r in measured.runs if r.split == STRESS_CONTENT_END_SPLIT}
    return Summary(stored={"stress": stress_measurements({r.task_id: r for r in runs}, measured.clean, cut)})


AXIS = Axis(
    name=KIND,
    queue=SECONDARY_QUEUE,
    label="Stress",
    description="the artifact on each task that has a stress split, where it reads and where the "
    "content ends, read against the clean train and test runs",
    # the stress split, scored like any split; summed up by the score writer
    execute=score.execute,
    plan=plan,
    summarise=summarise,
    metric_rows=("stress_auroc", "stress_recall", "stress_auroc_content_end"),
    legacy_setting="STRESS_RUNS",
)
