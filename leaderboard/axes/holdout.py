"""The holdout axis: the quarterly re-evaluation of a probe on the cycle's drawn holdout. Its runs
are planned by the cycle (``leaderboard.services.reevaluation``), not per submission, and read by
the cycle's diff, not by the score writer."""

from __future__ import annotations

from django.conf import settings

from evaluator.axes.run import execute_run
from evaluator.errors import EvaluatorError
from leaderboard import runner
from leaderboard.axes.base import Axis
from leaderboard.models import EvaluationRun
from leaderboard.policy import PRIMARY_QUEUE
from leaderboard.runner import Progress, RunOutcome
from leaderboard.sealed import holdout_file

KIND = "holdout"


def execute(run: EvaluationRun, progress: Progress) -> RunOutcome:
    """Score the probe on the cycle's drawn holdout: its sealed file opened into a private
    temporary copy for the run, re-hashed against the cycle's commitment."""
    cycle = run.cycle
    assert cycle is not None  # a holdout run belongs to a cycle
    # an on-policy task's holdout is per base model: the probe's own model's
    holdout = cycle.holdout_for(run.task_id, run.base_model_id)
    if holdout is None:
        raise EvaluatorError(f"cycle {cycle.quarter} has no holdout for {run.task_id} on {run.base_model_id}")
    own_model = run.base_model_id if "by_model" in cycle.holdouts.get(run.task_id, {}) else ""
    probe = runner.probe_for(run.probe_version)
    lm = runner.loaded_model(probe.base_model)
    with holdout_file(cycle.quarter, run.task_id, own_model, holdout["path"]) as split_file:
        result = execute_run(
            probe,
            task_id=run.task_id,
            split="holdout",
            registry=runner.registry(),
            cache_dir=settings.CACHE_DIR,
            lm=lm,
            harvest_config=runner.harvest_config(),
            progress=progress,
            split_file=split_file,
            split_sha256=holdout["sha256"],
        )
    outcome = RunOutcome(
        example_scores=result.examples.to_records(),
        metrics={"n": result.n, "model": result.model},
        timings=result.timings,
        cache_key=result.cache_key,
        split_sha256=result.split_sha256,
    )
    return runner.measured(outcome, lm)


AXIS = Axis(
    name=KIND,
    queue=PRIMARY_QUEUE,
    label="Quarterly holdout",
    description="the quarterly re-evaluation on the minted holdout",
    execute=execute,
    optional=False,
    shown_pending=False,
)
