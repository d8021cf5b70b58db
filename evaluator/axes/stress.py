"""A probe on the stress splits: does it keep its AUROC, and keep catching positives at its
operating point, when the input changes form?

For each task of the probe's category that has a stress split (``evaluator.data.builders.stress``), the
probe scores its train, test and stress rows (the train split only to fix the operating point).
The threshold is the one that flags at most 1% of the clean train negatives (as for Recall@1%FPR
on the board). Per transform: AUROC over that transform's rows, recall of its positives at the
threshold, the false-positive rate of its negatives there (a transform that makes everything look
positive shows here, not in the recall), and the drops from the clean test rows. A transform of the
negative rows only (the hard negatives, ``concept_words``) is read against the clean test positives:
its AUROC asks whether they still outrank negatives that use the concept's words, its FPR how many
of those the probe flags.

Each transform is read twice. ``auroc`` (and the recall and FPR beside it) is the probe where it
reads on the transformed text: the monitor as deployed. A wrapper that appends a tail after the
content (chat, json, dilution) puts its own closing tokens where a last-token probe reads, so
``auroc_content_end`` reads the same stress rows cut where the original content ends (the
``stress_content_end`` split, derived from the stress file): the representation of the content
inside the same wrapper. For a transform with no tail the two readings are the same rows and the
same numbers. A drop in ``auroc`` without one in ``auroc_content_end`` is the read position, not
the representation.

``python -m evaluator stress --probe DIR [--task T ...] --json`` prints it. Metrics are computed
from the per-row scores, which are printed with ``--scores``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.axes.evaluate import _tasks_for
from evaluator.axes.run import MeasureSetup, as_probe, as_registry, harvest_config_default, measure_split
from evaluator.data.registry.load import Registry
from evaluator.data.registry.tasks import STRESS_CONTENT_END_SPLIT, STRESS_SPLIT
from evaluator.errors import EvaluatorError
from evaluator.metrics.metric_table import OPERATING_FPR
from evaluator.metrics.metrics import auroc, fpr_at_threshold, recall_at_fpr, threshold_at_fpr
from evaluator.metrics.results import no_progress


def transform_of(row_id: str) -> str:
    """The transform a stress row was made with (its id is ``<test id>~<transform>``)."""
    if "~" not in row_id:
        raise EvaluatorError(f"row {row_id!r} is not a stress row (no ~transform suffix)")
    return row_id.rsplit("~", 1)[1]


def stress_metrics(
    *,
    train_negatives: np.ndarray,
    test: tuple[Sequence[str], np.ndarray, np.ndarray],
    stress: tuple[Sequence[str], np.ndarray, np.ndarray],
    content_end: tuple[Sequence[str], np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """``test``: (ids, labels, scores) of the clean test rows; ``stress``: (ids, labels, scores) of
    the stress rows. "clean" is read on the test rows the stress split rewrites (its base rows), so
    each drop is paired: the same rows, clean and transformed. Returns ``{"threshold", "clean":
    {auroc, recall, fpr, n}, "transforms": {name: {auroc, recall, fpr, auroc_drop, recall_drop,
    n}}, "worst": {auroc, recall}}``.

    ``content_end``: (ids, labels, scores) of the ``stress_content_end`` rows, the same stress rows
    cut where their original content ends (only the transforms that append a tail: chat, json,
    dilution). Each transform then also gets ``auroc_content_end``, ``recall_content_end`` and
    ``fpr_content_end``: the probe read at the end of the content inside the same wrapper (for a
    transform with no tail the two readings are one, and the values are the same), and ``worst``
    gets ``auroc_content_end`` and ``recall_content_end``."""

    threshold = threshold_at_fpr(train_negatives, OPERATING_FPR)
    ids, labels, scores = stress
    base = {i.rsplit("~", 1)[0] for i in ids}
    on_base = np.array([i in base for i in test[0]], dtype=bool)
    if on_base.sum() != len(base):
        raise EvaluatorError(
            f"stress: {len(base) - int(on_base.sum())} stress base row(s) are not among the test rows"
        )
    test_labels, test_scores = np.asarray(test[1])[on_base], np.asarray(test[2], dtype=np.float64)[on_base]

    def point(labels: np.ndarray, scores: np.ndarray) -> dict[str, float]:
        return {
            "auroc": auroc(scores, labels),
            "recall": recall_at_fpr(scores, labels, threshold),
            "fpr": fpr_at_threshold(scores, labels, threshold),
        }

    clean = point(test_labels, test_scores) | {"n": int(on_base.sum())}
    kinds = np.array([transform_of(i) for i in ids])
    transforms: dict[str, dict[str, float]] = {}
    for kind in dict.fromkeys(kinds.tolist()):  # file order
        mask = kinds == kind
        if (labels[mask] == 0).all():
            # hard negatives (negative rows only): against the clean base positives, so the AUROC
            # asks whether real positives still outrank negatives that use the concept's words
            p = point(
                np.concatenate([test_labels[test_labels == 1], labels[mask]]),
                np.concatenate([test_scores[test_labels == 1], scores[mask]]),
            )
        else:
            p = point(labels[mask], scores[mask])
        transforms[kind] = p | {
            "auroc_drop": clean["auroc"] - p["auroc"],
            "recall_drop": clean["recall"] - p["recall"],
            "n": int(mask.sum()),
        }
    worst = {
        "auroc": min(t["auroc"] for t in transforms.values()),
        "recall": min(t["recall"] for t in transforms.values()),
    }
    if content_end is not None:
        cut_ids, cut_labels, cut_scores = content_end
        cut_kinds = np.array([transform_of(i) for i in cut_ids])
        for kind, t in transforms.items():
            mask = cut_kinds == kind
            if not mask.any():
                cut = {k: t[k] for k in ("auroc", "recall", "fpr")}
            elif (cut_labels[mask] == 0).all():  # pragma: no cover - no tail on a negatives-only transform
                raise EvaluatorError(f"stress: content-end rows of {kind} have no positive row")
            else:
                if int(mask.sum()) != t["n"]:
                    raise EvaluatorError(
                        f"stress: {int(mask.sum())} content-end rows of {kind}, {t['n']} stress rows"
                    )
                cut = point(np.asarray(cut_labels)[mask], np.asarray(cut_scores, dtype=np.float64)[mask])
            t.update({f"{k}_content_end": v for k, v in cut.items()})
        worst["auroc_content_end"] = min(t["auroc_content_end"] for t in transforms.values())
        worst["recall_content_end"] = min(t["recall_content_end"] for t in transforms.values())
    return {"threshold": threshold, "clean": clean, "transforms": transforms, "worst": worst}


#: Score.measurements keys of the stress axis (a secondary run per task, beside the ProbeScore)
STRESS_AUROC_KEY = "stress_auroc"
STRESS_RECALL_KEY = "stress_recall"
STRESS_AUROC_CONTENT_END_KEY = "stress_auroc_content_end"
#: a transform's numbers at each reading (the deployed reading, then the content end)
_POINT = ("auroc", "recall", "fpr", "n")
_CONTENT_END_POINT = ("auroc_content_end", "recall_content_end", "fpr_content_end")


def stress_summary(per_task: dict[str, dict[str, Any]], *, pending: Sequence[str] = ()) -> dict[str, Any]:
    """The stress axis as a Score keeps it, from each task's :func:`stress_metrics`:
    ``stress_auroc`` and ``stress_recall`` (the mean over tasks of the worst transform's AUROC and
    recall at the clean threshold, read where the probe reads: the monitor as deployed; None when
    no task was measured, or while a task's stress run is ``pending``),
    ``stress_auroc_content_end`` (the same read at the end of the original content: the
    representation; None unless every task has its content-end reading) and ``stress``: per task
    the threshold, the clean point, every transform's point at both readings and the worst."""
    tasks = {
        task_id: {
            "threshold": r["threshold"],
            "clean": dict(r["clean"]),
            "worst": dict(r["worst"]),
            "transforms": {
                name: {k: t[k] for k in (*_POINT, *_CONTENT_END_POINT) if k in t}
                for name, t in r["transforms"].items()
            },
        }
        for task_id, r in sorted(per_task.items())
    }
    complete = bool(tasks) and not pending
    both = complete and all("auroc_content_end" in t["worst"] for t in tasks.values())
    return {
        STRESS_AUROC_KEY: float(np.mean([t["worst"]["auroc"] for t in tasks.values()])) if complete else None,
        STRESS_RECALL_KEY: float(np.mean([t["worst"]["recall"] for t in tasks.values()]))
        if complete
        else None,
        STRESS_AUROC_CONTENT_END_KEY: float(
            np.mean([t["worst"]["auroc_content_end"] for t in tasks.values()])
        )
        if both
        else None,
        "stress": tasks,
    }


def stress_probe(
    probe,
    *,
    registry: Registry | str | Path | None,
    cache_dir: str | Path,
    tasks: Sequence[str] | None = None,
    device: str | None = None,
    scores: bool = False,
) -> dict[str, Any]:
    """The stress metrics of ``probe`` on every task of its category that has a stress split (or
    ``tasks``). ``scores``: also every stress row's score and the clean test scores."""

    reg = as_registry(registry)
    p = as_probe(probe, reg)
    setup = MeasureSetup(reg, cache_dir, device, None, harvest_config_default(reg), None)
    task_ids, not_applicable = _tasks_for(p, reg, tasks)
    without = [t for t in task_ids if reg.task(t).stress is None]
    out: dict[str, Any] = {"probe": p.metadata.name, "base_model": p.base_model, "tasks": {}}
    lm = None
    for task_id in task_ids:
        if reg.task(task_id).stress is None:
            continue
        measured = {}
        for split in ("train", "test", STRESS_SPLIT, STRESS_CONTENT_END_SPLIT):
            m = measure_split(p, task_id=task_id, split=split, setup=setup, lm=lm, progress=no_progress)
            lm, measured[split] = m.lm, m.run.examples
        train, test, stress = measured["train"], measured["test"], measured[STRESS_SPLIT]
        cut = measured[STRESS_CONTENT_END_SPLIT]
        result = stress_metrics(
            train_negatives=train.scores[train.labels == 0],
            test=(test.ids, test.labels, test.scores),
            stress=(stress.ids, stress.labels, stress.scores),
            content_end=(cut.ids, cut.labels, cut.scores),
        )
        if scores:
            result["scores"] = {i: float(s) for i, s in zip(stress.ids, stress.scores, strict=True)}
            result["scores_content_end"] = {i: float(s) for i, s in zip(cut.ids, cut.scores, strict=True)}
            # the clean scores of the base rows too: "clean" is read on them, and a hard-negative
            # transform against their positives
            base = {i.rsplit("~", 1)[0] for i in stress.ids}
            result["test_scores"] = {
                i: float(s) for i, s in zip(test.ids, test.scores, strict=True) if i in base
            }
        out["tasks"][task_id] = result
    out["not_measured"] = {t: "no stress split (an on-policy task)" for t in without} | {
        t: str(why) for t, why in (not_applicable or {}).items()
    }
    if not out["tasks"]:
        raise EvaluatorError(
            f"no task of {p.metadata.category} that {p.metadata.name} reads has a stress split"
        )
    return out
