"""The SAE axis: beside an ``sae_features`` probe, the same-k neuron probe and the dense probe fit
on its training task, scored on the same test rows of each task it reads, and the feature cards of
its latents (``evaluator.axes.sae_baselines``). It fills no ProbeScore component: the probe page
and the API read its runs (``selectors.probes.ProbeDetail.sae``)."""

from __future__ import annotations

from django.conf import settings

from evaluator.axes.sae_baselines import sae_baselines
from evaluator.data.corpus import corpus_load
from evaluator.metrics.in_domain import in_domain_tasks
from leaderboard import runner
from leaderboard.axes.base import Axis, Planned
from leaderboard.models import EvaluationRun, ProbeVersion, Task
from leaderboard.policy import SECONDARY_QUEUE
from leaderboard.runner import Progress, RunOutcome

Run = EvaluationRun
KIND = "sae"
SAE_KIND = "sae_features"


def training_task(version: ProbeVersion) -> str | None:
    """The registry task an SAE probe was fit on: its recipe's, else the one registry task it
    declares (None: external or several, so no baseline can be fit on the same rows)."""
    tasks = in_domain_tasks(version) or set()
    return next(iter(tasks)) if len(tasks) == 1 and next(iter(tasks)) in runner.registry().tasks else None


def plan(version: ProbeVersion, tasks: list[Task]) -> list[Planned]:
    """(version, sae, task, "test", model) for each task an ``sae_features`` probe reads, when it
    names one registry training task; nothing for another kind."""
    if version.kind != SAE_KIND or training_task(version) is None:
        return []
    return [(version, KIND, t, "test", version.probe.base_model_id) for t in tasks]


def _documents(train_task: str, task: str) -> list[str] | None:
    """The held-out corpus documents of the probe's SAE, for the run on its training task only
    (one set of feature cards per probe)."""
    if task != train_task:
        return None
    saes = runner.registry().saes
    split = corpus_load(
        saes.default_corpus, root=settings.REGISTRY_ROOT, sources_dir=settings.HOLDOUT_SOURCES_DIR
    )
    return list(split.heldout)


def execute(run: EvaluationRun, progress: Progress) -> RunOutcome:
    version = run.probe_version
    probe = runner.probe_for(version)
    lm = runner.loaded_model(probe.base_model)
    train_task = training_task(version)
    if train_task is None:  # planned only with one; the version cannot have changed
        raise ValueError("this SAE probe names no single registry training task")
    result = sae_baselines(
        probe,
        train_task=train_task,
        tasks=[run.task_id],
        registry=runner.registry(),
        cache_dir=settings.CACHE_DIR,
        lm=lm,
        documents=_documents(train_task, run.task_id),
        harvest_config=runner.harvest_config(),
        progress=progress,
    )
    outcome = RunOutcome(
        metrics={"sae": result.to_dict()},
        timings={"total": result.seconds},
        cache_key=result.train_cache_key,
    )
    return runner.measured(outcome, lm)


AXIS = Axis(
    name=KIND,
    queue=SECONDARY_QUEUE,
    label="SAE baselines",
    description="an SAE-feature probe beside the same-k neuron probe and the dense probe on the same "
    "rows, and what its latents read",
    execute=execute,
    plan=plan,
)
