"""Replicating imported entries here: an entry that came in a signed bundle (services.bundles) is
rerun from its artifact by this board's workers, and every run is compared with the run the bundle
published, per example, within the protocol's tolerance.

    runs_with_published   the runs a Score reads: the ones measured here, and for every run not yet
                          measured here (or not yet succeeded) the one the bundle published
    replications_start    plan the runs of imported versions that replicate what was published,
                          at the lowest priority, in the order given (the demo: the cheapest
                          category whole, then one entry of every other one); the references'
                          ``reference`` runs last, the other axes once those are done
    replication_state     compare the runs measured here with the bundle's: replicating,
                          replicated (with the largest difference) or differs (with the runs)
    receipt_record        a signed receipt of someone who replicated an entry this board
                          published (``python -m evaluator replicate``), checked and stored

While an entry replicates, its Score moves from the bundle's numbers to this board's, run by run
(``services.submissions.submission_secondary_refresh`` rescores it as each run finishes). The
runs of imported versions go after every other queued run (``services.runs.evaluation_run_next``):
a probe a user submits is measured first, reading an imported eval-awareness reference's published
``reference`` runs until they are replicated (``selectors.shared.published_stands_in``).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from evaluator import bundles as fmt
from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.strict_json import JsonRejected, json_loads_strict
from leaderboard import runner
from leaderboard.axes import KINDS, PRIMARY_KINDS
from leaderboard.errors import ValidationFailed
from leaderboard.models import (
    EvaluationRun,
    ProbeVersion,
    PublishedRun,
    ReplicationReceipt,
    ResultBundle,
    Submission,
)
from leaderboard.selectors.shared import REPLICATING, ea_reference_version
from leaderboard.services.runs import (
    evaluation_runs_dispatch_on_commit,
    evaluation_runs_plan,
    runs_get_or_create,
)

Run = EvaluationRun
TERMINAL = (Run.Status.SUCCEEDED, Run.Status.FAILED)


def _key(run: EvaluationRun | PublishedRun) -> tuple:
    return (run.probe_version_id, run.kind, run.task_id, run.split, run.base_model_id)


def _label(run: EvaluationRun | PublishedRun) -> str:
    return f"{run.kind} {run.task_id}/{run.split} on {run.base_model_id}"


def published_as_runs(published: list[PublishedRun]) -> list[EvaluationRun]:
    """Unsaved EvaluationRuns of published runs (succeeded): what the score writer reads."""
    return [
        EvaluationRun(
            probe_version_id=r.probe_version_id,
            kind=r.kind,
            task_id=r.task_id,
            split=r.split,
            base_model_id=r.base_model_id,
            status=Run.Status.SUCCEEDED,
            protocol=r.protocol,
            code_version=r.code_version,
            split_sha256=r.split_sha256,
            worker_host=r.worker_host,
            environment=r.environment,
            example_scores=r.example_scores,
            metrics=r.metrics,
            finished_at=r.finished_at,
        )
        for r in published
    ]


def _published_for(version: ProbeVersion) -> list[PublishedRun]:
    """The published runs a version's Score may read: its own (an imported version) and the
    ``reference`` runs of its base model's eval-awareness reference (an imported one)."""
    out: list[PublishedRun] = []
    if version.bundle_id is not None:
        out += list(PublishedRun.objects.filter(probe_version=version, bundle_id=version.bundle_id))
    if version.probe.category_id != EVAL_AWARENESS:
        ref = ea_reference_version(base_model=version.probe.base_model_id)
        if ref is not None and ref.bundle_id is not None:
            out += list(
                PublishedRun.objects.filter(
                    probe_version=ref, bundle_id=ref.bundle_id, kind=Run.Kind.REFERENCE
                )
            )
    return out


def runs_with_published(version: ProbeVersion, runs: list[EvaluationRun]) -> list[EvaluationRun]:
    """``runs`` with, for every published run whose key (version, kind, task, split, model) has no
    succeeded run here, the published run in place of any queued, running or failed one. A
    version measured only here (and a reference measured here) is returned unchanged."""
    published = _published_for(version)
    if not published:
        return runs
    measured = {_key(r) for r in runs if r.status == Run.Status.SUCCEEDED}
    fill = [p for p in published if _key(p) not in measured]
    filled = {_key(p) for p in fill}
    return [r for r in runs if _key(r) not in filled] + published_as_runs(fill)


def _published_references_plan(version: ProbeVersion) -> list[EvaluationRun]:
    """The ``reference`` runs an imported eval-awareness reference published, made here too (never
    tied to a submission): the probes here plan only the current reference's, on the tasks they
    read, so a reference replaced since, or a task no probe here reads, would leave its published
    run never replicated."""
    published = PublishedRun.objects.filter(
        probe_version=version, bundle_id=version.bundle_id, kind=Run.Kind.REFERENCE
    ).select_related("task", "base_model")
    planned = [(version, p.kind, p.task, p.split, p.base_model_id) for p in published]
    return runs_get_or_create(planned, submission=None) if planned else []


def replications_start(versions: list[ProbeVersion]) -> int:
    """Plan the runs of each imported version that replicate what its bundle published (its score
    and reference runs), in the order given: the queue takes replication runs oldest first, after
    every other run. The eval-awareness references' ``reference`` runs (dozens, one per task of
    every category; a user's submission reads the published ones meanwhile) go after the other
    versions' runs, so each entry's replication is not held up by them. The other axes (transfer,
    reproduce, steer, stress, robustness: what the bundle does not hold) are planned once nothing
    of that is left (:func:`replications_rest_plan`). Returns how many runs were made; a version
    already planned makes none."""
    made: list[EvaluationRun] = []
    for version in versions:
        if version.bundle_id is None:
            continue
        with transaction.atomic():
            submission = Submission.objects.select_for_update().get(probe_version=version)
            runs = evaluation_runs_plan(version=version, submission=submission, kinds=PRIMARY_KINDS)
            runs += _published_references_plan(version)
            made += runs
            evaluation_runs_dispatch_on_commit(runs)
    Run.objects.filter(
        pk__in=[r.pk for r in made if r.kind == Run.Kind.REFERENCE], status=Run.Status.QUEUED
    ).update(queued_at=timezone.now())
    return len(made) + replications_rest_plan()


def replications_rest_plan() -> int:
    """Once no imported version has a primary run (score, reference) left to replicate, plan the
    other axes of every imported version whose replication has started: they fill the columns its
    bundle did not publish. Idempotent; called as replication runs finish and when the demo starts
    again. Returns how many runs were made."""
    started = Run.objects.filter(REPLICATING, cycle=None)
    if started.filter(kind__in=PRIMARY_KINDS).exclude(status__in=TERMINAL).exists():
        return 0
    rest = [k for k in KINDS if k not in PRIMARY_KINDS]
    versions = ProbeVersion.objects.filter(pk__in=started.values("probe_version_id")).exclude(
        pk__in=started.filter(kind__in=rest).values("probe_version_id")
    )
    made = 0
    for version in versions.order_by("pk"):
        with transaction.atomic():
            submission = Submission.objects.select_for_update().get(probe_version=version)
            runs = evaluation_runs_plan(version=version, submission=submission, kinds=rest)
            made += len(runs)
            evaluation_runs_dispatch_on_commit(runs)
    return made


def replication_state(version: ProbeVersion) -> dict[str, Any] | None:
    """How far an imported version's replication has got (None: not imported)."""
    if version.bundle_id is None:
        return None
    reg = runner.registry()
    published = {
        _key(p): p for p in PublishedRun.objects.filter(probe_version=version, bundle_id=version.bundle_id)
    }
    here = {_key(r): r for r in Run.objects.filter(probe_version=version, cycle=None)}
    compared, differs, not_compared, pending, worst = 0, [], [], 0, 0.0
    for key, p in sorted(published.items()):
        r = here.get(key)
        if r is None or r.status not in TERMINAL:
            pending += 1
            continue
        if r.status == Run.Status.FAILED:
            differs.append({"run": _label(p), "why": f"failed here: {r.error[:200]}"})
            continue
        if not p.example_scores and not r.example_scores:
            not_compared.append(_label(p))
            continue
        protocol = reg.protocols.get(p.protocol) or reg.protocol()
        diff, why = fmt.example_diff(p.example_scores, r.example_scores, protocol.tolerances.score_bound)
        compared += 1
        if why:
            differs.append({"run": _label(p), "why": why})
        else:
            worst = max(worst, diff or 0.0)
    state = "replicating" if pending else ("differs" if differs else "replicated")
    return {
        "state": state,
        "runs_published": len(published),
        "runs_compared": compared,
        "runs_pending": pending,
        "max_abs_diff": worst if compared else None,
        "differs": differs,
        "not_compared": not_compared,
    }


def replication_refresh(version: ProbeVersion) -> dict[str, Any] | None:
    """Recompute and store an imported version's replication state; once it is no longer
    replicating, plan the other axes if nothing primary is left to replicate anywhere."""
    state = replication_state(version)
    ProbeVersion.objects.filter(pk=version.pk).update(replication=state)
    version.replication = state
    if state is not None and state["state"] != "replicating":
        # after the caller's transaction: it holds this submission's lock, and planning locks
        # every other imported one in turn (two workers doing both at once could deadlock)
        transaction.on_commit(replications_rest_plan, robust=True)
    return state


# --------------------------------------------------------------------------- receipts from elsewhere

#: the largest receipt body accepted (JSON); a receipt lists at most MAX_RECEIPT_RUNS runs
RECEIPT_MAX_BYTES = 512 * 1024


def receipt_record(*, user, body: bytes) -> ReplicationReceipt:
    """Store a signed replication receipt (``python -m evaluator replicate`` posts one): ``body`` is
    ``{"receipt": {...}, "signature": "..."}``. It must name a bundle this board published and an
    entry it holds with that artifact, and its signature must verify with the replicator's key it
    names. A receipt from the same key for the same entry and bundle replaces the earlier one.
    ValidationFailed (400, with the field) for anything else."""
    if len(body) > RECEIPT_MAX_BYTES:
        raise ValidationFailed(f"body: at most {RECEIPT_MAX_BYTES} bytes are accepted", field="body")
    try:
        payload = json_loads_strict(body, max_bytes=RECEIPT_MAX_BYTES)
    except (JsonRejected, UnicodeDecodeError) as exc:
        raise ValidationFailed(f"body: {exc}", field="body") from None
    if not isinstance(payload, dict) or set(payload) != {"receipt", "signature"}:
        raise ValidationFailed(
            'body: a JSON object {"receipt": {...}, "signature": "..."} expected', field="body"
        )
    receipt, signature = payload["receipt"], payload["signature"]
    try:
        fp = fmt.receipt_check(receipt, signature)
    except fmt.BundleError as exc:
        problem = exc.problems[0]
        raise ValidationFailed(problem, field=problem.split(":")[0]) from None
    bundle = ResultBundle.objects.filter(id=receipt["bundle"], role=ResultBundle.Role.PUBLISHED).first()
    if bundle is None:
        raise ValidationFailed(
            "receipt.bundle: not a bundle this board published (/api/v1/bundles)", field="receipt.bundle"
        )
    if [receipt["probe"], receipt["version"], receipt["artifact_sha256"]] not in bundle.contents:
        raise ValidationFailed(
            "receipt.probe: this bundle holds no such entry with that artifact", field="receipt.probe"
        )
    version = ProbeVersion.objects.filter(
        probe__slug=receipt["probe"], number=receipt["version"], artifact_sha256=receipt["artifact_sha256"]
    ).first()
    if version is None:
        raise ValidationFailed("receipt.probe: no such version on this board", field="receipt.probe")
    runs = receipt["runs"]
    diffs = [r["max_abs_diff"] for r in runs if r.get("max_abs_diff") is not None]
    row, _ = ReplicationReceipt.objects.update_or_create(
        probe_version=version,
        bundle=bundle,
        replicator_fingerprint=fp,
        defaults=dict(
            submitter=user,
            replicator_public_key=receipt["replicator"]["public_key"],
            verdict=receipt["verdict"],
            runs_compared=len(runs),
            max_abs_diff=max(diffs) if diffs else None,
            receipt=receipt,
            signature=signature,
            created_at=timezone.now(),
        ),
    )
    return row
