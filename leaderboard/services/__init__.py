"""Writes. Every change to probes, submissions, runs, scores, cycles and leakage records goes
through a function in this package, in a transaction. Functions take keyword-only arguments and
are named ``<entity>_<action>``. Celery tasks (leaderboard/tasks.py) are thin wrappers that import
these inside their bodies.

One order; each module imports only earlier ones (checked by import-linter, see pyproject.toml):

    tokens             API keys: make one (shown once), revoke; stored as SHA-256 digests
    runs               plan, dispatch on commit, claim, heartbeat, execute one run
    scores             the score writer: Score rows from stored per-example scores
    rank_intervals     the boards' rank intervals and tie groups, from stored per-example scores
    leakage            leakage records: the suspicion rules, open, review
    reference_updates  a new eval-awareness reference probe: recompute the dependents
    submissions        create, reject, advance (score once every run is finished)
    coverage           keep scored probes measured on the active tasks (backfill, rescore)
    reevaluation       quarterly cycles: holdouts, diffs, deprecation, supersession
    holdouts           a cycle's holdouts: the secret seed, the pools, the sealed files, the
                       commitment (imports no other service)
    lifecycle          the only fan-out: what happens when a run finishes; the reconciler

Reads that writers need too (the current reference probe, the runs a submission waits on, the
latest scored versions) live in ``leaderboard.selectors.shared``; policy numbers in
``leaderboard.policy``.
"""
