"""Reads that the writers need too: the base models the workers run, the current eval-awareness
reference probe of a base model, the tasks a probe version can read, the runs a submission waits
on, the latest scored version of each probe, the order a worker takes queued runs in within a
queue (the maintainers' work first, then round-robin across submitters). Services and the axes
import these (services may read); nothing here imports a service.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Exists, OuterRef, Q

from evaluator.core.applicability import ModelReads, ProbeReads, applicable_tasks
from evaluator.data.registry.tasks import EVAL_AWARENESS
from leaderboard.models import (
    BaseModel,
    EvaluationRun,
    Probe,
    ProbeVersion,
    PublishedRun,
    Submission,
    Task,
    TaskSplit,
)

Run = EvaluationRun

#: The versions that may be an eval-awareness reference: of a reference probe with that role,
#: installed under the system account (leaderboard.accounts). A probe anyone else owns never is,
#: whatever its role says, and neither is a copy set aside for a reference probe's install.
EA_REFERENCE_CANDIDATE = Q(
    probe__reference_role=EVAL_AWARENESS,
    probe__is_reference=True,
    probe__owner__system_account__isnull=False,
    displaced_by_reference=False,
)


#: the submitter of a run: the owner of the probe it measures
RUN_OWNER = "probe_version__probe__owner"
#: runs that are the maintainers' own work, outside the round-robin: the system account's
#: (reference probes) and the quarterly re-evaluation's
MAINTAINERS_WORK = Q(cycle__isnull=False) | Q(probe_version__probe__owner__system_account__isnull=False)
#: the run the bundle published for the same measurement as a run of an imported version
_PUBLISHED_TWIN = PublishedRun.objects.filter(
    bundle=OuterRef("probe_version__bundle"),
    probe_version=OuterRef("probe_version"),
    kind=OuterRef("kind"),
    task=OuterRef("task"),
    split=OuterRef("split"),
    base_model=OuterRef("base_model"),
)
#: the replication of imported entries (services.replication), the imported eval-awareness
#: references' ``reference`` runs included: after every other queued run. A user's submission does
#: not wait on them: until one is measured here, the run the bundle published stands in for it
#: (:func:`published_stands_in`). An imported reference's ``reference`` run that the bundle did not
#: publish (on a task none of its entries read) replicates nothing: a submission here needs it, so
#: it is queued like any other run.
REPLICATING = Q(probe_version__bundle__isnull=False) & (~Q(kind="reference") | Q(Exists(_PUBLISHED_TWIN)))


def owner_turn(owner, *, waiting: dict, served: dict) -> tuple:
    """The round-robin's sort key of a submitter with queued runs (the smallest goes next): one
    never served on the queue first, then the one whose latest run there started longest ago; a
    tie goes to the oldest queued run. ``waiting``: submitter → its oldest queued run's time;
    ``served``: submitter → its latest run start on the queue (absent: never)."""
    return (owner in served, served.get(owner, waiting[owner]), waiting[owner], owner)


def enabled_models():
    """The base models the workers run: the active ones (a model loaded on request is active only
    where PROBEBENCH_MODELS names it, registry_sync), narrowed to PROBEBENCH_MODELS when it is set."""
    qs = BaseModel.objects.filter(is_active=True)
    if settings.ENABLED_MODELS:
        qs = qs.filter(slug__in=settings.ENABLED_MODELS)
    return qs


def ea_reference_version(*, base_model: BaseModel | str) -> ProbeVersion | None:
    """The current eval-awareness reference probe of a base model: the newest scored version
    among the system account's eval-awareness reference probes."""
    return (
        ProbeVersion.objects.public()
        .filter(EA_REFERENCE_CANDIDATE, probe__base_model=base_model)
        .order_by("-created_at", "-pk")
        .first()
    )


def attack_source_version(*, category_id: str, base_model_id: str, task_id: str) -> ProbeVersion | None:
    """The reference probe whose soft suffix every other probe of the category on the same base
    model faces in the transfer attack on ``task_id``: among the maintainers' reference probes of the
    category on that model that read one prompt and are scored on the task, the first by
    :func:`evaluator.axes.attack.source_order`; None when there is none."""
    from evaluator.axes.attack import source_order

    candidates = (
        ProbeVersion.objects.latest_per_probe()
        .filter(
            probe__is_reference=True,
            probe__owner__system_account__isnull=False,
            displaced_by_reference=False,
            probe__category_id=category_id,
            probe__base_model_id=base_model_id,
            input="single",
            runs__kind=Run.Kind.SCORE,
            runs__task_id=task_id,
            runs__split="test",
            runs__status=Run.Status.SUCCEEDED,
            runs__cycle=None,
        )
        .select_related("probe")
        .distinct()
    )

    return min(
        candidates, key=lambda v: source_order((v.recipe or {}).get("method", ""), v.probe.slug), default=None
    )


def ea_reference_pending(*, base_model: BaseModel) -> ProbeVersion | None:
    """The newest eval-awareness reference version of a base model still being measured (its
    submission queued or running): the one that becomes current once it is scored."""
    return (
        ProbeVersion.objects.filter(
            EA_REFERENCE_CANDIDATE,
            probe__base_model=base_model,
            submission__status__in=[Submission.Status.QUEUED, Submission.Status.RUNNING],
        )
        .order_by("-created_at", "-pk")
        .first()
    )


def is_ea_reference_candidate(version: ProbeVersion) -> bool:
    """True when ``version`` may become its base model's eval-awareness reference once scored."""
    return ProbeVersion.objects.filter(EA_REFERENCE_CANDIDATE, pk=version.pk).exists()


def tasks_applicable(
    *, version: ProbeVersion, tasks: list[Task] | None = None
) -> tuple[list[Task], dict[str, str]]:
    """The tasks ``version`` can read (``evaluator.core.applicability``: template, on-policy files of
    its base model, layer) and {task slug: why not} for the others. ``tasks``: by default the
    active tasks of its category. The planner plans runs on the first list only; the probe page
    lists the second as "not applicable"."""
    if tasks is None:
        tasks = list(Task.objects.filter(category_id=version.probe.category_id, status=Task.Status.ACTIVE))
    base_model = version.probe.base_model
    reads = ProbeReads(input=version.input, position=version.position, layer=version.layer)
    model = ModelReads(id=base_model.slug, n_layers=base_model.n_layers)
    # the on-policy tasks with this model's own split files, in one query
    own_files = set(
        TaskSplit.objects.filter(task__in=[t for t in tasks if t.on_policy], base_model=base_model)
        .values_list("task_id", flat=True)
        .distinct()
    )
    ok, not_applicable = applicable_tasks(
        reads, [_TaskReads(t, own_files) for t in tasks], model, key=lambda task: task.row.slug
    )
    return [t.row for t in ok], not_applicable


@dataclass(frozen=True)
class _TaskReads:
    """A Task row as ``evaluator.core.applicability`` reads it, with its own-files lookup done."""

    row: Task
    own_files: set[str]

    @property
    def templates(self) -> dict:
        return self.row.templates or {}

    def measured_on(self, model_id: str, /) -> bool:  # noqa: ARG002 - the set is this model's
        return not self.row.on_policy or self.row.slug in self.own_files


def submission_runs(submission: Submission):
    """Every run a submission waits on: its own runs and the shared reference runs it uses."""
    version = submission.probe_version
    own = Q(submission=submission)
    if version.probe.category_id == EVAL_AWARENESS:
        return EvaluationRun.objects.filter(own)
    ref = ea_reference_version(base_model=version.probe.base_model)
    if ref is None:
        return EvaluationRun.objects.filter(own)
    task_ids = EvaluationRun.objects.filter(own, kind=Run.Kind.SCORE).values("task_id")
    shared = Q(probe_version=ref, kind=Run.Kind.REFERENCE, task_id__in=task_ids, cycle=None)
    return EvaluationRun.objects.filter(own | (shared & ~published_stands_in(ref)))


def published_stands_in(ref: ProbeVersion) -> Q:
    """The ``reference`` runs of an eval-awareness reference imported from a bundle that have not
    succeeded here yet while the bundle published one for their task: the published run stands in
    for them (``services.replication.runs_with_published``), so nothing waits on their replication.
    Matches no run of a reference measured here."""
    if ref.bundle_id is None:
        return Q(pk__in=[])
    published = PublishedRun.objects.filter(
        probe_version=ref, bundle_id=ref.bundle_id, kind=Run.Kind.REFERENCE
    ).values("task_id")
    return Q(probe_version=ref, task_id__in=published) & ~Q(status=Run.Status.SUCCEEDED)


#: a scored submission's step once its Score holds every axis (services.submissions sets it after
#: the rescore that follows its last secondary run; before that it counts the secondary runs)
SETTLED_STEP = "scored"


def submission_settled(submission: Submission) -> bool:
    """Nothing more will change this submission: it failed or was rejected, or it is scored and
    was rescored after its last secondary run (transfer, reproduce, steer)."""
    if submission.status in (Submission.Status.FAILED, Submission.Status.REJECTED):
        return True
    return submission.status == Submission.Status.SCORED and submission.step == SETTLED_STEP


def scored_versions() -> list[ProbeVersion]:
    """The entries a cycle re-evaluates: the latest scored version of every active probe."""
    return [v for v in scored_versions_all() if v.probe.status == Probe.Status.ACTIVE]


def scored_versions_all() -> list[ProbeVersion]:
    """The latest scored version of every probe, active or deprecated."""
    return list(ProbeVersion.objects.latest_per_probe().select_related("probe").order_by("probe_id"))
