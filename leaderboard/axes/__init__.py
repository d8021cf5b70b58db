"""The measurement axes, one module each (``base.Axis``: its run kind, its queue, how its runs
are planned, the worker function, its part of the Score, its metric rows), listed once in ``AXES``.

    score        score + reference: the artifact on its tasks' splits (the test run measures the
                 latency and the baselines too); the eval-awareness reference on the same items
    transfer     the recipe re-fit on the other base models (ρ_CE)
    reproduce    the recipe re-run on the source model, compared with the artifact
    steer        direction utility
    stress       the artifact on the stress splits
    robustness   the soft-suffix attack and the transfer attack (the goodhart component)
    sae          an SAE-feature probe beside its same-k neuron and dense baselines; its feature cards
    holdout      the quarterly re-evaluation (planned by the cycles)

The worker (``run_execute``), the planner (``services.runs.evaluation_runs_plan``, over the axes
``PROBEBENCH_AXES`` enables), the score writer (``services.scores.measurements_compute``, over every
declared axis), the queues (``run_queue``), the progress display (``selectors.progress``) and the
admin loop over ``AXES``; its order is the order they show the axes in. A new axis is a module here
and a line in ``AXES`` (docs/ARCHITECTURE.md, "Adding an axis"); its run kind needs no migration.
"""

from __future__ import annotations

import difflib

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from leaderboard.axes import holdout, reproduce, robustness, sae, score, steer, stress, transfer
from leaderboard.axes.base import Axis
from leaderboard.models import EvaluationRun
from leaderboard.policy import PRIMARY_QUEUE
from leaderboard.runner import Progress, RunOutcome

AXES: tuple[Axis, ...] = (
    score.SCORE,
    score.REFERENCE,
    transfer.AXIS,
    reproduce.AXIS,
    steer.AXIS,
    stress.AXIS,
    robustness.AXIS,
    sae.AXIS,
    holdout.AXIS,
)
_BY_NAME = {a.name: a for a in AXES}
#: the run kinds, in the order of AXES
KINDS: tuple[str, ...] = tuple(_BY_NAME)
#: the kinds the board ranks on (a submission is scored once these have finished)
PRIMARY_KINDS: tuple[str, ...] = tuple(a.name for a in AXES if a.queue == PRIMARY_QUEUE)


class UnknownAxisError(LookupError):
    """A run kind no axis declares."""

    def __init__(self, name: str):
        hint = difflib.get_close_matches(str(name), KINDS, n=1)
        did_you_mean = f" (did you mean {hint[0]!r}?)" if hint else ""
        super().__init__(f"unknown run kind {name!r}{did_you_mean}; declared: {', '.join(KINDS)}")


def axis(kind: str) -> Axis:
    """The axis of a run kind (UnknownAxisError, naming the declared ones, for any other)."""
    try:
        return _BY_NAME[kind]
    except KeyError:
        raise UnknownAxisError(kind) from None


def run_queue(kind: str) -> str:
    """The Celery queue of an evaluation run of ``kind``: its axis's."""
    return axis(kind).queue


def axes_enabled() -> list[Axis]:
    """The axes runs are planned for, in the order of AXES: those ``settings.ENABLED_AXES``
    (``PROBEBENCH_AXES``) names, every one when it is empty, and always those that may not be left
    out; less each optional axis whose deprecated boolean setting (``STEER_RUNS``...) is False.
    Read on each call, so a test may set either."""
    named = set(settings.ENABLED_AXES)
    return [
        a
        for a in AXES
        if not a.optional
        or ((not named or a.name in named) and (not a.legacy_setting or getattr(settings, a.legacy_setting)))
    ]


def axes_settings_check() -> None:
    """Refuse ``PROBEBENCH_AXES`` naming an axis nobody declared (at start-up: leaderboard.apps)."""
    for name in settings.ENABLED_AXES:
        if name not in _BY_NAME:
            raise ImproperlyConfigured(f"PROBEBENCH_AXES: {UnknownAxisError(name).args[0]}")


def run_execute(*, run: EvaluationRun, progress: Progress) -> RunOutcome:
    """Measure one run: its axis's worker function (a run row in, the values to store out)."""
    return axis(run.kind).execute(run, progress)
