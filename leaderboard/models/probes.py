"""Probes, their versions and submissions, and which probe versions are public.

"A probe version is public once its submission is scored" and "the latest public version of a
probe" are defined here and nowhere else (``public_q``, ``ProbeVersion.objects``); the board's
entries are defined beside Score (``leaderboard.models.scores``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Exists, OuterRef, Q
from django.urls import reverse
from django.utils import timezone

from leaderboard.models.catalog import BaseModel, Category, License

if TYPE_CHECKING:
    from leaderboard.models.runs import EvaluationRun
    from leaderboard.models.scores import Score


def public_q(via: str = "") -> Q:
    """The condition that a probe version is public (its submission is scored), on ProbeVersion
    or on rows that reach one through ``via`` (``"probe_version__"`` for Scores)."""
    return Q(**{f"{via}submission__status": Submission.Status.SCORED})


class ProbeVersionQuerySet(models.QuerySet):
    def public(self):
        """Versions whose submission is scored: the only ones a page, the API or an export shows."""
        return self.filter(public_q())

    def latest_per_probe(self, *, spec=None):
        """Each probe's newest public version; with ``spec``, the newest that has a Score under it."""
        newer = ProbeVersion.objects.public().filter(
            probe_id=OuterRef("probe_id"), number__gt=OuterRef("number")
        )
        qs = self.public()
        if spec is not None:
            newer, qs = newer.filter(scores__spec=spec), qs.filter(scores__spec=spec)
        return qs.filter(~Exists(newer))


class Probe(models.Model):
    """A probe id: the stable identity that versions, scores and leakage records attach to."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        DEPRECATED = "deprecated"

    slug = models.SlugField(unique=True, max_length=120)
    name = models.CharField(max_length=160)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="probes")
    category = models.ForeignKey(Category, on_delete=models.PROTECT, related_name="probes")
    base_model = models.ForeignKey(BaseModel, on_delete=models.PROTECT, related_name="probes")
    is_reference = models.BooleanField(
        default=False, help_text="shipped by the maintainers (reference probes)"
    )
    #: "eval_awareness" marks the reference probe whose scores every auroc_ea is computed from.
    reference_role = models.CharField(max_length=40, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE)
    deprecated_reason = models.TextField(blank=True)
    deprecated_at = models.DateTimeField(null=True, blank=True)
    #: consecutive quarterly cycles held (drop ≤ 5 points); the badge shows from 2
    stability_quarters = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["slug"]
        indexes = [
            # the board: probes of one category (and base model filter)
            models.Index(fields=["category", "base_model"], name="probe_category_model"),
            # the current eval-awareness reference probe of a base model
            models.Index(fields=["base_model", "reference_role"], name="probe_reference_role"),
            # the board's count cache: the latest deprecation, read as one index lookup
            models.Index(fields=["deprecated_at"], name="probe_deprecated_at"),
        ]

    def __str__(self) -> str:
        return self.slug

    def get_absolute_url(self) -> str:
        return reverse("leaderboard:probe", args=[self.slug])


class ProbeVersion(models.Model):
    """One uploaded artifact of a probe; a new artifact is a new version, history is kept."""

    class Input(models.TextChoices):
        SINGLE = "single"
        CONTRAST_PAIR = "contrast_pair"

    class Position(models.TextChoices):
        LAST_TOKEN = "last_token"
        MEAN = "mean"
        MAX = "max"

    class Output(models.TextChoices):
        LOGIT = "logit"
        PROBABILITY = "probability"

    probe = models.ForeignKey(Probe, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    #: one live version per file (``uniq_version_artifact``); a displaced copy keeps its hash
    artifact_sha256 = models.CharField(max_length=64)
    artifact_path = models.CharField(max_length=255, help_text="relative to ARTIFACT_ROOT")
    artifact_bytes = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=20, help_text="linear | mlp | sae_features")
    layer = models.PositiveSmallIntegerField()
    position = models.CharField(max_length=20, choices=Position.choices)
    input = models.CharField(max_length=20, choices=Input.choices)
    output = models.CharField(max_length=20, choices=Output.choices)
    license = models.ForeignKey(License, on_delete=models.PROTECT, related_name="probe_versions")
    authors = models.JSONField(default=list)
    paper_url = models.URLField(blank=True, max_length=500)
    description = models.TextField(blank=True)
    training_data = models.JSONField(default=dict, help_text='{"tasks": [...], "external": "..."}')
    declared_metrics = models.JSONField(default=dict, blank=True)
    recipe = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(help_text="the submitted metadata, verbatim")
    #: reproduction check of the recipe: null = not run (no recipe), else the numbers
    reproduction = models.JSONField(null=True, blank=True)
    reproduced = models.BooleanField(null=True)
    #: declared vs measured: {"metric": {"declared", "measured", "gap"}} for gaps > 5 points
    declared_gaps = models.JSONField(default=dict, blank=True)
    #: the AUROC the quarterly re-evaluation compares against (set when first scored)
    reference_auroc = models.FloatField(null=True, blank=True)
    #: someone else's earlier copy of a reference probe's file, set aside when the reference-probe
    #: install put the file under the system account (its submission is rejected with the reason)
    displaced_by_reference = models.BooleanField(default=False)
    #: the bundle this version was imported from (published by another board, or by this one
    #: elsewhere); None: submitted here. Its Score is computed from the bundle's published runs.
    bundle = models.ForeignKey(
        "leaderboard.ResultBundle", null=True, blank=True, on_delete=models.PROTECT, related_name="versions"
    )
    #: an imported version's replication here (services.replication): the runs compared with
    #: the bundle's, the largest per-example difference, and those beyond the protocol's tolerance
    replication = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProbeVersionQuerySet.as_manager()

    class Meta:
        ordering = ["probe", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["probe", "number"], name="uniq_version_number"),
            # a file is accepted once (the duplicate check looks the hash up here); only copies
            # displaced by a reference probe's install are left out
            models.UniqueConstraint(
                fields=["artifact_sha256"],
                condition=Q(displaced_by_reference=False),
                name="uniq_version_artifact",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.probe.slug} v{self.number}"

    def get_absolute_url(self) -> str:
        return reverse("leaderboard:probe", args=[self.probe.slug])


class Submission(models.Model):
    """One upload and its life: submitted → validated → queued → running → scored | failed | rejected."""

    class Status(models.TextChoices):
        SUBMITTED = "submitted"
        VALIDATED = "validated"
        QUEUED = "queued"
        RUNNING = "running"
        SCORED = "scored"
        FAILED = "failed"
        REJECTED = "rejected"

    probe_version = models.OneToOneField(ProbeVersion, on_delete=models.PROTECT, related_name="submission")
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="submissions"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.SUBMITTED)
    via = models.CharField(max_length=10, default="api", help_text="api | web | seed")
    progress = models.FloatField(default=0.0)
    step = models.CharField(max_length=200, blank=True)
    failure_reason = models.TextField(blank=True, help_text="shown to the submitter")
    rejection_reason = models.TextField(blank=True, help_text="public")
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    #: not stored: set by selectors.submissions on the submission it details
    runs_sorted: list[EvaluationRun]
    scores_sorted: list[Score]

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # "my submissions" list, newest first
            models.Index(fields=["submitter", "-created_at"], name="submission_by_user"),
            # the maintainers' queue: open submissions, oldest first
            models.Index(fields=["status", "created_at"], name="submission_queue"),
        ]

    def __str__(self) -> str:
        return f"submission {self.pk} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("submit:detail", args=[self.pk])

    @property
    def age(self):
        return timezone.now() - self.created_at
