"""The registry mirrors: Category, License, WeightsSpec, BaseModel, Task, TaskSplit. They mirror the
files under registry/ and tasks.yaml and are written only by ``sync_registry``."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.urls import reverse


class Category(models.Model):
    slug = models.SlugField(primary_key=True, max_length=40)
    name = models.CharField(max_length=80)
    description = models.TextField(blank=True)
    order = models.PositiveSmallIntegerField(default=0)

    #: not stored: set on the categories the API lists (probes with a scored version)
    n_probes: int

    class Meta:
        ordering = ["order"]
        verbose_name_plural = "categories"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("leaderboard:category", args=[self.slug])


class License(models.Model):
    spdx_id = models.CharField(primary_key=True, max_length=40)
    name = models.CharField(max_length=120)
    score = models.FloatField(help_text="openness score L in [0.2, 1]")

    class Meta:
        ordering = ["-score", "spdx_id"]

    def __str__(self) -> str:
        return self.spdx_id


class WeightsSpec(models.Model):
    """A versioned ProbeScore weights spec (registry/weights/<version>.yaml)."""

    version = models.CharField(primary_key=True, max_length=20)
    released = models.CharField(max_length=20, blank=True)
    description = models.TextField(blank=True)
    weights = models.JSONField(help_text="component → weight; sums to 1.0, none above 0.30")
    imputation = models.JSONField(help_text="component → imputation factor / default")
    imputation_rules = models.JSONField(
        default=dict, blank=True, help_text="component → imputation rule (category_lowest); else the default"
    )
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["version"]

    def __str__(self) -> str:
        return self.version


class BaseModel(models.Model):
    slug = models.SlugField(primary_key=True, max_length=80)
    name = models.CharField(max_length=120)
    family = models.CharField(max_length=40)
    architecture = models.CharField(max_length=40)
    n_layers = models.PositiveSmallIntegerField()
    d_model = models.PositiveIntegerField()
    weights_license = models.CharField(max_length=80)
    weights_sha256 = models.CharField(max_length=64)
    package = models.CharField(max_length=120, blank=True)
    package_version = models.CharField(max_length=40, blank=True)
    is_active = models.BooleanField(default=True)

    #: not stored: set by selectors.registry.base_model_list (probes with a scored version)
    n_probes: int

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("leaderboard:model", args=[self.slug])


class Task(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        SUPERSEDED = "superseded"

    slug = models.SlugField(primary_key=True, max_length=80, help_text="e.g. halueval-qa-v1")
    category = models.ForeignKey(Category, on_delete=models.PROTECT, related_name="tasks")
    family = models.CharField(max_length=80)
    name = models.CharField(max_length=160)
    description = models.TextField(blank=True)
    positive = models.TextField(help_text="what label 1 means")
    negative = models.TextField(blank=True, help_text="what label 0 means")
    source = models.JSONField(default=dict, help_text="package, version, path, license, citation")
    templates = models.JSONField(default=dict)
    card = models.TextField(blank=True, help_text="the task card (markdown)")
    caveats = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE)
    superseded_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT)
    minted = models.CharField(max_length=20, blank=True)
    on_policy = models.BooleanField(
        default=False, help_text="labels from each base model's own behaviour; splits per model"
    )
    text_baselines = models.JSONField(
        default=dict,
        blank=True,
        help_text="the committed text-baseline panel without its per-row scores (members, their"
        " AUROCs per split, sha256); {model: panel} for an on-policy task",
    )

    class Meta:
        ordering = ["category__order", "slug"]

    def __str__(self) -> str:
        return self.slug

    def get_absolute_url(self) -> str:
        return reverse("leaderboard:task", args=[self.slug])

    def measured_on(self, base_model_id: str) -> bool:
        """Whether probes on ``base_model_id`` are measured on this task: an on-policy task only on
        the models it has split files for (an encoder has no behaviour to label)."""
        return not self.on_policy or self.splits.filter(base_model_id=base_model_id).exists()

    def text_panel(self, base_model_id: str | None = None) -> dict:
        """The text-baseline panel a probe on ``base_model_id`` is judged against ({} when none);
        evaluator.axes.text_baselines reads it (``strongest``, the pinned ``sha256``)."""
        panels = self.text_baselines or {}
        return dict((panels.get(base_model_id or "") if self.on_policy else panels) or {})


class TaskSplit(models.Model):
    class Name(models.TextChoices):
        TRAIN = "train"
        TEST = "test"
        DISTSHIFT = "distshift"
        HOLDOUT_POOL = "holdout_pool"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="splits")
    name = models.CharField(max_length=20, choices=Name.choices)
    #: the base model whose own behaviour labels this file (an on-policy task); null: every model's
    base_model = models.ForeignKey(
        BaseModel, null=True, blank=True, on_delete=models.PROTECT, related_name="task_splits"
    )
    path = models.CharField(max_length=255)
    rows = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["task", "base_model", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "name"], condition=Q(base_model__isnull=True), name="uniq_split_per_task"
            ),
            models.UniqueConstraint(
                fields=["task", "base_model", "name"],
                condition=Q(base_model__isnull=False),
                name="uniq_split_per_task_model",
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.task_id}/{self.base_model_id}/{self.name}"
            if self.base_model_id
            else f"{self.task_id}/{self.name}"
        )
