"""Leakage records: open one by a suspicion rule or by hand, review it. Suspicion
rule 2 (declared training data overlapping a test split) runs when a version is scored; rule 1
(test far above the fresh holdout) runs in ``services.reevaluation``.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from evaluator.data.leakage import declared_text_sources, overlapping_test_splits
from evaluator.errors import EvaluatorError
from leaderboard.errors import Conflict, ServiceError
from leaderboard.models import EvaluationRun, LeakageRecord, Probe, ProbeVersion
from leaderboard.registry_sync import registry_load

log = logging.getLogger(__name__)
Run = EvaluationRun

DECLARED_OVERLAP_RULE = "declared_training_overlap"


def leakage_rules_on_scoring(*, version: ProbeVersion) -> LeakageRecord | None:
    """Suspicion rule 2, run when a version is scored: its declared training data
    (task splits and external text hashes, see validation._training_data_validate) shares a
    normalised text with a test split it is measured on → a record opened for review. A fault
    reading the registry is logged, never fails the scoring."""
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
            "normalisation": "NFKC, case folded, punctuation → space, whitespace collapsed (evaluator.data.leakage)",
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
