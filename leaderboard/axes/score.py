"""The axes the board ranks on: ``score`` (the artifact on each split of each task it can read) and
``reference`` (the base model's eval-awareness reference probe on the same test items).

Both are declared here: a reference run is a score run of another probe (the same worker function,
without the extras), planned on the tasks the score runs are planned on, and the score writer reads
both kinds directly (``leaderboard.services.scores``), so neither has a summary of its own.

Latency is not an axis: it has no run of its own. The score run on ``test`` measures it (with the
baselines at the probe's layer, ``evaluator.axes.run.measure_split``), and the score writer reads it
from there; its metric row (``latency_ms``) is the score axis's.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Q

from evaluator.axes.run import MeasureSetup, measure_split
from evaluator.data.registry.tasks import EVAL_AWARENESS
from leaderboard import runner
from leaderboard.axes.base import Axis, Planned
from leaderboard.models import EvaluationRun, ProbeVersion, Task, TaskSplit
from leaderboard.policy import PRIMARY_QUEUE, SCORE_SPLITS
from leaderboard.runner import Progress, RunOutcome
from leaderboard.selectors.shared import ea_reference_pending, ea_reference_version, tasks_applicable

Run = EvaluationRun
KIND, REFERENCE_KIND = "score", "reference"


def execute(run: EvaluationRun, progress: Progress) -> RunOutcome:
    """One split of one task: the per-task step the CLI takes too (evaluator.axes.run.measure_split);
    the test split of a score run adds the baselines and the latency."""
    probe = runner.probe_for(run.probe_version)
    lm = runner.loaded_model(probe.base_model)
    with_extras = run.kind == KIND and run.split == "test"
    measured = measure_split(
        probe,
        task_id=run.task_id,
        split=run.split,
        setup=MeasureSetup(runner.registry(), settings.CACHE_DIR, None, None, runner.harvest_config()),
        lm=lm,
        progress=progress,
        extras=with_extras,
        latency=with_extras,
    )
    result = measured.run
    outcome = RunOutcome(
        example_scores=result.examples.to_records(),
        metrics={
            "n": result.n,
            "model": result.model,
            "config": result.config,
            "cache_hit": result.cache_hit,
            "probe_sha256": result.probe_sha256,
            "layer": result.layer,
            "position": result.position,
        },
        timings=result.timings,
        cache_key=result.cache_key,
        split_sha256=result.split_sha256,
    )
    if measured.baselines is not None:
        outcome.metrics["baselines"] = measured.baselines.to_dict()
    if measured.latency is not None:
        outcome.metrics["latency"] = measured.latency.to_dict()
    progress(1.0, "scored")
    return runner.measured(outcome, lm)


def plan(version: ProbeVersion, tasks: list[Task]) -> list[Planned]:
    """(version, score, task, split, model) for each task and each of its splits the probe is
    scored on: test, train (the 1%-FPR threshold is fixed on train negatives) and distshift where
    the task has one (an on-policy task: its base model's own split files)."""
    model = version.probe.base_model_id
    splits = set(
        TaskSplit.objects.filter(task__in=tasks, name__in=SCORE_SPLITS)
        .filter(Q(base_model__isnull=True) | Q(base_model_id=model))
        .values_list("task_id", "name")
    )
    return [
        (version, KIND, task, split, model)
        for task in tasks
        for split in SCORE_SPLITS
        if (task.slug, split) in splits
    ]


def reference_plan(version: ProbeVersion, tasks: list[Task]) -> list[Planned]:
    """(reference version, reference, task, "test", model) for each task the base model's
    eval-awareness reference probe can read (shared by every probe on that base model, so created
    once and reused; never tied to a submission). While the base model has no scored reference but
    one is being measured, its runs are planned now, beside this probe's own runs in the queue: once
    it is scored, the reference update recomputes this probe's auroc_ea from them (or the probe, not
    scored yet, waits for them) instead of queueing them behind everything submitted meanwhile."""
    probe = version.probe
    if probe.category_id == EVAL_AWARENESS:
        return []
    ref = ea_reference_version(base_model=probe.base_model) or ea_reference_pending(
        base_model=probe.base_model
    )
    if ref is None:
        return []
    readable, _ = tasks_applicable(version=ref, tasks=tasks)
    return [(ref, REFERENCE_KIND, task, "test", probe.base_model_id) for task in readable]


SCORE = Axis(
    name=KIND,
    queue=PRIMARY_QUEUE,
    label="Score",
    description="the artifact on each active task of its category that it can read: test (with the "
    "latency and the baselines), train (the 1%-FPR threshold) and distshift",
    execute=execute,
    plan=plan,
    metric_rows=(
        "auroc",
        "auroc_ds",
        "ece",
        "brier",
        "recall_at_1pct_fpr",
        "latency_ms",
        "lift_over_text",
        "controlled_auroc",
        # the same per-task numbers averaged over the in-domain and cross-domain tasks
        "auroc_in_domain",
        "auroc_cross_domain",
        "lift_over_text_in_domain",
        "lift_over_text_cross_domain",
        "controlled_auroc_in_domain",
        "controlled_auroc_cross_domain",
    ),
    optional=False,
)

REFERENCE = Axis(
    name=REFERENCE_KIND,
    queue=PRIMARY_QUEUE,
    label="Eval-awareness reference",
    description="the base model's eval-awareness reference probe on the same test items (shared by "
    "all probes on that model)",
    execute=execute,
    plan=reference_plan,
    metric_rows=("auroc_ea",),
    optional=False,
    shown_pending=False,
)
