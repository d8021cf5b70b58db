"""Leakage records: findings that a probe trained on test data, permanent once confirmed."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from leaderboard.models.probes import Probe, ProbeVersion


class LeakageRecordQuerySet(models.QuerySet):
    """Bulk writes cannot touch confirmed records (the database refuses them too)."""

    def update(self, **kwargs):
        from leaderboard.errors import ImmutableRecordError

        if self.filter(status=LeakageRecord.Status.CONFIRMED).exists():
            raise ImmutableRecordError("confirmed leakage records cannot be changed")
        return super().update(**kwargs)

    def delete(self):
        from leaderboard.errors import ImmutableRecordError

        if self.filter(status=LeakageRecord.Status.CONFIRMED).exists():
            raise ImmutableRecordError("confirmed leakage records cannot be deleted")
        return super().delete()


class LeakageRecord(models.Model):
    """A finding that a probe trained on test data. Confirmed records are public and permanent:
    the model layer refuses to change or delete them and so does the database (triggers)."""

    class Status(models.TextChoices):
        OPEN = "open"
        CONFIRMED = "confirmed"
        DISMISSED = "dismissed"

    class Source(models.TextChoices):
        RULE = "rule"
        MAINTAINER = "maintainer"

    probe = models.ForeignKey(Probe, on_delete=models.PROTECT, related_name="leakage_records")
    probe_version = models.ForeignKey(
        ProbeVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    source = models.CharField(max_length=20, choices=Source.choices)
    rule = models.CharField(max_length=60, blank=True, help_text="which suspicion rule opened it")
    summary = models.CharField(max_length=300)
    evidence = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    public_note = models.TextField(blank=True)
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    reviewed_at = models.DateTimeField(null=True, blank=True)

    objects = LeakageRecordQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # the public leakage page and the board's badge: confirmed records per probe
            models.Index(fields=["status", "probe"], name="leakage_status_probe"),
        ]

    def __str__(self) -> str:
        return f"leakage {self.pk} on {self.probe_id} ({self.status})"

    def save(self, *args, **kwargs):
        from leaderboard.errors import ImmutableRecordError

        if self.pk is not None:
            stored = type(self).objects.filter(pk=self.pk).values_list("status", flat=True).first()
            if stored == self.Status.CONFIRMED:
                raise ImmutableRecordError(f"leakage record {self.pk} is confirmed and cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        from leaderboard.errors import ImmutableRecordError

        stored = type(self).objects.filter(pk=self.pk).values_list("status", flat=True).first()
        if stored == self.Status.CONFIRMED:
            raise ImmutableRecordError(f"leakage record {self.pk} is confirmed and cannot be deleted")
        return super().delete(*args, **kwargs)
