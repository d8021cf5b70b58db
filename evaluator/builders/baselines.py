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
    root: Path, task_id: str, splits: tuple[str, ...] = ("test", "distshift")
) -> dict[str, Any]:
    """AUROC of the length-only and bag-of-words baselines (fit on train) on each split."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    base = root / "registry" / "splits" / task_id
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
