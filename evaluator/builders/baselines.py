"""Text-only confound baselines for the task cards.

A task is only worth probing if its label is not given away by surface features. For each task we
fit, on the train split, (a) a length-only logistic regression (characters and words, log-scaled)
and (b) a bag-of-words logistic regression (binary unigrams+bigrams), and report their AUROC on
test and distshift. High numbers are written into the task card as caveats.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evaluator.builders.common import read_split


def _length_features(texts: list[str]) -> list[list[float]]:
    return [[math.log1p(len(t)), math.log1p(len(t.split()))] for t in texts]


def task_baselines(
    root: Path,
    task_id: str,
    splits: tuple[str, ...] = ("test", "distshift"),
    *,
    model: str | None = None,
) -> dict[str, Any]:
    """AUROC of the length-only and bag-of-words baselines (fit on train) on each split; for an
    on-policy task, on ``model``'s own split files. These are the text-only numbers a probe's
    ``lift_over_text`` is measured against (same test rows)."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    base = root / "registry" / "splits" / task_id
    if model is not None:
        base = base / model
    train = read_split(base / "train.jsonl")
    x_train = [r["text"] for r in train]
    y_train = [r["label"] for r in train]
    length = LogisticRegression(max_iter=1000).fit(_length_features(x_train), y_train)
    vec = CountVectorizer(ngram_range=(1, 2), min_df=2, binary=True, lowercase=True)
    bow = LogisticRegression(max_iter=2000, C=1.0).fit(vec.fit_transform(x_train), y_train)
    out: dict[str, Any] = {}
    for split in splits:
        path = base / f"{split}.jsonl"
        if not path.is_file():
            continue
        rows = read_split(path)
        texts = [r["text"] for r in rows]
        labels = [r["label"] for r in rows]
        out[split] = {
            "length_auroc": round(
                float(roc_auc_score(labels, length.decision_function(_length_features(texts)))), 3
            ),
            "bow_auroc": round(float(roc_auc_score(labels, bow.decision_function(vec.transform(texts)))), 3),
            "n": len(rows),
        }
    return out


def registry_text_baselines(root: Path, task_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """task id -> the ``text_baselines`` value tasks.yaml stores for it ({split: {...}}, for an
    on-policy task {model: {split: {...}}})."""
    from evaluator.registry import load_tasks

    _, tasks = load_tasks(root / "tasks.yaml")
    out: dict[str, dict[str, Any]] = {}
    for task_id, task in tasks.items():
        if task_ids and task_id not in task_ids:
            continue
        if task.on_policy:
            out[task_id] = {m: task_baselines(root, task_id, model=m) for m in task.splits_by_model}
        else:
            out[task_id] = task_baselines(root, task_id)
    return out


def text_baselines_write(path: Path, values: dict[str, dict[str, Any]]) -> None:
    """Set ``text_baselines`` of the given tasks in tasks.yaml (after ``templates``); every other
    key and entry is kept (the tasks block is re-serialised as build-data writes it)."""
    from evaluator.builders.common import rewrite_tasks

    def edit(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for entry in entries:
            if entry["id"] in values:
                items = [(k, v) for k, v in entry.items() if k != "text_baselines"]
                at = [k for k, _ in items].index("templates") + 1 if "templates" in entry else len(items)
                entry = dict(items[:at] + [("text_baselines", values[entry["id"]])] + items[at:])
            out.append(entry)
        return out

    rewrite_tasks(path, edit)
