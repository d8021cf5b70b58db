"""Writes. Every change to probes, submissions, runs, scores, cycles and leakage records goes
through a function here, in a transaction. Functions take keyword-only arguments and are named
``<entity>_<action>``.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from leaderboard.errors import Conflict, ServiceError
from leaderboard.models import LeakageRecord, Probe, ProbeVersion, Submission

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- submissions


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


# --------------------------------------------------------------------------- leakage


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
    confirmed.
    """
    if rule:
        existing = LeakageRecord.objects.filter(
            probe=probe, probe_version=probe_version, rule=rule,
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
