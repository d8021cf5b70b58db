"""Writes. Every change to probes, submissions, runs, scores, cycles and leakage records goes
through a function here, in a transaction. Functions take keyword-only arguments and are named
``<entity>_<action>``. Celery tasks (leaderboard/tasks.py) are thin wrappers around these.

The life of a submission::

    submission_create        validate metadata + artifact, store the file, create the rows,
                             plan the runs, dispatch them on commit
    evaluation_run_execute   claim one run (conditional UPDATE), run the evaluator, store the
                             per-example scores, heartbeat while running
    submission_advance       once every run it waits on is finished: score it (or fail it)
    evaluation_runs_reconcile  re-queue runs whose worker died or whose message was lost
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, close_old_connections, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.text import slugify

from evaluator import CODE_VERSION
from evaluator.errors import ArtifactError, EvaluatorError, InfrastructureError, RegistryError
from leaderboard import artifacts
from leaderboard.errors import Conflict, DuplicateArtifact, ServiceError, ValidationFailed
from leaderboard.models import (
    BaseModel,
    EvaluationRun,
    LeakageRecord,
    Probe,
    ProbeVersion,
    Submission,
    Task,
    TaskSplit,
)
from leaderboard.validation import CleanMetadata, metadata_validate, parse_json_field

log = logging.getLogger(__name__)

Run = EvaluationRun
TERMINAL = (Run.Status.SUCCEEDED, Run.Status.FAILED)
MAX_ATTEMPTS = 3
EA_ROLE = "eval_awareness"
#: the splits a probe is scored on, where the task has them
SCORE_SPLITS = ("test", "train", "distshift")


# --------------------------------------------------------------------------- submissions


def submission_create(
    *,
    user,
    artifact,
    metadata,
    recipe=None,
    via: str = "api",
    is_reference: bool = False,
    reference_role: str = "",
) -> Submission:
    """Validate an upload and queue its evaluation. Any rejection raises a ServiceError (400, 409,
    413) and leaves no row and no stored file behind."""
    metadata = parse_json_field(metadata, "metadata")
    recipe = parse_json_field(recipe, "recipe")
    clean = metadata_validate(metadata, recipe=recipe)
    if not Task.objects.filter(category=clean.category, status=Task.Status.ACTIVE).exists():
        raise ValidationFailed(
            f"category: {clean.category.slug} has no active task yet, so nothing can be measured",
            field="category",
        )
    if artifact is None:
        raise ValidationFailed("artifact: a .safetensors file is required", field="artifact")
    data = artifacts.read_upload(artifact, max_bytes=settings.MAX_ARTIFACT_BYTES)
    sha = artifacts.sha256_bytes(data)
    _raise_if_duplicate(sha)
    kind = _artifact_validate(data, clean)

    relpath, created = artifacts.artifact_store(data, sha)
    try:
        with transaction.atomic():
            probe = _probe_for(
                user=user, clean=clean, is_reference=is_reference, reference_role=reference_role
            )
            number = (probe.versions.order_by("-number").values_list("number", flat=True).first() or 0) + 1
            version = ProbeVersion.objects.create(
                probe=probe,
                number=number,
                artifact_sha256=sha,
                artifact_path=relpath,
                artifact_bytes=len(data),
                kind=kind,
                layer=clean.layer,
                position=clean.position,
                input=clean.input,
                output=clean.output,
                license=clean.license,
                authors=clean.authors,
                paper_url=clean.paper_url,
                description=clean.description,
                training_data=clean.training_data,
                declared_metrics=clean.declared_metrics,
                recipe=clean.recipe,
                metadata=clean.raw,
            )
            submission = Submission.objects.create(
                probe_version=version,
                submitter=user,
                via=via,
                status=Submission.Status.VALIDATED,
                step="validated",
            )
            runs = evaluation_runs_plan(version=version, submission=submission)
            submission.status = Submission.Status.QUEUED
            submission.step = f"queued: {len(runs)} evaluation run(s)"
            submission.save(update_fields=["status", "step", "updated_at"])
            evaluation_runs_dispatch_on_commit(runs)
    except IntegrityError:
        if created:
            artifacts.artifact_remove(relpath)
        _raise_if_duplicate(sha)
        raise
    except BaseException:
        if created:
            artifacts.artifact_remove(relpath)
        raise
    log.info("submission %s queued: %s (%d runs)", submission.pk, version, len(runs))
    return submission


def _raise_if_duplicate(sha: str) -> None:
    existing = ProbeVersion.objects.filter(artifact_sha256=sha).select_related("probe").first()
    if existing:
        raise DuplicateArtifact(
            f"artifact: this exact file (SHA-256 {sha}) was already submitted as {existing}",
            field="artifact",
            extra={"existing_probe": existing.probe.slug, "existing_url": existing.get_absolute_url()},
        )


def _artifact_validate(data: bytes, clean: CleanMetadata) -> str:
    """Check the tensors against the base model (evaluator.probes); return the probe kind."""
    from evaluator.probes import probe_from_bytes

    try:
        probe = probe_from_bytes(
            data,
            d_model=clean.base_model.d_model,
            n_layers=clean.base_model.n_layers,
            layer=clean.layer,
            max_bytes=settings.MAX_ARTIFACT_BYTES,
        )
    except ArtifactError as exc:
        raise ValidationFailed(f"artifact: {exc}", field="artifact") from None
    return probe.kind


def _probe_for(*, user, clean: CleanMetadata, is_reference: bool, reference_role: str) -> Probe:
    if clean.probe_slug:
        probe = Probe.objects.select_for_update().filter(slug=clean.probe_slug, owner=user).first()
        if probe is None:
            raise ValidationFailed(f"probe: you have no probe {clean.probe_slug!r}", field="probe")
        if probe.category_id != clean.category.slug or probe.base_model_id != clean.base_model.slug:
            raise ValidationFailed(
                "probe: a new version must keep the probe's category and base model"
                f" ({probe.category_id}, {probe.base_model_id})",
                field="probe",
            )
        return probe
    base = slugify(clean.name)[:100] or "probe"
    slug, n = base, 1
    while Probe.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return Probe.objects.create(
        slug=slug,
        name=clean.name,
        owner=user,
        category=clean.category,
        base_model=clean.base_model,
        is_reference=is_reference,
        reference_role=reference_role,
    )


@transaction.atomic
def submission_reject(*, submission: Submission, by, reason: str) -> Submission:
    """A maintainer rejects a submission with a public reason; its runs stop mattering."""
    reason = (reason or "").strip()
    if not reason:
        raise ServiceError("a rejection needs a public reason", field="rejection_reason")
    sub = Submission.objects.select_for_update().get(pk=submission.pk)
    if sub.status == Submission.Status.REJECTED:
        raise Conflict(f"submission {sub.pk} is already rejected")
    sub.status = Submission.Status.REJECTED
    sub.rejection_reason = reason
    sub.reviewed_by = by
    sub.finished_at = timezone.now()
    sub.save(update_fields=["status", "rejection_reason", "reviewed_by", "finished_at", "updated_at"])
    return sub


# --------------------------------------------------------------------------- planning runs


def ea_reference_version(*, base_model: BaseModel) -> ProbeVersion | None:
    """The current eval-awareness reference probe of a base model: the newest scored version."""
    return (
        ProbeVersion.objects.filter(
            probe__base_model=base_model,
            probe__reference_role=EA_ROLE,
            submission__status=Submission.Status.SCORED,
        )
        .order_by("-created_at", "-pk")
        .first()
    )


def enabled_models():
    qs = BaseModel.objects.filter(is_active=True)
    if settings.ENABLED_MODELS:
        qs = qs.filter(slug__in=settings.ENABLED_MODELS)
    return qs


def evaluation_runs_plan(*, version: ProbeVersion, submission: Submission) -> list[EvaluationRun]:
    """Create every run a submission waits on; return the ones that need dispatching.

    - score and reference runs on each active task of its category (:func:`score_runs_plan`);
    - reproduce / transfer: with a recipe, the recipe re-run on the source model and re-fit on
      every other enabled base model.
    """
    probe = version.probe
    tasks = list(Task.objects.filter(category=probe.category, status=Task.Status.ACTIVE))
    new = score_runs_plan(version=version, tasks=tasks, submission=submission)
    if version.recipe:
        recipe_task = Task.objects.get(slug=version.recipe["task"])
        new += _runs_get_or_create(
            [
                (version, Run.Kind.REPRODUCE, recipe_task, "train", probe.base_model_id),
                *(
                    (version, Run.Kind.TRANSFER, recipe_task, "test", target.slug)
                    for target in enabled_models().exclude(slug=probe.base_model_id)
                ),
            ],
            submission=submission,
        )
    return new


def score_runs_plan(
    *, version: ProbeVersion, tasks: list[Task], submission: Submission | None
) -> list[EvaluationRun]:
    """Create the runs that measure ``version`` on ``tasks``; return the ones that need dispatching.

    - score: the artifact on each task: test, train (the 1%-FPR threshold is fixed on train
      negatives) and distshift where the task has one;
    - reference: the eval-awareness reference probe on each task's test split (shared by every
      probe on that base model, so it is created once and reused; never tied to a submission).
    """
    probe = version.probe
    splits = set(
        TaskSplit.objects.filter(task__in=tasks, name__in=SCORE_SPLITS).values_list("task_id", "name")
    )
    planned = [
        (version, Run.Kind.SCORE, task, split, probe.base_model_id)
        for task in tasks
        for split in SCORE_SPLITS
        if (task.slug, split) in splits
    ]
    new = _runs_get_or_create(planned, submission=submission)
    if probe.category_id != EA_ROLE:
        ref = ea_reference_version(base_model=probe.base_model)
        if ref is not None:
            new += _runs_get_or_create(
                [(ref, Run.Kind.REFERENCE, task, "test", probe.base_model_id) for task in tasks],
                submission=None,
            )
    return new


def _runs_get_or_create(planned, *, submission: Submission | None) -> list[EvaluationRun]:
    """(version, kind, task, split, base model) → the run outside any cycle, created if missing;
    returns those to dispatch (created, or still queued)."""
    new = []
    for version, kind, task, split, base_model_id in planned:
        run, created = EvaluationRun.objects.get_or_create(
            probe_version=version,
            kind=kind,
            task=task,
            split=split,
            base_model_id=base_model_id,
            cycle=None,
            defaults={"submission": submission, "code_version": CODE_VERSION},
        )
        if created or run.status == Run.Status.QUEUED:
            new.append(run)
    return new


def evaluation_runs_dispatch_on_commit(runs: list[EvaluationRun]) -> None:
    """Publish the runs to the broker once the transaction that created them commits, so a worker
    never sees an uncommitted row."""
    from leaderboard.tasks import evaluation_run_execute_task

    ids = [r.pk for r in runs]
    transaction.on_commit(lambda: [evaluation_run_execute_task.delay(i) for i in ids])


def submission_runs(submission: Submission):
    """Every run a submission waits on: its own runs and the shared reference runs it uses."""
    version = submission.probe_version
    own = Q(submission=submission)
    if version.probe.category_id == EA_ROLE:
        return EvaluationRun.objects.filter(own)
    ref = ea_reference_version(base_model=version.probe.base_model)
    if ref is None:
        return EvaluationRun.objects.filter(own)
    task_ids = EvaluationRun.objects.filter(own, kind=Run.Kind.SCORE).values("task_id")
    shared = Q(probe_version=ref, kind=Run.Kind.REFERENCE, task_id__in=task_ids, cycle=None)
    return EvaluationRun.objects.filter(own | shared)


# --------------------------------------------------------------------------- executing runs


class RunLost(Exception):
    """The run was taken back (reconciled) while this worker held it: stop, write nothing."""


def evaluation_run_claim(*, run_id: int, worker: str) -> EvaluationRun | None:
    """Claim a queued run with a conditional UPDATE; None if another worker got there first."""
    now = timezone.now()
    claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING,
        started_at=now,
        heartbeat_at=now,
        attempts=F("attempts") + 1,
        worker_host=worker,
        progress=0.0,
        step="claimed",
        error="",
        error_kind="",
    )
    if not claimed:
        return None
    run = Run.objects.select_related("probe_version__probe", "task", "base_model", "submission").get(
        pk=run_id
    )
    if run.submission_id:
        Submission.objects.filter(pk=run.submission_id, status=Submission.Status.QUEUED).update(
            status=Submission.Status.RUNNING, updated_at=now
        )
    return run


def _held(run: EvaluationRun):
    """The queryset that matches this run only while this attempt still holds it."""
    return Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING, attempts=run.attempts)


class Heartbeat:
    """Beats every ``interval`` seconds in a thread while a run executes, and forwards progress.

    If a beat finds the run no longer held by this attempt, ``lost`` is set and the next progress
    call raises RunLost, so the worker stops without writing results.
    """

    def __init__(self, run: EvaluationRun, interval: float = 15.0):
        self.run, self.interval = run, interval
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{run.pk}", daemon=True)
        self._last_progress = 0.0

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self):
        try:
            while not self._stop.wait(self.interval):
                if not _held(self.run).update(heartbeat_at=timezone.now()):
                    self.lost.set()
                    return
        finally:
            close_old_connections()
            from django.db import connection

            connection.close()

    def progress(self, fraction: float, step: str) -> None:
        if self.lost.is_set():
            raise RunLost(f"run {self.run.pk} was re-queued while running")
        now = timezone.now().timestamp()
        if now - self._last_progress < 1.0 and fraction < 1.0:
            return
        self._last_progress = now
        if not _held(self.run).update(
            progress=max(0.0, min(1.0, fraction)), step=step[:200], heartbeat_at=timezone.now()
        ):
            self.lost.set()
            raise RunLost(f"run {self.run.pk} was re-queued while running")


def evaluation_run_execute(*, run_id: int, worker: str | None = None) -> str:
    """Execute one run end to end. Returns what happened: skipped | succeeded | failed | lost.

    Artifact faults fail the run (and its submission) with the reason, no retry. Infrastructure
    faults put the run back in the queue and re-raise so the Celery task retries with backoff;
    after MAX_ATTEMPTS the run fails.
    """
    from leaderboard import evaluation

    worker = worker or socket.gethostname()
    run = evaluation_run_claim(run_id=run_id, worker=worker)
    if run is None:
        return "skipped"
    try:
        with Heartbeat(run) as beat:
            outcome = evaluation.run_execute(run=run, progress=beat.progress)
    except RunLost:
        log.warning("run %s lost while running; another attempt owns it", run.pk)
        return "lost"
    except InfrastructureError as exc:  # a missing model package, a full disk...: retry later
        return _run_infrastructure_fault(run, exc)
    except RegistryError as exc:  # a split file that no longer matches its hash: never retried
        return _run_fail(run, f"registry: {exc}", kind="infrastructure")
    except EvaluatorError as exc:  # the artifact's fault (shape, NaN, a recipe that cannot fit)
        return _run_fail(run, str(exc), kind="artifact")
    except Exception as exc:  # an unexpected fault of the machine, not of the artifact
        return _run_infrastructure_fault(run, exc)
    done = _held(run).update(
        status=Run.Status.SUCCEEDED,
        progress=1.0,
        step="done",
        finished_at=timezone.now(),
        example_scores=outcome.example_scores,
        metrics=outcome.metrics,
        timings=outcome.timings,
        cache_key=outcome.cache_key,
        split_sha256=outcome.split_sha256,
        code_version=CODE_VERSION,
    )
    if not done:
        return "lost"
    submission_advance_for_run(run)
    return "succeeded"


def _run_fail(run: EvaluationRun, message: str, *, kind: str) -> str:
    if _held(run).update(
        status=Run.Status.FAILED, error=message[:2000], error_kind=kind, finished_at=timezone.now()
    ):
        submission_advance_for_run(run)
    return "failed"


def _run_infrastructure_fault(run: EvaluationRun, exc: Exception) -> str:
    message = f"{type(exc).__name__}: {exc}"[:2000]
    log.exception("run %s attempt %s: infrastructure fault", run.pk, run.attempts)
    if run.attempts >= MAX_ATTEMPTS:
        return _run_fail(
            run, f"infrastructure fault after {run.attempts} attempts: {message}", kind="infrastructure"
        )
    _held(run).update(
        status=Run.Status.QUEUED, error=message, error_kind="infrastructure", queued_at=timezone.now()
    )
    raise InfrastructureFault(message) from exc


class InfrastructureFault(Exception):
    """Raised to the Celery task so that it retries with backoff."""


def evaluation_runs_reconcile(*, now=None, dispatch: Callable[[int], None] | None = None) -> dict:
    """Recover from dead workers and lost messages. Safe to run any time, from beat or by hand.

    - running runs with no heartbeat for RUN_HEARTBEAT_TIMEOUT_S → back to queued, re-published;
    - queued runs not started for RUN_REQUEUE_AFTER_S (e.g. the broker lost them) → re-published.
    The conditional claim makes a duplicate message a no-op, so re-publishing never runs twice.
    """
    from leaderboard.tasks import evaluation_run_execute_task

    dispatch = dispatch or (lambda run_id: evaluation_run_execute_task.delay(run_id))
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT_S)
    requeue_before = now - timedelta(seconds=settings.RUN_REQUEUE_AFTER_S)
    report = {"requeued_dead": [], "republished": [], "advanced": 0}
    for run in Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=stale_before):
        if run.attempts >= MAX_ATTEMPTS:
            if _held(run).update(
                status=Run.Status.FAILED,
                error_kind="infrastructure",
                finished_at=now,
                error=f"worker lost {run.attempts} times (no heartbeat)",
            ):
                submission_advance_for_run(run)
            continue
        if (
            _held(run)
            .filter(heartbeat_at__lt=stale_before)
            .update(status=Run.Status.QUEUED, queued_at=now, step="re-queued: worker lost", worker_host="")
        ):
            report["requeued_dead"].append(run.pk)
    for run_id in Run.objects.filter(status=Run.Status.QUEUED, queued_at__lt=requeue_before).values_list(
        "pk", flat=True
    ):
        if Run.objects.filter(pk=run_id, status=Run.Status.QUEUED, queued_at__lt=requeue_before).update(
            queued_at=now
        ):
            report["republished"].append(run_id)
    for run_id in report["requeued_dead"] + report["republished"]:
        dispatch(run_id)
    for sub in Submission.objects.filter(status__in=[Submission.Status.QUEUED, Submission.Status.RUNNING]):
        report["advanced"] += bool(submission_advance(submission=sub))
    from leaderboard.coverage import coverage_reconcile
    from leaderboard.reevaluation import cycles_reconcile, reference_updates_reconcile

    report["cycles_completed"] = cycles_reconcile()
    report["reference_updates_completed"] = reference_updates_reconcile()
    report["rescored"] = coverage_reconcile()
    return report


# --------------------------------------------------------------------------- finishing


def submission_advance_for_run(run: EvaluationRun) -> None:
    """After a run finishes: advance its submission, or every submission waiting on a shared
    reference run."""
    if run.submission_id:
        submission_advance(submission=Submission.objects.get(pk=run.submission_id))
    if run.kind == Run.Kind.REFERENCE:
        waiting = Submission.objects.filter(
            status__in=[Submission.Status.QUEUED, Submission.Status.RUNNING],
            probe_version__probe__base_model=run.base_model,
        )
        for sub in waiting:
            submission_advance(submission=sub)
    if run.cycle_id:
        from leaderboard.reevaluation import cycle_advance

        cycle_advance(cycle_id=run.cycle_id)
    else:
        from leaderboard.coverage import coverage_advance_for_run

        try:
            coverage_advance_for_run(run)
        except Exception:  # the run itself is done; the reconciler retries the rescore
            log.exception("rescoring after run %s failed", run.pk)
    if run.kind == Run.Kind.REFERENCE:
        # recomputing the dependents needs no model: bookkeeping, on the default queue
        from leaderboard.models import ReferenceUpdate
        from leaderboard.tasks import reference_update_advance_task

        ids = list(
            ReferenceUpdate.objects.filter(
                new_version_id=run.probe_version_id, status=ReferenceUpdate.Status.RUNNING
            ).values_list("pk", flat=True)
        )
        transaction.on_commit(lambda: [reference_update_advance_task.delay(i) for i in ids])


def submission_advance(*, submission: Submission) -> Submission | None:
    """If every run the submission waits on is finished, score it (or fail it). Idempotent:
    returns the submission when it changed state, None otherwise."""
    from leaderboard.scoring import submission_score

    runs = list(submission_runs(submission))
    if not runs or any(r.status not in TERMINAL for r in runs):
        done = sum(r.status in TERMINAL for r in runs)
        Submission.objects.filter(
            pk=submission.pk, status__in=[Submission.Status.QUEUED, Submission.Status.RUNNING]
        ).update(
            progress=done / max(len(runs), 1),
            step=f"{done} of {len(runs)} runs finished",
            updated_at=timezone.now(),
        )
        return None
    with transaction.atomic():
        sub = Submission.objects.select_for_update().get(pk=submission.pk)
        if sub.status not in (Submission.Status.QUEUED, Submission.Status.RUNNING):
            return None
        essential = [r for r in runs if r.kind == Run.Kind.SCORE]
        failed = [r for r in essential if r.status == Run.Status.FAILED]
        if failed:
            reasons = sorted({f"{r.task_id}/{r.split}: {r.error}" for r in failed})
            sub.status = Submission.Status.FAILED
            sub.failure_reason = "; ".join(reasons)[:4000]
            sub.step = "failed"
        else:
            try:
                with transaction.atomic():
                    submission_score(submission=sub, runs=runs)
            except (EvaluatorError, ServiceError) as exc:
                sub.status = Submission.Status.FAILED
                sub.failure_reason = f"scoring failed: {exc}"
                sub.step = "failed"
            except Exception as exc:  # a bug of ours: fail it visibly rather than leave it running
                log.exception("scoring submission %s failed", sub.pk)
                sub.status = Submission.Status.FAILED
                sub.failure_reason = (
                    f"scoring failed (internal error, the maintainers are told): {type(exc).__name__}: {exc}"
                )
                sub.step = "failed"
            else:
                sub.status = Submission.Status.SCORED
                sub.step = "scored"
                leakage_rules_on_scoring(version=sub.probe_version)
                if sub.probe_version.probe.reference_role == EA_ROLE:
                    # every dependent auroc_ea is recomputed once this version has scored their items
                    from leaderboard.reevaluation import reference_update_start

                    transaction.on_commit(lambda: reference_update_start(new_version=sub.probe_version))
        sub.progress = 1.0
        sub.finished_at = timezone.now()
        sub.save(update_fields=["status", "failure_reason", "step", "progress", "finished_at", "updated_at"])
    return sub


# --------------------------------------------------------------------------- leakage

DECLARED_OVERLAP_RULE = "declared_training_overlap"


def leakage_rules_on_scoring(*, version: ProbeVersion) -> LeakageRecord | None:
    """Suspicion rule 2 (SPEC.md §6), run when a version is scored: its declared training data
    (task splits and external text hashes, see validation._training_data_validate) shares a
    normalised text with a test split it is measured on → a record opened for review. A fault
    reading the registry is logged, never fails the scoring."""
    from evaluator.leakage import declared_text_sources, overlapping_test_splits
    from leaderboard.registry_sync import registry_load

    declared = version.training_data or {}
    tasks, hashes = declared.get("tasks") or [], declared.get("text_sha256") or []
    splits = declared.get("splits") or ["train"]
    if not tasks and not hashes:
        return None
    measured_on = set(
        Run.objects.filter(probe_version=version, kind=Run.Kind.SCORE, split="test", cycle=None).values_list(
            "task_id", flat=True
        )
    )
    try:
        registry = registry_load()
        sources = declared_text_sources(
            registry, tasks=[t for t in tasks if t in registry.tasks], splits=splits, text_sha256=hashes
        )
        overlaps = overlapping_test_splits(registry, sources, tasks=measured_on)
    except EvaluatorError:
        log.exception("leakage rule %s could not run on %s", DECLARED_OVERLAP_RULE, version)
        return None
    if not overlaps:
        return None
    where = ", ".join(f"{o.task_id}/test ({o.rows} of {o.split_rows} rows)" for o in overlaps)
    return leakage_record_open(
        probe=version.probe,
        probe_version=version,
        rule=DECLARED_OVERLAP_RULE,
        summary=f"declared training data matches test items after normalisation: {where}",
        evidence={
            "overlaps": [o.to_dict() for o in overlaps],
            "declared": {"tasks": tasks, "splits": splits, "text_sha256": len(hashes)},
            "normalisation": "NFKC, case folded, punctuation → space, whitespace collapsed (evaluator.leakage)",
        },
    )


@transaction.atomic
def leakage_record_open(
    *,
    probe: Probe,
    summary: str,
    evidence: dict | None = None,
    probe_version: ProbeVersion | None = None,
    opened_by=None,
    rule: str = "",
) -> LeakageRecord:
    """Open a record for review, by a suspicion rule (``rule``) or by a maintainer (``opened_by``).

    A rule does not open a second record for the same probe version while one is open or
    confirmed. A record opened by hand needs a summary and evidence.
    """
    if probe_version is not None and probe_version.probe_id != probe.pk:
        raise ServiceError(f"{probe_version} is not a version of {probe.slug}", field="probe_version")
    if not rule and not (evidence and (summary or "").strip()):
        raise ServiceError("a leakage record opened by hand needs a summary and evidence", field="evidence")
    if rule:
        existing = LeakageRecord.objects.filter(
            probe=probe,
            probe_version=probe_version,
            rule=rule,
            status__in=[LeakageRecord.Status.OPEN, LeakageRecord.Status.CONFIRMED],
        ).first()
        if existing:
            return existing
    return LeakageRecord.objects.create(
        probe=probe,
        probe_version=probe_version,
        source=LeakageRecord.Source.RULE if rule else LeakageRecord.Source.MAINTAINER,
        rule=rule,
        summary=summary[:300],
        evidence=evidence or {},
        opened_by=opened_by,
    )


@transaction.atomic
def leakage_record_review(*, record: LeakageRecord, by, confirm: bool, note: str = "") -> LeakageRecord:
    """Confirm (public, permanent) or dismiss an open record."""
    rec = LeakageRecord.objects.select_for_update().get(pk=record.pk)
    if rec.status != LeakageRecord.Status.OPEN:
        raise Conflict(f"leakage record {rec.pk} is {rec.status}, only open records can be reviewed")
    if confirm and not (note or "").strip():
        raise ServiceError("confirming a leakage record needs a public note", field="public_note")
    rec.status = LeakageRecord.Status.CONFIRMED if confirm else LeakageRecord.Status.DISMISSED
    rec.public_note = note.strip()
    rec.reviewed_by = by
    rec.reviewed_at = timezone.now()
    rec.save()
    return rec
