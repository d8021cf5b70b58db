"""The policy numbers of SPEC.md §5–§6 and the rules they drive, in one home that both the writers
(``leaderboard.services``) and the readers (``leaderboard.selectors``, the methodology page) import.

No database access here: constants and small pure functions only.
"""

from __future__ import annotations

#: attempts of one evaluation run before an infrastructure fault fails it (Celery retries up to it)
MAX_ATTEMPTS = 3
#: the splits a probe is scored on, where the task has them
SCORE_SPLITS = ("test", "train", "distshift")

# Quarterly re-evaluation (SPEC.md §6). AUROC "points" are AUROC × 100.
DIFF_POINTS = 5.0  # a drop above this is listed in the public diff
DEPRECATE_POINTS = 10.0  # a drop above this deprecates the entry
LEAKAGE_POINTS = 10.0  # test AUROC above holdout AUROC by more than this opens a leakage record
STABILITY_MIN_QUARTERS = 2
REVIEW_GOAL_DAYS = 7  # SPEC.md §1: maintainers aim to review within 7 days


def spec_version_key(version: str) -> tuple:
    """Order weights spec versions ("v0.0.2" after "v0.0.1"; a malformed one first)."""
    try:
        return (0, *(int(x) for x in version.lstrip("v").split(".")))
    except ValueError:
        return (-1, version)
