"""Two views of a board's order beside the ProbeScore: the Borda rank across a category's tasks, and
the rank delta between the quarterly holdout and test.

Borda: on each task, every entry measured there gets the share of the other entries it beats on test
AUROC (a tie counts ½), a number in [0, 1]; an entry's Borda score is the mean of its shares over
the tasks it was measured on, and its Borda rank orders the entries by that score. Unlike the mean
AUROC, it cannot be carried by one task on which one entry is far ahead, and a task where every
entry sits at 0.99 separates nobody.

Rank delta: among the entries that have both a holdout AUROC (the latest completed quarterly cycle)
and a test AUROC, rank on the holdout minus rank on test. Positive: the entry fell behind others on
fresh rows (it was better on test than it is); 0: the order held.

Ranks are competition ranks (1, 2, 2, 4): equal values share the better rank. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

#: values closer than this are equal (stored AUROCs are rounded to 1e-6 and below)
EPS = 1e-9


def competition_ranks(values: Mapping[str, float], *, higher_is_better: bool = True) -> dict[str, int]:
    """key → 1 + the number of keys with a strictly better value."""
    sign = 1.0 if higher_is_better else -1.0
    return {k: 1 + sum(1 for o in values.values() if sign * (o - v) > EPS) for k, v in values.items()}


def borda_scores(per_task: Mapping[str, Mapping[str, float | None]]) -> dict[str, float]:
    """``per_task``: entry → task → test AUROC (None or absent: not measured there). Returns entry
    → Borda score in [0, 1] for every entry measured on at least one task shared with another."""
    tasks: dict[str, dict[str, float]] = {}
    for entry, results in per_task.items():
        for task, value in results.items():
            if value is not None:
                tasks.setdefault(task, {})[entry] = float(value)
    shares: dict[str, list[float]] = {}
    for values in tasks.values():
        if len(values) < 2:
            continue  # a task only one entry was measured on ranks nobody
        others = len(values) - 1
        for entry, v in values.items():
            beats = sum(1.0 if v - o > EPS else 0.5 if abs(v - o) <= EPS else 0.0 for o in values.values())
            shares.setdefault(entry, []).append((beats - 0.5) / others)  # minus its tie with itself
    return {entry: sum(s) / len(s) for entry, s in shares.items()}


def borda_ranks(per_task: Mapping[str, Mapping[str, float | None]]) -> dict[str, tuple[int, float]]:
    """entry → (Borda rank, Borda score)."""
    scores = borda_scores(per_task)
    ranks = competition_ranks(scores)
    return {entry: (ranks[entry], scores[entry]) for entry in scores}


def rank_deltas(pairs: Mapping[str, tuple[float | None, float | None]]) -> dict[str, int]:
    """``pairs``: entry → (holdout AUROC, test AUROC). Returns entry → holdout rank − test rank,
    over the entries that have both (at least two of them; otherwise {})."""
    both = {k: (h, t) for k, (h, t) in pairs.items() if h is not None and t is not None}
    if len(both) < 2:
        return {}
    holdout = competition_ranks({k: h for k, (h, _) in both.items()})
    test = competition_ranks({k: t for k, (_, t) in both.items()})
    return {k: holdout[k] - test[k] for k in both}
