"""Submissions: validate an upload and queue its evaluation, reject one, and score one once the
runs the board ranks on have finished.

    submission_create    validate metadata + artifact, create the rows, plan the runs, refuse
                         them past the account's queue cap (429), store the file, dispatch the
                         runs on commit
    submission_advance   once the runs the board ranks on are finished: score it (or fail it), run
                         the leakage rule, start a reference update when it is an eval-awareness
                         reference probe; its secondary runs (transfer, reproduce, steer) may
                         still be queued
    submission_secondary_refresh  a secondary run finished after the Score: recompute it
    reference_probe_submit  submit a registry reference probe under the system account; an
                         earlier copy of its file by anyone else is set aside (displaced) and its
                         submission rejected, saying so; a probe of anyone else's that holds
                         the reference's slug is moved to another slug, saying so

The reference probes' names and slugs (registry/reference_probes/manifest.yaml) are reserved from
the start: nobody but the system account may submit under one (``accounts.probe_name_reserved``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone
from django.utils.text import slugify

from evaluator.core.probes import probe_from_bytes
from evaluator.core.sae_probe import Site
from evaluator.errors import ArtifactError, EvaluatorError
from leaderboard import artifacts
from leaderboard.accounts import probe_name_reserved
from leaderboard.axes import PRIMARY_KINDS
from leaderboard.errors import (
    Conflict,
    DuplicateArtifact,
    QueueFull,
    ServiceError,
    ServiceUnavailable,
    ValidationFailed,
)
from leaderboard.models import EvaluationRun, Probe, ProbeVersion, Score, Submission, Task, is_system_account
from leaderboard.presentation import duration_text
from leaderboard.selectors.shared import SETTLED_STEP, is_ea_reference_candidate, submission_runs
from leaderboard.selectors.submissions import queued_work
from leaderboard.services.accounts import system_account_get_or_create
from leaderboard.services.leakage import leakage_rules_on_scoring
from leaderboard.services.reference_updates import reference_update_start
from leaderboard.services.replication import replication_refresh
from leaderboard.services.runs import TERMINAL, evaluation_runs_dispatch_on_commit, evaluation_runs_plan
from leaderboard.services.scores import submission_score
from leaderboard.validation import (
    CleanMetadata,
    metadata_validate,
    parse_json_field,
    probe_name_clean,
    sae_registry,
)
from probebench.broker import broker_reachable

log = logging.getLogger(__name__)
#: how an imported entry's submission came (services.bundles); its runs replicate it here
BUNDLE_VIA = "bundle"
Run = EvaluationRun


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
    413, 429; 503 when the broker cannot be reached) and leaves no row and no stored file behind.

    Every check that can refuse the upload runs before its file is stored: the queue cap
    (:func:`_raise_if_queue_full`, 429) last, inside the transaction, once the runs are planned
    (rolled back if it refuses), under a lock on the account's row, so two uploads of one account
    at the same moment are counted one after the other. The file is stored
    under its content hash and never deleted here, even when the transaction fails: an identical
    upload sent at the same moment (a double click) shares the path, and its row may be the one
    that commits. A file whose rows never commit is removed by ``artifacts_orphaned_remove``."""
    if (is_reference or reference_role) and not is_system_account(user):
        # only the install makes reference probes, and only under the system account
        raise ValidationFailed("probe: reference probes belong to the system account", field="probe")
    metadata = parse_json_field(metadata, "metadata")
    recipe = parse_json_field(recipe, "recipe")
    clean = metadata_validate(metadata, recipe=recipe)
    if not is_system_account(user):
        _raise_if_reserved_name(clean.name)
    if not Task.objects.filter(category=clean.category, status=Task.Status.ACTIVE).exists():
        raise ValidationFailed(
            f"category: {clean.category.slug} has no active task yet, so nothing can be measured",
            field="category",
        )
    if artifact is None:
        raise ValidationFailed("artifact: a .safetensors file is required", field="artifact")
    data = artifacts.read_upload(artifact, max_bytes=settings.MAX_ARTIFACT_BYTES)
    sha = artifacts.sha256_bytes(data)
    _raise_if_duplicate(sha, user=user)
    kind = _artifact_validate(data, clean)
    if clean.probe_slug:
        _probe_version_check(user=user, clean=clean)
    _raise_if_broker_down()

    relpath = artifacts.artifact_relpath(sha)
    try:
        with transaction.atomic():
            capped = settings.MAX_QUEUED_RUN_SECONDS > 0 and not is_system_account(user)
            if capped:
                get_user_model().objects.select_for_update().get(pk=user.pk)
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
                metadata=clean.document(),
            )
            submission = Submission.objects.create(
                probe_version=version,
                submitter=user,
                via=via,
                status=Submission.Status.VALIDATED,
                step="validated",
            )
            runs = evaluation_runs_plan(version=version, submission=submission)
            if capped:
                _raise_if_queue_full(user=user, submission=submission)
            artifacts.artifact_store(data, sha)
            submission.status = Submission.Status.QUEUED
            submission.step = f"queued: {len(runs)} evaluation run(s)"
            submission.save(update_fields=["status", "step", "updated_at"])
            evaluation_runs_dispatch_on_commit(runs)
    except IntegrityError:
        _raise_if_duplicate(sha, user=user)  # the same bytes committed first: 409, file kept
        raise
    log.info("submission %s queued: %s (%d runs)", submission.pk, version, len(runs))
    return submission


def _raise_if_broker_down() -> None:
    """503, before anything is written, when the broker the runs are published to cannot be reached
    (tasks run in this process when ``CELERY_TASK_ALWAYS_EAGER``: no broker is needed)."""
    if not current_app.conf.task_always_eager and not broker_reachable():
        raise ServiceUnavailable(
            "the evaluation queue (the task broker) cannot be reached right now, so nothing was stored;"
            " send the same submission again in a few minutes"
        )


def _raise_if_reserved_name(name: str) -> None:
    """400 for a name that is (or looks like, or slugs to) a reference probe's name or slug."""
    reference = probe_name_reserved(name)
    if reference is not None:
        raise ValidationFailed(
            f"name: {name!r} is reserved for the reference probe {reference!r}, which the maintainers"
            " install; names that read the same, and names that give the same slug, are reserved too:"
            " choose another name",
            field="name",
        )


def _raise_if_queue_full(*, user, submission: Submission) -> None:
    """429 when this submission's runs would take its account's queued work (the queued and running
    runs of its submissions, in estimated run-seconds: ``selectors.submissions.queued_work``) over
    ``MAX_QUEUED_RUN_SECONDS``. An account with nothing queued may always submit one, however large.
    The wait is the estimated time until its queued work has fallen far enough, at the pace of its
    runs executing now (at least one)."""
    cap = settings.MAX_QUEUED_RUN_SECONDS
    total = queued_work(submitter=user)
    new = queued_work(submission=submission)
    if total.seconds <= cap or total.runs == new.runs:
        return
    before = total.seconds - new.seconds
    wait = max(1, math.ceil(min(total.seconds - cap, before) / max(total.running, 1)))
    raise QueueFull(
        f"artifact: your queued evaluations already take about {duration_text(before)} of worker time,"
        f" and this submission would add {new.runs} runs, about {duration_text(new.seconds)}; an account"
        f" may have at most {duration_text(cap)} queued (PROBEBENCH_MAX_QUEUED_RUN_SECONDS = {cap} s)."
        f" Submit it again in about {duration_text(wait)}, once more of your runs have finished",
        field="artifact",
        retry_after_s=wait,
        extra={
            "queued_run_seconds": round(before),
            "submission_run_seconds": round(new.seconds),
            "max_queued_run_seconds": cap,
        },
    )


def _raise_if_duplicate(sha: str, *, user) -> None:
    """409 for bytes already submitted. The existing probe is named to its owner, or when it is
    public (scored, or a reference probe); anyone else learns only that the file exists."""
    existing = (
        ProbeVersion.objects.filter(artifact_sha256=sha, displaced_by_reference=False)
        .select_related("probe", "submission")
        .first()
    )
    if existing is None:
        return
    submission = getattr(existing, "submission", None)
    public = existing.probe.is_reference or (
        submission is not None and submission.status == Submission.Status.SCORED
    )
    if existing.probe.owner_id != getattr(user, "pk", None) and not public:
        raise DuplicateArtifact(
            f"artifact: this exact file (SHA-256 {sha}) was already submitted; a file is accepted once",
            field="artifact",
        )
    raise DuplicateArtifact(
        f"artifact: this exact file (SHA-256 {sha}) was already submitted as {existing}",
        field="artifact",
        extra={"existing_probe": existing.probe.slug, "existing_url": existing.get_absolute_url()},
    )


def _artifact_validate(data: bytes, clean: CleanMetadata) -> str:
    """Check the tensors against the base model (evaluator.core.probes) and an SAE-feature
    probe's SAE against the registered ones; return the probe kind. A refusal names its field:
    ``artifact``, or the metadata field an SAE probe's SAE disagrees with."""
    try:
        probe = probe_from_bytes(
            data,
            d_model=clean.base_model.d_model,
            n_layers=clean.base_model.n_layers,
            layer=clean.layer,
            max_bytes=settings.MAX_ARTIFACT_BYTES,
            saes=sae_registry(),
            site=Site(clean.base_model.slug, clean.layer, clean.position, clean.input),
        )
    except ArtifactError as exc:
        field = getattr(exc, "field", "artifact")
        raise ValidationFailed(f"{field}: {exc}", field=field) from None
    return probe.kind


def _probe_version_check(*, user, clean: CleanMetadata, lock: bool = False) -> Probe:
    """The submitter's probe that ``clean`` adds a version to, or a 400 saying why not."""
    probes = Probe.objects.select_for_update() if lock else Probe.objects
    probe = probes.filter(slug=clean.probe_slug, owner=user).first()
    if probe is None:
        raise ValidationFailed(f"probe: you have no probe {clean.probe_slug!r}", field="probe")
    if probe.versions.filter(displaced_by_reference=True).exists():
        raise ValidationFailed(
            f"probe: {probe.slug} was set aside by the reference-probe install (a version of it is a"
            " reference probe's file) and takes no new versions; submit a new probe under another name",
            field="probe",
        )
    if probe.category_id != clean.category.slug or probe.base_model_id != clean.base_model.slug:
        raise ValidationFailed(
            "probe: a new version must keep the probe's category and base model"
            f" ({probe.category_id}, {probe.base_model_id})",
            field="probe",
        )
    return probe


def probe_slug_base(name: str) -> str:
    """The slug a new probe named ``name`` gets when it is free (else ``<slug>-2``, ``-3``, …)."""
    return slugify(name)[:100] or "probe"


def _probe_for(*, user, clean: CleanMetadata, is_reference: bool, reference_role: str) -> Probe:
    if clean.probe_slug:
        return _probe_version_check(user=user, clean=clean, lock=True)
    base = probe_slug_base(clean.name)
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


def submission_advance(*, submission: Submission) -> Submission | None:
    """Score a submission as soon as the runs the board ranks on have finished (score and
    reference runs, ``leaderboard.axes.PRIMARY_KINDS``), or fail it when a score run failed;
    its secondary runs (transfer, reproduce, steer) may still be queued then: the Score marks what
    they measure as pending, and is recomputed as each of them finishes
    (:func:`submission_secondary_refresh`). Idempotent: returns the submission when it changed
    state, None otherwise."""
    if submission.via == BUNDLE_VIA and submission.status == Submission.Status.SCORED:
        # an imported entry replicating here: its Score follows each run (services.replication)
        submission_secondary_refresh(submission=submission)
        return None
    runs = list(submission_runs(submission))
    primary = [r for r in runs if r.kind in PRIMARY_KINDS]
    if not primary or any(r.status not in TERMINAL for r in primary):
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
        if sub.status == Submission.Status.SCORED:
            submission_secondary_refresh(submission=sub)  # its runs re-read under the lock
            return None
        if sub.status not in (Submission.Status.QUEUED, Submission.Status.RUNNING):
            return None
        failed = [r for r in primary if r.kind == Run.Kind.SCORE and r.status == Run.Status.FAILED]
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
                pending = sum(r.status not in TERMINAL for r in runs)
                sub.step = f"scored; {pending} secondary run(s) pending" if pending else SETTLED_STEP
                leakage_rules_on_scoring(version=sub.probe_version)
                if is_ea_reference_candidate(sub.probe_version):
                    # every dependent auroc_ea is recomputed once this version has scored their items
                    transaction.on_commit(lambda: reference_update_start(new_version=sub.probe_version))
        # 1.0 once every run has finished and the Score says so (submission_secondary_refresh)
        sub.progress = 1.0 if sub.status != Submission.Status.SCORED else _settled_fraction(runs)
        sub.finished_at = timezone.now()
        sub.save(update_fields=["status", "failure_reason", "step", "progress", "finished_at", "updated_at"])
    return sub


def _settled_fraction(runs: list[EvaluationRun]) -> float:
    """A scored submission's progress: the share of its runs finished (1.0: its Score is final)."""
    return sum(r.status in TERMINAL for r in runs) / max(len(runs), 1)


def submission_secondary_refresh(*, submission: Submission) -> bool:
    """A scored submission whose secondary run finished after its Score was computed: recompute the
    Score from the stored results (no model), so transfer, reproduction and steering appear as they
    are measured; then its progress and step say how many runs are left (progress 1.0 only once
    the Score is final). Idempotent (nothing newer: nothing done). Returns whether it rescored."""
    # One refresh at a time per submission (a row lock): two workers finishing its last two
    # secondary runs at once must not each read the other's run as still pending, which would
    # leave the step at "1 pending" for ever. The run statuses are read under the lock, and the
    # step is rewritten from them even when nothing needs rescoring.
    with transaction.atomic():
        locked = Submission.objects.select_for_update().filter(pk=submission.pk).first()
        if locked is None or locked.status != Submission.Status.SCORED:
            return False
        runs = list(submission_runs(locked))
        computed_at = (
            Score.objects.filter(probe_version_id=locked.probe_version_id)
            .order_by("-computed_at")
            .values_list("computed_at", flat=True)
            .first()
        )
        imported = locked.via == BUNDLE_VIA  # every run it replicates moves its Score
        finished = [
            r.finished_at for r in runs if (imported or r.kind not in PRIMARY_KINDS) and r.finished_at
        ]
        rescored = False
        if computed_at is not None and finished and max(finished) > computed_at:
            try:
                with transaction.atomic():
                    submission_score(submission=locked, runs=runs, first=False)
                rescored = True
            except EvaluatorError as exc:  # the Score stays as it was, with the axis pending
                log.warning("rescoring submission %s after a secondary run failed: %s", locked.pk, exc)
        if imported:
            replication_refresh(locked.probe_version)
        pending = sum(r.status not in TERMINAL for r in runs)
        Submission.objects.filter(pk=locked.pk).update(
            step=f"scored; {pending} secondary run(s) pending" if pending else SETTLED_STEP,
            progress=_settled_fraction(runs),
            updated_at=timezone.now(),
        )
    return rescored


def submissions_secondary_reconcile() -> int:
    """Rescore the scored submissions whose secondary runs finished after their Score (the fan-out
    of that run was lost). Returns how many were rescored."""
    newest_score = (
        Score.objects.filter(probe_version_id=OuterRef("probe_version_id"))
        .order_by("-computed_at")
        .values("computed_at")[:1]
    )
    late = Run.objects.filter(submission=OuterRef("pk"), finished_at__gt=Subquery(newest_score)).exclude(
        kind__in=PRIMARY_KINDS
    )
    stale = Submission.objects.filter(status=Submission.Status.SCORED).filter(Exists(late))
    return sum(
        submission_secondary_refresh(submission=sub) for sub in stale.select_related("probe_version__probe")
    )


def reference_probe_submit(
    *, artifact: Path, metadata: dict, role: str = "", notify: Callable[[str], object] | None = None
) -> tuple[Submission, bool]:
    """Submit a registry reference probe (its ``probe.safetensors`` and metadata) under the system
    account, with its role. Returns the submission and whether it is new: a file the system
    account already submitted is not submitted again.

    The install takes precedence over anyone who submitted the same file first (the file is
    public in the registry): that earlier copy is set aside (``displaced_by_reference``, so the
    file can be accepted once more; its probe takes no new versions) and its submission rejected
    with a public reason naming the reference probe; its probe, other versions and records stay.
    It also takes precedence over a probe of anyone else that holds the reference's slug (made
    before the reference probes' names were reserved): that probe is moved to another slug and
    renamed (:func:`_reference_slug_reclaim`), so the reference gets its own slug, never ``…-2``.
    Each of these is logged as a warning and passed to ``notify`` (the install prints it). Nobody
    else can ever own a reference probe, and an eval-awareness reference is only ever the system
    account's."""
    system = system_account_get_or_create()
    sha = artifacts.sha256_bytes(artifact.read_bytes())
    with transaction.atomic():
        existing = (
            ProbeVersion.objects.filter(artifact_sha256=sha, displaced_by_reference=False)
            .select_related("probe", "submission")
            .first()
        )
        if existing is not None and existing.probe.owner_id == system.pk:
            return existing.submission, False
        if existing is not None:
            ProbeVersion.objects.filter(pk=existing.pk).update(displaced_by_reference=True)
        _reference_slug_reclaim(
            probe_slug_base(probe_name_clean(metadata.get("name"))), system=system, notify=notify
        )
        with open(artifact, "rb") as fh:
            submission = submission_create(
                user=system,
                artifact=fh,
                metadata=metadata,
                via="seed",
                is_reference=True,
                reference_role=role,
            )
        if existing is not None:
            _reference_copy_reject(existing, reference=submission.probe_version, notify=notify)
    return submission, True


def _reference_slug_reclaim(slug: str, *, system, notify: Callable[[str], object] | None) -> None:
    """Free ``slug`` (the one a reference probe's name gives) for the reference probe: a probe of
    anyone but the system account that holds it is moved to ``<slug>-renamed-<id>`` and its name
    marked as not the reference's. Nothing else about it changes (owner, versions, scores)."""
    holder = Probe.objects.select_for_update().filter(slug=slug).exclude(owner=system).first()
    if holder is None:
        return
    new_slug, n = f"{slug}-renamed-{holder.pk}", 1
    while Probe.objects.filter(slug=new_slug).exists():
        n += 1
        new_slug = f"{slug}-renamed-{holder.pk}-{n}"
    suffix = " (not the reference probe)"
    name_max = Probe._meta.get_field("name").max_length or 160
    new_name = holder.name[: name_max - len(suffix)] + suffix
    message = (
        f"probe {holder.slug!r} (id {holder.pk}, owner {holder.owner.username!r}) held the slug of the"
        f" reference probe; it is now {new_slug!r}, named {new_name!r}: a maintainer may want to review it"
    )
    Probe.objects.filter(pk=holder.pk).update(slug=new_slug, name=new_name)
    log.warning(message)
    if notify is not None:
        notify(message)


def _reference_copy_reject(
    version: ProbeVersion, *, reference: ProbeVersion, notify: Callable[[str], object] | None = None
) -> None:
    """Reject the submission of a copy set aside for a reference probe's install, saying why."""
    reason = (
        f"this file is the reference probe {reference.probe.slug}, which the maintainers install"
        " under the system account; the reference takes precedence over earlier copies of its file"
    )
    Submission.objects.filter(probe_version=version).exclude(status=Submission.Status.REJECTED).update(
        status=Submission.Status.REJECTED,
        rejection_reason=reason,
        finished_at=timezone.now(),
        updated_at=timezone.now(),
    )
    log.warning("%s set aside: its file is the reference probe %s", version, reference)
    if notify is not None:
        notify(
            f"{version} (owner {version.probe.owner.username!r}) set aside: its file is this reference probe"
        )
