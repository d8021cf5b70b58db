"""The policy numbers (norms, re-evaluation, leakage; docs/METHODOLOGY.md) and the rules they
drive, in one home that both the writers (``leaderboard.services``) and the readers
(``leaderboard.selectors``, the methodology page) import.

No database access here: constants and small pure functions only.
"""

from __future__ import annotations

#: how long anyone may cache a public page or read API answer (``Cache-Control: max-age``); the
#: board's count cache lives as long (selectors.board)
PUBLIC_MAX_AGE_S = 60
#: attempts of one evaluation run before an infrastructure fault fails it (Celery retries up to it)
MAX_ATTEMPTS = 3
#: the splits a probe is scored on, where the task has them
SCORE_SPLITS = ("test", "train", "distshift")
# Run priorities. The runs the board ranks on (a probe's scores on its tasks, the eval-awareness
# reference's on the same items, the quarterly holdouts) go to the primary queue; the secondary axes
# (transfer, reproduction, steering, stress, robustness) to the secondary queue: each axis declares
# its queue (leaderboard.axes, ``run_queue``). A worker consumes the queues in the order of
# WORKER_QUEUES and takes the next message from the first non-empty one (bookkeeping first: seconds
# each, and it publishes the scores), so a queued score run starts before any queued secondary run.
# A submission is scored (and on the board) once its primary runs have finished; each secondary run
# that finishes after rescores it.
PRIMARY_QUEUE = "primary"
SECONDARY_QUEUE = "secondary"
DEFAULT_QUEUE = "default"  # bookkeeping: reference updates, rank intervals, the reconciler
WORKER_QUEUES = f"{DEFAULT_QUEUE},{PRIMARY_QUEUE},{SECONDARY_QUEUE}"


# Fair shares. Within a queue, the next run is the oldest run of the maintainers' own work (the
# system account's reference probes, the quarterly re-evaluation), else a run of the submitter whose
# latest run on that queue started longest ago (services.runs.evaluation_run_next): round-robin
# across submitters. A run put back after an infrastructure fault waits for its retry (the run
# task's exponential backoff, RUN_RETRY_BACKOFF_S doubling up to RUN_RETRY_BACKOFF_MAX_S).
RUN_RETRY_BACKOFF_S = 10
RUN_RETRY_BACKOFF_MAX_S = 300
#: seconds one run of a kind is estimated to take before any run of that kind has finished (then
#: the measured mean of its latest finished runs is used): the queue cap's and the queue page's
#: estimate of an account's queued work (PROBEBENCH_MAX_QUEUED_RUN_SECONDS)
RUN_SECONDS_DEFAULT = {
    "score": 60,
    "reference": 60,
    "holdout": 60,
    "reproduce": 120,
    "stress": 120,
    "transfer": 300,
    "steer": 300,
    "robustness": 600,
}
#: a kind added later, until it has a default of its own
RUN_SECONDS_DEFAULT_OTHER = 300


# Saturation: a task (or a board) where more than this share of the entries score at least
# SATURATED_AUROC test AUROC no longer separates them on AUROC; its page says so and the board
# leads with the columns that still separate its entries.
SATURATED_AUROC = 0.99
SATURATED_SHARE = 0.5


def saturated(high: int, n: int) -> bool:
    """Whether ``high`` entries at or above SATURATED_AUROC are most of ``n`` (at least two)."""
    return n >= 2 and high > SATURATED_SHARE * n


# Quarterly re-evaluation. AUROC "points" are AUROC × 100.
DIFF_POINTS = 5.0  # a drop above this is listed in the public diff
DEPRECATE_POINTS = 10.0  # a drop above this deprecates the entry
LEAKAGE_POINTS = 10.0  # test AUROC above holdout AUROC by more than this opens a leakage record
STABILITY_MIN_QUARTERS = 2
REVIEW_GOAL_DAYS = 7  # maintainers aim to review within 7 days


def spec_version_key(version: str) -> tuple:
    """Order weights spec versions ("v0.0.2" after "v0.0.1"; a malformed one first)."""
    try:
        return (0, *(int(x) for x in version.lstrip("v").split(".")))
    except ValueError:
        return (-1, version)
