"""What is still being measured: per category for the board pages while they fill, and for the
demo's terminal (runs by status, an estimate of the time left from measured run durations, the
failures with their reasons).

    pending_by_category   open submissions per category: "3 reference probes being measured"
    pending_on_task       the same for one task: the open submissions with a run on it
    runs_progress         runs by status and the estimated time left (``RunsProgress``)
    failures_public       failed submissions of reference probes, with their reasons
    pending_axes          per probe version, the axes still being measured (those of
                          leaderboard.axes.AXES shown as pending, in that order): a probe is on
                          the board once its primary runs are done, while its secondary runs
                          (transfer, reproduce, steer...) wait on the secondary queue; the board
                          rows, the probe page and the probe API say which are pending and how
                          far along ("transfer 1/2, steer pending")
    axis_states           per axis of one probe version, its runs counted (pending, failed, none
                          planned): what the probe page says of a section with no number yet
    axis_of_column        the axis whose runs fill a ProbeScore component or a board column
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, Q
from django.utils import timezone

from evaluator.metrics import metric_table
from leaderboard.axes import AXES, KINDS, PRIMARY_KINDS
from leaderboard.models import EvaluationRun, Submission

Run = EvaluationRun
OPEN = (
    Submission.Status.SUBMITTED,
    Submission.Status.VALIDATED,
    Submission.Status.QUEUED,
    Submission.Status.RUNNING,
)


@dataclass(frozen=True)
class Pending:
    """Open submissions of one category (public counts only: no names, no submitters)."""

    total: int
    running: int
    reference: int

    @property
    def queued(self) -> int:
        return self.total - self.running

    def __str__(self) -> str:
        kind = "reference probe" if self.reference == self.total else "probe"
        plural = "" if self.total == 1 else "s"
        verb = "is" if self.total == 1 else "are"
        return f"{self.total} {kind}{plural} {verb} being measured ({self.running} running, {self.queued} queued)"


def pending_by_category() -> dict[str, Pending]:
    """Category slug → its open submissions (one query)."""
    rows = (
        Submission.objects.filter(status__in=OPEN)
        .values("probe_version__probe__category_id")
        .annotate(
            total=Count("pk"),
            running=Count("pk", filter=Q(status=Submission.Status.RUNNING)),
            reference=Count("pk", filter=Q(probe_version__probe__is_reference=True)),
        )
        .order_by()
    )
    return {
        r["probe_version__probe__category_id"]: Pending(r["total"], r["running"], r["reference"])
        for r in rows
    }


def pending_on_task(*, task: str) -> Pending | None:
    """The open submissions with a run on ``task`` (outside any cycle), counted as
    :func:`pending_by_category` counts a category's, ``running`` those with a run on it executing
    (one query); None when there is none."""
    on_task = Run.objects.filter(task_id=task, cycle=None)
    running = on_task.filter(status=Run.Status.RUNNING).values("probe_version")
    found = Submission.objects.filter(
        status__in=OPEN, probe_version__in=on_task.values("probe_version")
    ).aggregate(
        total=Count("pk"),
        running=Count("pk", filter=Q(probe_version__in=running)),
        reference=Count("pk", filter=Q(probe_version__probe__is_reference=True)),
    )
    return Pending(found["total"], found["running"], found["reference"]) if found["total"] else None


@dataclass
class RunsProgress:
    """Runs by status and the time left in the phase in progress, estimated from the measured
    durations of finished runs.

    The phases are the order a worker takes runs in: the ``primary`` runs the board ranks on, then
    the ``secondary`` axes. ``eta_s`` covers the open runs of the phase in progress: a kind of that
    phase with no finished run yet is counted at the mean of the phase's measured kinds (named in
    ``unmeasured``), so the estimate is None only until one run of the phase has finished.
    ``later`` counts the open runs of the phases after it; ``running`` names the runs executing.
    """

    counts: Counter = field(default_factory=Counter)
    mean_s: dict[str, float] = field(default_factory=dict)
    eta_s: float | None = None
    unmeasured: list[str] = field(default_factory=list)
    phase: str = ""
    later: int = 0
    running: list[str] = field(default_factory=list)

    @property
    def done(self) -> int:
        return self.counts[Run.Status.SUCCEEDED]

    def eta_text(self) -> str:
        if self.counts[Run.Status.QUEUED] + self.counts[Run.Status.RUNNING] == 0:
            return "none"
        then = f", then {self.later} secondary run(s)" if self.later else ""
        now = f"; running: {', '.join(self.running)}" if self.running else ""
        if self.eta_s is None:
            return f"unknown (no {self.phase} run has finished yet){then}{now}"
        guessed = f", {', '.join(self.unmeasured)} at the phase's mean" if self.unmeasured else ""
        return f"~{max(1, round(self.eta_s / 60))}m for the {self.phase} runs{guessed}{then}{now}"


#: how many of a kind's latest finished runs its measured mean duration is taken over
ETA_SAMPLE_RUNS = 100


def run_seconds_measured(*, kinds) -> dict[str, dict[str, float]]:
    """kind → mean duration (seconds) and count of its latest finished runs; kinds never finished
    are absent."""
    out: dict[str, dict[str, float]] = {}
    for kind in sorted(set(kinds)):
        spans = (
            EvaluationRun.objects.filter(
                kind=kind,
                status=EvaluationRun.Status.SUCCEEDED,
                started_at__isnull=False,
                finished_at__isnull=False,
            )
            .order_by("-finished_at")
            .values_list("started_at", "finished_at")[:ETA_SAMPLE_RUNS]
        )
        durations = [
            max((end - start).total_seconds(), 0.0)
            for start, end in spans
            if start is not None and end is not None  # filtered above; the columns are nullable
        ]
        if durations:
            out[kind] = {"mean_s": round(sum(durations) / len(durations), 1), "runs": len(durations)}
    return out


def runs_progress(*, workers: int = 1, now=None) -> RunsProgress:
    """Every run's status, and the time left in the phase in progress for ``workers`` workers: the
    mean measured duration of each kind (its latest finished runs) times its open runs of that phase,
    less what the running ones have done (:class:`RunsProgress`)."""
    now = now or timezone.now()
    progress = RunsProgress(counts=Counter(dict(Run.objects.values_list("status").annotate(n=Count("pk")))))
    measured = run_seconds_measured(kinds=KINDS)
    progress.mean_s = {kind: m["mean_s"] for kind, m in measured.items()}
    open_runs = list(
        Run.objects.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
        .select_related("probe_version__probe")
        .order_by("pk")
    )
    primary = [r for r in open_runs if r.kind in PRIMARY_KINDS]
    phase_runs = primary or open_runs
    progress.phase = "primary" if primary else "secondary"
    progress.later = len(open_runs) - len(phase_runs)
    progress.running = [
        f"{r.kind} of {r.probe_version.probe.slug} on {r.task_id}/{r.split}"
        for r in open_runs
        if r.status == Run.Status.RUNNING
    ]
    known = [progress.mean_s[r.kind] for r in phase_runs if r.kind in progress.mean_s]
    phase_kinds = {r.kind for r in phase_runs}
    measured_kinds = [progress.mean_s[k] for k in phase_kinds if k in progress.mean_s]
    progress.unmeasured = sorted(k for k in phase_kinds if k not in progress.mean_s)
    if phase_runs and not known:
        return progress  # eta_s None: no run of this phase has finished yet
    fallback = sum(measured_kinds) / len(measured_kinds) if measured_kinds else 0.0
    left = 0.0
    for r in phase_runs:
        mean = progress.mean_s.get(r.kind, fallback)
        elapsed = (
            (now - r.started_at).total_seconds() if r.status == Run.Status.RUNNING and r.started_at else 0.0
        )
        left += max(mean - elapsed, 0.0)
    progress.eta_s = left / max(workers, 1)
    return progress


@dataclass(frozen=True)
class PublicFailure:
    id: int
    probe_name: str
    probe_slug: str
    category: str
    base_model: str
    version: int
    reason: str
    finished_at: object


def failures_public() -> list[PublicFailure]:
    """Failed submissions of reference probes (shipped by the maintainers, so public), newest
    first, with the reason. A researcher's failed submission stays private to its owner."""
    rows = (
        Submission.objects.filter(status=Submission.Status.FAILED, probe_version__probe__is_reference=True)
        .order_by("-finished_at", "-pk")
        .values(
            "pk",
            "failure_reason",
            "finished_at",
            "probe_version__number",
            "probe_version__probe__name",
            "probe_version__probe__slug",
            "probe_version__probe__category__name",
            "probe_version__probe__base_model_id",
        )
    )
    return [
        PublicFailure(
            id=r["pk"],
            probe_name=r["probe_version__probe__name"],
            probe_slug=r["probe_version__probe__slug"],
            category=r["probe_version__probe__category__name"],
            base_model=r["probe_version__probe__base_model_id"],
            version=r["probe_version__number"],
            reason=r["failure_reason"],
            finished_at=r["finished_at"],
        )
        for r in rows
    ]


# --------------------------------------------------------------------------- pending axes

#: the axes shown, in the order of AXES: a probe's own runs outside any cycle (the shared reference
#: runs and the quarterly holdouts are not its axes: ``Axis.shown_pending``)
SHOWN: tuple[str, ...] = tuple(a.name for a in AXES if a.shown_pending)
FINISHED = (Run.Status.SUCCEEDED, Run.Status.FAILED)


@dataclass(frozen=True)
class PendingAxis:
    axis: str  # the run kind
    done: int  # its runs finished (succeeded or failed)
    total: int

    @property
    def label(self) -> str:
        """ "transfer 1/2" once some runs finished, "steer pending" before."""
        return f"{self.axis} {self.done}/{self.total}" if self.done else f"{self.axis} pending"

    def to_dict(self) -> dict:
        return {"axis": self.axis, "done": self.done, "total": self.total, "label": self.label}


def _pending(counts) -> dict:
    """(key, kind, total, done) rows → {key: [PendingAxis in the order of AXES]} for unfinished axes."""
    out: dict = defaultdict(list)
    for key, kind, total, done in sorted(counts, key=lambda c: (str(c[0]), SHOWN.index(c[1]))):
        if done < total:
            out[key].append(PendingAxis(axis=kind, done=done, total=total))
    return dict(out)


def _counted(runs):
    return runs.filter(cycle=None, kind__in=SHOWN).annotate(
        total=Count("pk"), done=Count("pk", filter=Q(status__in=FINISHED))
    )


def pending_axes(*, version_ids: list[int]) -> dict[int, list[PendingAxis]]:
    """Probe version id → its axes with runs still queued or running (absent: none)."""
    rows = _counted(Run.objects.filter(probe_version_id__in=version_ids).values("probe_version_id", "kind"))
    return _pending((r["probe_version_id"], r["kind"], r["total"], r["done"]) for r in rows)


@dataclass(frozen=True)
class AxisState:
    """Where one axis of a probe version stands, from its runs outside any cycle: how many there
    are, how many have finished and how many of those failed, and the base models of its runs
    still open and of those that failed (a transfer run's target). What a page may say of the axis
    follows from it: ``pending`` while a run is queued or running, ``all_failed`` when every run
    finished and failed, ``planned`` once it has any run (an axis with none was never planned:
    it does not apply to the probe, or it is turned off)."""

    axis: str
    total: int = 0
    done: int = 0
    failed: int = 0
    open_models: frozenset[str] = frozenset()
    failed_models: frozenset[str] = frozenset()

    @property
    def planned(self) -> bool:
        return self.total > 0

    @property
    def pending(self) -> bool:
        return self.done < self.total

    @property
    def all_failed(self) -> bool:
        return self.planned and self.failed == self.total

    @property
    def progress(self) -> PendingAxis:
        return PendingAxis(axis=self.axis, done=self.done, total=self.total)


def axis_states(*, version_id: int) -> dict[str, AxisState]:
    """Each shown axis of a probe version (``SHOWN``, in that order, every one present: an axis
    with no run has ``total`` 0) with its runs counted by state (one query)."""
    rows = (
        Run.objects.filter(probe_version_id=version_id, cycle=None, kind__in=SHOWN)
        .values_list("kind", "base_model_id", "status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    counts: dict[str, Counter] = defaultdict(Counter)
    models: dict[str, dict[str, set[str]]] = defaultdict(lambda: {"open": set(), "failed": set()})
    for kind, model, status, n in rows:
        counts[kind]["total"] += n
        if status in FINISHED:
            counts[kind]["done"] += n
        else:
            models[kind]["open"].add(model)
        if status == Run.Status.FAILED:
            counts[kind]["failed"] += n
            models[kind]["failed"].add(model)
    return {
        kind: AxisState(
            kind,
            counts[kind]["total"],
            counts[kind]["done"],
            counts[kind]["failed"],
            frozenset(models[kind]["open"]),
            frozenset(models[kind]["failed"]),
        )
        for kind in SHOWN
    }


def axis_of_column(key: str) -> str | None:
    """The axis (run kind, one of ``SHOWN``) whose runs fill a ProbeScore component or a board
    column (``key``: a component's name or a metric table column's key), read from the metric
    rows each axis declares; None for a column no such axis fills (the reference's AUROC-EA)."""
    for a in AXES:
        if not a.shown_pending:
            continue
        for name in a.metric_rows:
            m = metric_table.metric(name)
            if key in (name, m.component, m.column.key if m.column else None):
                return a.name
    return None


def board_pending_attach(rows) -> None:
    """Set ``row.pending_axes`` on the board rows shown (one query, by probe slug and version)."""
    if not rows:
        return
    runs = Run.objects.filter(probe_version__probe__slug__in=[r.probe for r in rows]).values(
        "probe_version__probe__slug", "probe_version__number", "kind"
    )
    found = _pending(
        ((r["probe_version__probe__slug"], r["probe_version__number"]), r["kind"], r["total"], r["done"])
        for r in _counted(runs)
    )
    for row in rows:
        row.pending_axes = found.get((row.probe, row.version), [])
