"""Result bundles this board published or imported (``evaluator.bundles`` is the file format),
the runs an imported entry was published with, and the signed receipts of those who replicated a
published entry elsewhere."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from leaderboard.models.catalog import BaseModel, Task
from leaderboard.models.probes import ProbeVersion


class ResultBundle(models.Model):
    """One signed bundle: written by this board (``published``: ``export_bundle``, a completed
    quarterly cycle) or checked and read in (``imported``: ``import_bundle``)."""

    class Role(models.TextChoices):
        PUBLISHED = "published"
        IMPORTED = "imported"

    #: the SHA-256 of its manifest (the bundle's content address)
    id = models.CharField(primary_key=True, max_length=64)
    role = models.CharField(max_length=20, choices=Role.choices)
    board = models.CharField(max_length=120, help_text="the publishing board's name")
    signer_fingerprint = models.CharField(max_length=16)
    signer_public_key = models.CharField(max_length=64, help_text="raw Ed25519 key, base64")
    commit = models.CharField(max_length=40, blank=True, help_text="the publishing board's code commit")
    code_version = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(help_text="when the publishing board wrote it")
    recorded_at = models.DateTimeField(default=timezone.now)
    entries = models.PositiveIntegerField()
    bytes = models.PositiveBigIntegerField()
    #: relative to DATA_DIR/bundles (published ones; imported ones are not kept)
    path = models.CharField(max_length=255, blank=True)
    quarter = models.CharField(max_length=6, blank=True, help_text="the cycle that published it")
    #: [[probe slug, version number, artifact sha256], ...]: what it holds (receipts name one)
    contents = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return f"{self.role} bundle {self.id[:12]} ({self.board}, {self.entries} entries)"


class PublishedRun(models.Model):
    """A run of an imported entry as its bundle published it: its per-example scores and stored
    metrics. The imported Score is recomputed from these; a run measured here is an EvaluationRun."""

    bundle = models.ForeignKey(ResultBundle, on_delete=models.PROTECT, related_name="runs")
    probe_version = models.ForeignKey(ProbeVersion, on_delete=models.PROTECT, related_name="published_runs")
    kind = models.CharField(max_length=20)
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    split = models.CharField(max_length=20)
    base_model = models.ForeignKey(BaseModel, on_delete=models.PROTECT, related_name="+")
    protocol = models.CharField(max_length=20, blank=True)
    code_version = models.CharField(max_length=40, blank=True)
    split_sha256 = models.CharField(max_length=64, blank=True)
    worker_host = models.CharField(max_length=200, blank=True)
    environment = models.JSONField(default=dict, blank=True)
    example_scores = models.JSONField(default=list, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["probe_version", "kind", "task", "split"]
        constraints = [
            models.UniqueConstraint(
                fields=["bundle", "probe_version", "kind", "task", "split", "base_model"],
                name="uniq_published_run",
            )
        ]

    def __str__(self) -> str:
        return f"published run {self.probe_version} {self.kind} {self.task_id}/{self.split}"


class ReplicationReceipt(models.Model):
    """Someone reran an entry of a bundle this board published and signed what they found
    (``python -m evaluator replicate``); stored as signed, so anyone can verify it offline with the
    replicator's public key. One per replicator key, entry and bundle (a new one replaces it)."""

    class Verdict(models.TextChoices):
        AGREES = "agrees"
        DIFFERS = "differs"

    probe_version = models.ForeignKey(ProbeVersion, on_delete=models.PROTECT, related_name="receipts")
    bundle = models.ForeignKey(ResultBundle, on_delete=models.PROTECT, related_name="receipts")
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="replication_receipts"
    )
    replicator_fingerprint = models.CharField(max_length=16)
    replicator_public_key = models.CharField(max_length=64, help_text="raw Ed25519 key, base64")
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    runs_compared = models.PositiveIntegerField()
    max_abs_diff = models.FloatField(null=True, blank=True)
    #: the receipt as signed (canonical JSON of this object is what the signature covers)
    receipt = models.JSONField()
    signature = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["probe_version", "bundle", "replicator_fingerprint"], name="uniq_receipt_per_key"
            )
        ]

    def __str__(self) -> str:
        return f"receipt {self.replicator_fingerprint} {self.verdict} for {self.probe_version}"
