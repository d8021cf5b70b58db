"""What a measurement axis declares (``Axis``) and what its functions exchange: the runs it plans
(``Planned``), the runs its summary reads (``AxisRuns``) and its part of the Score (``Summary``).

An axis is one run kind. Its module says which queue its runs go to, how its runs are planned for
a probe version (nothing where it does not apply), the worker function that measures one run, how
its stored runs become its part of the Score, and the rows of the metric table
(``evaluator/metrics/metric_table.py``) it fills. ``leaderboard.axes.AXES`` lists the axes once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from leaderboard.models import EvaluationRun, ProbeVersion, Task
from leaderboard.policy import PRIMARY_QUEUE, SECONDARY_QUEUE
from leaderboard.runner import Progress, RunOutcome

Run = EvaluationRun
#: the queues a run may go to (``leaderboard.policy``)
QUEUES = (PRIMARY_QUEUE, SECONDARY_QUEUE)
#: a run that will not change any more
FINISHED = (Run.Status.SUCCEEDED, Run.Status.FAILED)

#: one run to create: (probe version, kind, task, split, base model id)
Planned = tuple[ProbeVersion, str, Task, str, str]


@dataclass(frozen=True)
class AxisRuns:
    """What an axis's summary is read from: its runs of one probe version outside any cycle
    (``runs``, any status), and that version's succeeded score runs by task and split (``clean``:
    the clean runs a stress or robustness run is read against)."""

    runs: list[EvaluationRun]
    clean: Mapping[str, Mapping[str, EvaluationRun]]


@dataclass(frozen=True)
class Summary:
    """An axis's part of the Score, from its stored runs only (no model):

    - ``stored``: keywords of ``evaluator.metrics.records.aggregate_stored`` (what the Score keeps
      beside the ProbeScore: ``transfer``, ``steer``, ``stress``, ``robustness``);
    - ``scored``: keywords of ``evaluator.metrics.measure.aggregate_measurements`` (what the
      ProbeScore reads: ``transfer_pearsons``, ``goodhart``, ``goodhart_note``);
    - ``imputed``: why a component is imputed, in place of the default reason;
    - ``computed``: what the probe version records beside its Score (the reproduction).
    """

    stored: Mapping[str, Any] = field(default_factory=dict)
    scored: Mapping[str, Any] = field(default_factory=dict)
    imputed: Mapping[str, str] = field(default_factory=dict)
    computed: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Axis:
    """One measurement axis, declared once (its module) and listed once (``leaderboard.axes.AXES``)."""

    #: the run kind (``EvaluationRun.kind``): any declared name, no migration needed
    name: str
    #: ``primary`` (the board ranks on it: scored once these runs have finished) or ``secondary``
    queue: str
    label: str
    description: str
    #: the worker function: one run in, the values to store out (``leaderboard.runner.RunOutcome``)
    execute: Callable[[EvaluationRun, Progress], RunOutcome]
    #: the runs of a probe version on the tasks it can read (none where the axis does not apply);
    #: None: not planned per submission (the quarterly cycles plan the holdout runs)
    plan: Callable[[ProbeVersion, list[Task]], list[Planned]] | None = None
    #: its stored runs → its part of the Score; None: the score writer reads its runs directly
    summarise: Callable[[AxisRuns], Summary] | None = None
    #: the metric table's rows it fills (``evaluator.metrics.metric_table``)
    metric_rows: tuple[str, ...] = ()
    #: whether ``PROBEBENCH_AXES`` may leave it out (the axes the board ranks on may not)
    optional: bool = True
    #: the deprecated boolean setting that turns it off too (``STEER_RUNS``...), or ""
    legacy_setting: str = ""
    #: listed among a probe's axes still being measured (``selectors.progress``); the shared
    #: reference runs and the quarterly holdouts are not a probe's own axes
    shown_pending: bool = True
