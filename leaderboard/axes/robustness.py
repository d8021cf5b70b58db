"""The robustness axis, on each task of a probe's category.

- **The graded attack** (``evaluator.axes.attack_graded``, a protocol with an ``attack_graded``
  budget: p2 on): vectors inserted inside the content over a grid of radii, for every probe kind.
  Its area under the relative-recall curve is the Goodhart resistance, the goodhart component of
  the ProbeScore. The curves are stored in the run's metrics.
- **The soft-suffix attack** (``evaluator.axes.attack``, the protocol's ``attack`` budget), for a
  single-prompt probe on a decoder model: the board's recall under attack, and under p1 the Goodhart
  resistance. The attacked positives' scores are stored per example; the score writer reads them
  against the clean train and test runs.
- **The transfer attack**: the suffix made against the category's reference probe, applied to it.

Final suffixes are kept in ``CACHE_DIR/attack-suffixes/`` by artifact, task and protocol."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from evaluator.axes.attack import (
    GOODHART_KEY,
    attack_applies,
    attack_metrics,
    attack_probe,
    robustness_summary,
)
from evaluator.axes.attack_graded import attack_graded
from evaluator.metrics.measure import ScoredExamples
from leaderboard import runner
from leaderboard.axes.base import FINISHED, Axis, AxisRuns, Planned, Summary
from leaderboard.models import EvaluationRun, ProbeVersion, Task
from leaderboard.policy import SECONDARY_QUEUE
from leaderboard.runner import Progress, RunOutcome
from leaderboard.selectors.shared import attack_source_version

Run = EvaluationRun
KIND = "robustness"


def plan(version: ProbeVersion, tasks: list[Task]) -> list[Planned]:
    """(version, robustness, task, "test", model) for each task: every probe on a registry model
    under a protocol with a graded budget; under one with only the suffix attack (p1), a probe that
    attack applies to (:func:`evaluator.axes.attack.attack_applies`, the CLI's rule too: one prompt,
    a decoder base model)."""
    reg = runner.registry()
    model = version.probe.base_model_id
    protocol = reg.protocol()
    if model not in reg.models or (protocol.attack is None and protocol.attack_graded is None):
        return []
    if protocol.attack_graded is None and _suffix_refused(version, reg):
        return []
    return [(version, KIND, t, "test", model) for t in tasks]


def _suffix_refused(version: ProbeVersion, reg: Any) -> str | None:
    """Why the soft-suffix attack does not apply to ``version`` (None: it does)."""
    model = version.probe.base_model_id
    return attack_applies(input_kind=version.input, model_id=model, encoder=reg.models[model].encoder)


# --------------------------------------------------------------------------- the run


def suffix_path(artifact_sha256: str, task_id: str) -> Path:
    """Where a probe's final suffix on a task is kept (under the protocol: a new budget is a new
    file); content-addressed like the activation cache, so every worker may reuse it."""
    current = runner.protocol()
    name = f"{artifact_sha256}-{task_id}-{current.id}-{current.sha256[:12]}.safetensors"
    return Path(settings.CACHE_DIR) / "attack-suffixes" / name


def _attack_kept(probe, task_id: str, lm, progress: Progress) -> dict:
    """The protocol's attack on ``probe``, its final suffix kept at :func:`suffix_path` (written
    whole or not at all: two workers may race, and both write the same bytes)."""
    path = suffix_path(probe.sha256, task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.part")
    out = attack_probe(
        probe,
        task_id=task_id,
        registry=runner.registry(),
        cache_dir=settings.CACHE_DIR,
        lm=lm,
        progress=progress,
        suffix_out=partial,
    )
    if partial.exists():
        os.replace(partial, path)
    return out


def _transfer_attack(run: EvaluationRun, probe, lm, progress: Progress) -> dict | None:
    """The transfer attack on the run's task: the suffix made against the category's reference probe
    on this base model (selectors.shared.attack_source_version; made now and kept if no worker has
    made it yet) applied to this probe, one forward. None when the category has no such reference;
    ``{"source", "self": True}`` when this probe is it."""
    version = run.probe_version
    source = attack_source_version(
        category_id=version.probe.category_id, base_model_id=version.probe.base_model_id, task_id=run.task_id
    )
    if source is None:
        return None
    about = {"source": source.probe.slug, "source_version": source.number}
    if source.pk == version.pk:
        return {**about, "self": True}
    path = suffix_path(source.artifact_sha256, run.task_id)
    if not path.exists():
        _attack_kept(
            runner.probe_for(source), run.task_id, lm, lambda f, m: progress(0.5 + 0.4 * f, f"source {m}")
        )
    out = attack_probe(
        probe,
        task_id=run.task_id,
        registry=runner.registry(),
        cache_dir=settings.CACHE_DIR,
        lm=lm,
        suffix_in=path,
    )
    return {
        **about,
        "self": False,
        "recall_attacked": out["recall_attacked"],
        "scores": out["scores"]["positives_attacked"],
    }


def _attack_reused(run: EvaluationRun, probe) -> dict | None:
    """A robustness run queued again for its transfer attack (services.runs.transfer_attacks_refresh)
    keeps its direct attack: the same artifact, task and protocol give the same suffix, whose file is
    in the cache. None when there is nothing to keep (a first run, another protocol, no file)."""
    previous = (run.metrics or {}).get("attack")
    if (
        not previous
        or not run.example_scores
        or (previous.get("budget") or {}).get("protocol") != runner.protocol().id
        or not suffix_path(probe.sha256, run.task_id).exists()
    ):
        return None
    return {
        **previous,
        "ids": {"positives": [e["id"] for e in run.example_scores]},
        "scores": {"positives_attacked": [float(e["score"]) for e in run.example_scores]},
        "n_positives": len(run.example_scores),
        "seconds": 0.0,
    }


def _graded(run: EvaluationRun, probe, lm, progress: Progress) -> dict | None:
    """The protocol's graded attack on the run's task (None: the protocol has no graded budget); a
    run queued again keeps the curves it measured under the same protocol (they are a function of
    the artifact, the task and the protocol)."""
    if runner.protocol().attack_graded is None:
        return None
    previous = (run.metrics or {}).get("graded")
    if previous and previous.get("protocol") == runner.protocol().id:
        return previous
    return attack_graded(
        probe,
        task_id=run.task_id,
        registry=runner.registry(),
        cache_dir=settings.CACHE_DIR,
        lm=lm,
        progress=progress,
    )


def execute(run: EvaluationRun, progress: Progress) -> RunOutcome:
    """The graded attack (its curves in the metrics), then, where it applies, the protocol's
    soft-suffix attack against the frozen probe on one task's test positives and the transfer attack
    (the category reference's suffix applied to it): the suffix-attacked scores are stored per
    example (the score writer recomputes the recalls from them and the clean runs), the recall curve
    over the steps and the transfer's scores in the metrics."""
    probe = runner.probe_for(run.probe_version)
    lm = runner.loaded_model(probe.base_model)
    reg = runner.registry()
    suffix = reg.protocol().attack is not None and not _suffix_refused(run.probe_version, reg)
    share = 0.7 if suffix else 1.0
    graded = _graded(run, probe, lm, lambda f, m: progress(share * f, f"graded {m}"))
    metrics: dict[str, Any] = {"graded": graded}
    timings = {"graded": graded["seconds"]} if graded else {}
    example_scores: list[dict] = []
    if suffix:
        out = _attack_reused(run, probe) or _attack_kept(
            probe, run.task_id, lm, lambda f, m: progress(share + (1 - share) * 0.5 * f, m)
        )
        transfer = _transfer_attack(run, probe, lm, progress)
        attacked = out["scores"]["positives_attacked"]
        probs = probe.probability(np.asarray(attacked, dtype=np.float64)).tolist() if attacked else []
        keys = (
            "threshold",
            "recall_clean",
            "recall_attacked",
            "steps",
            "steps_run",
            "best_step",
            "steps_to_half",
            "curve",
            "budget",
        )
        example_scores = [
            {"id": i, "label": 1, "score": float(s), "prob": float(p)}
            for i, s, p in zip(out["ids"]["positives"], attacked, probs, strict=True)
        ]
        metrics.update(attack={k: out[k] for k in keys}, transfer=transfer, n=out["n_positives"])
        timings["suffix"] = out["seconds"]
        if "attack_seconds" in out:
            timings["attack"] = out["attack_seconds"]  # the suffix's optimisation, within its seconds
    total = timings.get("graded", 0.0) + timings.get("suffix", 0.0)
    outcome = RunOutcome(example_scores=example_scores, metrics=metrics, timings={"total": total, **timings})
    progress(1.0, "attacked")
    return runner.measured(outcome, lm)


# --------------------------------------------------------------------------- the summary


def robustness_measurements(
    robust: Mapping[str, EvaluationRun], by_task: Mapping[str, Mapping[str, EvaluationRun]]
) -> tuple[dict[str, Any], str]:
    """Each task's robustness run read against its clean train and test runs: the graded attack's
    curves (:func:`graded_read`), and the suffix-attacked positives' scores
    (:func:`evaluator.axes.attack.attack_metrics`); summed up by
    :func:`evaluator.axes.attack.robustness_summary`; and why the Goodhart resistance is not measured
    ("" when it is). ({}, reason) when no robustness run exists."""
    if not robust:
        return (
            {},
            "not measured: no robustness run was planned (under p1: a contrast-pair probe or an encoder)",
        )
    per_task, pending, failed = {}, [], []
    for task_id, run in sorted(robust.items()):
        splits = by_task.get(task_id, {})
        if run.status not in FINISHED:
            pending.append(task_id)
            continue
        if run.status != Run.Status.SUCCEEDED or "train" not in splits or "test" not in splits:
            failed.append(task_id)  # a failed robustness run leaves the task out (its error is on the run)
            continue
        per_task[task_id] = _task_read(run, splits)
    summary = robustness_summary(per_task, pending=pending)
    if summary[GOODHART_KEY] is not None:
        return summary, ""
    if pending:
        return summary, f"pending: the attack on {', '.join(pending)} is not measured yet"
    if failed and not per_task:
        return summary, f"the attack failed on {', '.join(failed)}"
    if any(t.get("not_attacked") for t in per_task.values()):
        return summary, "not measured: on every task the clean threshold catches too few attacked positives"
    return summary, "the clean recall at 1% FPR is 0 on every task: nothing for an attack to take"


def _task_read(run: EvaluationRun, splits: Mapping[str, EvaluationRun]) -> dict[str, Any]:
    """One task's robustness facts: the suffix attack's (recomputed from the stored scores) where it
    ran, and the graded attack's, whose area is then the task's Goodhart resistance."""
    train = ScoredExamples.from_records(splits["train"].example_scores)
    test = ScoredExamples.from_records(splits["test"].example_scores)
    train_negatives = train.scores[train.labels == 0]
    metrics = run.metrics or {}
    out: dict[str, Any] = {}
    if "attack" in metrics:
        attack = metrics["attack"] or {}
        attacked = ScoredExamples.from_records(run.example_scores)
        out = {
            **attack_metrics(
                train_negatives=train_negatives, test=(test.labels, test.scores), attacked=attacked.scores
            ),
            "steps": attack.get("steps"),
            "steps_run": attack.get("steps_run"),
            "steps_to_half": attack.get("steps_to_half"),
            "curve": attack.get("curve") or [],
            "transfer": _transfer_read(metrics.get("transfer"), train_negatives, test),
            "method": "suffix",
        }
    graded = metrics.get("graded")
    if graded:
        out["suffix_resistance"] = out.pop(GOODHART_KEY, None)
        out.update(graded_read(graded))
    return out


def graded_read(graded: Mapping[str, Any]) -> dict[str, Any]:
    """What the board keeps of one task's graded attack: the area (mean over seeds) as the task's
    Goodhart resistance, its range over seeds, ε50 and the insertion's recall per seed, each seed's
    curve as (ε, relative recall) points, and the area where the evasion must keep the behaviour
    (``kept``: where the task's readout validates on the model, else why not); or why the task was
    not attacked."""
    out: dict[str, Any] = {
        "method": "graded",
        "protocol": graded.get("protocol"),
        "caught_clean": graded.get("caught_clean"),
        "attacked_positives": graded.get("n_positives"),
        "not_attacked": graded.get("not_attacked"),
        GOODHART_KEY: graded.get(GOODHART_KEY),
    }
    if graded.get("not_attacked"):
        return out
    kept = graded.get("behaviour_kept") or {}
    readout = kept.get("readout") or {}
    return {
        **out,
        "kept": {
            "applies": bool(readout.get("applies")),
            "reason": readout.get("reason", ""),
            "readout_auroc": readout.get("readout_auroc"),
            "tolerance": readout.get("tolerance"),
            GOODHART_KEY: kept.get(GOODHART_KEY),
            "goodhart_resistance_range": kept.get("goodhart_resistance_range"),
        },
        "goodhart_resistance_range": graded.get("goodhart_resistance_range"),
        "eps50": graded.get("eps50"),
        "recall_inserted": graded.get("recall_inserted"),
        "curves": [
            {
                "seed": c["seed"],
                "area": c["area"],
                "eps50": c["eps50"],
                "points": [[p["eps"], p["relative"]] for p in c["curve"]],
            }
            for c in graded.get("seeds") or []
        ],
    }


def _transfer_read(
    stored: dict[str, Any] | None, train_negatives: Any, test: ScoredExamples
) -> dict[str, Any] | None:
    """A robustness run's transfer attack, its recall recomputed from the stored scores (None: the
    category has no reference probe on this model to make the suffix against)."""
    if not stored:
        return None
    about = {"source": stored.get("source"), "source_version": stored.get("source_version")}
    if stored.get("self"):
        return {**about, "self": True}
    m = attack_metrics(
        train_negatives=train_negatives,
        test=(test.labels, test.scores),
        attacked=np.asarray(stored.get("scores") or [], dtype=np.float64),
    )
    return {
        **about,
        "self": False,
        "recall_attacked": m["recall_attacked"],
        "goodhart_resistance": m["goodhart_resistance"],
    }


def summarise(measured: AxisRuns) -> Summary:
    """The robustness of the tasks the probe is scored on, and the goodhart component's input."""
    robust = {r.task_id: r for r in measured.runs}
    summary, note = robustness_measurements(
        {t: r for t, r in robust.items() if t in measured.clean}, measured.clean
    )
    return Summary(
        stored={"robustness": summary},
        scored={"goodhart": summary.get(GOODHART_KEY), "goodhart_note": note},
    )


AXIS = Axis(
    name=KIND,
    queue=SECONDARY_QUEUE,
    label="Robustness",
    description="the protocol's graded attack inside the content (every probe kind), its soft-suffix "
    "attack against the frozen artifact, and the transfer attack made against the category's reference probe",
    execute=execute,
    plan=plan,
    summarise=summarise,
    metric_rows=("goodhart_resistance", "attack_recall", "transfer_attack_recall"),
    legacy_setting="ROBUSTNESS_RUNS",
)
