"""The data model (docs/METHODOLOGY.md says what each entity is for).

Registry entities (Category, Task, TaskSplit, BaseModel, License, WeightsSpec) are mirrors of the
files under registry/ and tasks.yaml, written only by ``sync_registry``. Everything measured
(EvaluationRun, Score) is written only by leaderboard.services. Member order follows Django's
style: fields, managers, Meta, __str__, save/delete, get_absolute_url, custom methods.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import BooleanField, Exists, ExpressionWrapper, F, OuterRef, Q, Window
from django.db.models.functions import RowNumber
from django.urls import reverse
from django.utils import timezone


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


# --------------------------------------------------------------------------- the board, named once
# "A probe version is public once its submission is scored", "the latest public version of a
# probe" and "the board's entries" are defined here and nowhere else; selectors and services read
# them through ``ProbeVersion.objects`` and ``Score.objects``.


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


class ScoreQuerySet(models.QuerySet):
    def public(self):
        """Scores of public versions."""
        return self.filter(public_q("probe_version__"))

    def on_board(self, *, spec, filters: Q | None = None):
        """The board's entries under ``spec``: the Score of each probe's newest public version
        that has a Score under it, with ``filters`` (on Score rows) applied after that choice."""
        newer = ProbeVersion.objects.public().filter(
            probe_id=OuterRef("probe_version__probe_id"),
            number__gt=OuterRef("probe_version__number"),
            scores__spec=spec,
        )
        qs = self.public().filter(spec=spec)
        if filters is not None:
            qs = qs.filter(filters)
        return qs.filter(~Exists(newer))

    def ranked(self, *, weights: dict, measured_only: bool = False, split: bool = True):
        """The board's ranking, the one ranker: ``board_rank`` numbers the entries 1, 2, ... in
        :func:`board_rank_order` (``weights``: the spec's, for the measured-only ranking); with
        ``split``, the active entries and the deprecated ones each among themselves."""
        is_deprecated = ExpressionWrapper(
            Q(probe_version__probe__status=Probe.Status.DEPRECATED), BooleanField()
        )
        qs = self.annotate(is_deprecated=is_deprecated)
        if measured_only:
            qs = qs.annotate(**measured_ranking_annotations(weights))
        order = board_rank_order(measured_only)
        window = (
            Window(RowNumber(), partition_by=[F("is_deprecated")], order_by=order)
            if split
            else Window(RowNumber(), order_by=order)
        )
        return qs.annotate(board_rank=window)


def board_rank_order(measured_only: bool = False, *, descending: bool = True) -> list:
    """Norm 2, the order every board is ranked in: the ProbeScore without the license
    contribution (rounded, so float noise ties), then the total, then the probe id. Measured-only:
    the same on the measured-only total (needs :func:`measured_ranking_annotations`)."""
    if measured_only:
        key, total = F("measured_key"), F("measured_rank_total")
    else:
        key, total = score_ranking_key(), F("total")
    slug = F("probe_version__probe__slug")
    if descending:
        return [key.desc(nulls_last=True), total.desc(nulls_last=True), slug.asc()]
    return [key.asc(nulls_first=True), total.asc(nulls_first=True), slug.desc()]


def measured_ranking_annotations(weights: dict) -> dict:
    """``measured_key`` and ``measured_rank_total``: norm 2 on the measured-only total, where
    the license contribution is scaled by the weight of the measured components (null, ranked
    last, when nothing is measured)."""
    from django.db.models import Case, Expression, FloatField, Value, When
    from django.db.models.fields.json import KeyTextTransform, KeyTransform
    from django.db.models.functions import Cast, Round

    from evaluator.data.registry.weights import COMPONENTS

    measured_weight: Expression = Value(0.0, output_field=FloatField())
    for name in COMPONENTS:
        measured = Q(**{f"components__{name}__value__isnull": False}) & ~Q(
            **{f"components__{name}__imputed": True}
        )
        measured_weight = measured_weight + Case(
            When(measured, then=Value(float(weights.get(name, 0.0)))),
            default=Value(0.0),
            output_field=FloatField(),
        )
    contribution = Cast(KeyTextTransform("contribution", KeyTransform("license", "components")), FloatField())
    ok = Q(measured_total__isnull=False) & Q(measured_weight__gt=0)
    return {
        "measured_weight": measured_weight,
        "measured_key": Case(
            When(ok, then=Round(F("measured_total") - contribution / F("measured_weight"), 12)),
            default=None,
            output_field=FloatField(),
        ),
        "measured_rank_total": Case(
            When(ok, then=F("measured_total")), default=None, output_field=FloatField()
        ),
    }


# --------------------------------------------------------------------------- probes


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

    class Output(models.TextChoices):
        LOGIT = "logit"
        PROBABILITY = "probability"

    probe = models.ForeignKey(Probe, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    #: one live version per file (``uniq_version_artifact``); a displaced copy keeps its hash
    artifact_sha256 = models.CharField(max_length=64)
    artifact_path = models.CharField(max_length=255, help_text="relative to ARTIFACT_ROOT")
    artifact_bytes = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=20, help_text="linear | mlp")
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


class ReevaluationCycle(models.Model):
    """A quarterly re-evaluation."""

    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    quarter = models.CharField(max_length=6, unique=True, help_text="e.g. 2026Q4")
    triggered_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    #: task slug → {"path", "rows", "sha256", "ids", ...}: the holdout minted for this quarter; an
    #: on-policy task's entry is {"by_model": {base model id → that entry}}, one holdout per base
    #: model minted from that model's pool (read them with ``holdout_for`` / ``holdout_files``)
    holdouts = models.JSONField(default=dict)
    #: the public diff: entries with drop > 5 points, deprecations, stability changes
    diff = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    #: not stored: set by selectors.cycles (public results by outcome; runs total/done/failed)
    outcome_counts: dict[str, int]
    progress: dict[str, int]

    class Meta:
        ordering = ["-quarter"]

    def __str__(self) -> str:
        return self.quarter

    def get_absolute_url(self) -> str:
        return reverse("leaderboard:reevaluation", args=[self.quarter])

    def holdout_for(self, task_id: str, base_model_id: str | None) -> dict | None:
        """The holdout a probe on ``base_model_id`` is measured on for ``task_id`` this quarter:
        the task's holdout, or for an on-policy task that model's own (None where none was minted)."""
        return holdout_entry(self.holdouts, task_id, base_model_id)

    def holdout_files(self) -> list[dict]:
        """Every minted holdout file, one row each: {"task", "base_model" ("" unless on-policy),
        and the entry's fields}, by task then model."""
        return [
            {"task": task, "base_model": model, **entry}
            for task, model, entry in holdout_items(self.holdouts)
        ]


def holdout_entry(holdouts: dict, task_id: str, base_model_id: str | None) -> dict | None:
    """See :meth:`ReevaluationCycle.holdout_for` (``holdouts``: a cycle's ``holdouts`` field)."""
    entry = (holdouts or {}).get(task_id)
    if not isinstance(entry, dict):
        return None
    if "by_model" in entry:
        found = entry["by_model"].get(base_model_id or "")
        return found if isinstance(found, dict) else None
    return entry


def holdouts_map(holdouts: dict, fn) -> dict:
    """A cycle's ``holdouts`` in the same shape with ``fn(entry)`` for each minted entry (what is
    published of it: no item ids)."""
    out: dict[str, dict] = {}
    for task, model, entry in holdout_items(holdouts):
        if model:
            out.setdefault(task, {"by_model": {}})["by_model"][model] = fn(entry)
        else:
            out[task] = fn(entry)
    return out


def holdout_items(holdouts: dict) -> list[tuple[str, str, dict]]:
    """(task, base model or "", entry) for every minted holdout file of a cycle's ``holdouts``."""
    items = []
    for task, entry in sorted((holdouts or {}).items()):
        if not isinstance(entry, dict):
            continue
        if "by_model" in entry:
            items += [(task, model, e) for model, e in sorted(entry["by_model"].items())]
        else:
            items.append((task, "", entry))
    return items


class CycleResult(models.Model):
    """One probe version's outcome in one cycle: the history over quarters."""

    class Outcome(models.TextChoices):
        PENDING = "pending"
        HELD = "held"  # drop ≤ 5 points
        DROPPED = "dropped"  # 5 < drop ≤ 10: listed in the public diff
        DEPRECATED = "deprecated"  # drop > 10
        FAILED = "failed"

    cycle = models.ForeignKey(ReevaluationCycle, on_delete=models.PROTECT, related_name="results")
    probe_version = models.ForeignKey(ProbeVersion, on_delete=models.PROTECT, related_name="cycle_results")
    reference_auroc = models.FloatField(null=True)
    holdout_auroc = models.FloatField(null=True)
    test_auroc = models.FloatField(null=True)
    drop_points = models.FloatField(null=True)
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.PENDING)

    class Meta:
        ordering = ["cycle", "probe_version"]
        constraints = [
            models.UniqueConstraint(fields=["cycle", "probe_version"], name="uniq_result_per_cycle")
        ]

    def __str__(self) -> str:
        return f"{self.cycle.quarter} {self.probe_version}: {self.outcome}"


class EvaluationRun(models.Model):
    """One probe version × one task × one split × one base model."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    class Kind(models.TextChoices):
        SCORE = "score"  # the probe's own artifact on its base model
        TRANSFER = "transfer"  # the recipe re-fit on another base model (rho_ce)
        REFERENCE = "reference"  # the eval-awareness reference probe on this probe's test items
        HOLDOUT = "holdout"  # quarterly re-evaluation on a minted holdout
        REPRODUCE = "reproduce"  # the recipe re-run on the train split, compared with the artifact
        STEER = "steer"  # direction utility (evaluator.axes.steer): the probe's direction steering the model
        STRESS = "stress"  # the probe on the task's stress split (evaluator.axes.stress)
        ROBUSTNESS = "robustness"  # a soft-suffix attack against the frozen probe (evaluator.axes.attack)

    probe_version = models.ForeignKey(ProbeVersion, on_delete=models.PROTECT, related_name="runs")
    submission = models.ForeignKey(
        Submission, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    cycle = models.ForeignKey(
        ReevaluationCycle, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.SCORE)
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="runs")
    split = models.CharField(max_length=20)
    base_model = models.ForeignKey(BaseModel, on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)
    step = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=20, blank=True, help_text="artifact | infrastructure")
    worker_host = models.CharField(max_length=200, blank=True)
    code_version = models.CharField(max_length=40, blank=True)
    #: the measurement protocol (registry/protocols/<id>.yaml) the run was measured under
    protocol = models.CharField(max_length=20, blank=True)
    #: evaluator.core.environment.environment_capture(): device, CPU/GPU, dtype, versions, threads
    environment = models.JSONField(default=dict, blank=True)
    split_sha256 = models.CharField(max_length=64, blank=True, help_text="verified before the run")
    cache_key = models.CharField(max_length=64, blank=True)
    timings = models.JSONField(default=dict, blank=True)
    #: [{"id", "label", "score", "prob"}, ...]: any metric can be recomputed from these
    example_scores = models.JSONField(default=list, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["queued_at", "pk"]
        constraints = [
            # one run per (version, purpose, task, split, model), outside cycles and per cycle:
            # a message delivered twice can never create a second run
            models.UniqueConstraint(
                fields=["probe_version", "kind", "task", "split", "base_model"],
                condition=models.Q(cycle__isnull=True),
                name="uniq_run_outside_cycles",
            ),
            models.UniqueConstraint(
                fields=["probe_version", "kind", "task", "split", "base_model", "cycle"],
                condition=models.Q(cycle__isnull=False),
                name="uniq_run_per_cycle",
            ),
        ]
        indexes = [
            # the reconciler: running runs by heartbeat age, queued runs by age
            models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat"),
            models.Index(fields=["status", "queued_at"], name="run_status_queued"),
            # a submission's progress page
            models.Index(fields=["submission", "status"], name="run_by_submission"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk}: {self.probe_version} {self.kind} {self.task_id}/{self.split} on {self.base_model_id}"


def score_ranking_key():
    """Norm 2 as an SQL expression (``evaluator.metrics.scoring.ranking_key``): the total without the
    license contribution, rounded to 12 decimals as there, so float noise counts as a tie. The
    board ranks on it in the database; the ``score_board_key`` index holds it in that order."""
    from django.db.models import F, FloatField
    from django.db.models.fields.json import KeyTextTransform, KeyTransform
    from django.db.models.functions import Cast, Round

    contribution = Cast(KeyTextTransform("contribution", KeyTransform("license", "components")), FloatField())
    return Round(F("total") - contribution, 12)


class Score(models.Model):
    """The ProbeScore of one probe version under one weights spec version."""

    probe_version = models.ForeignKey(ProbeVersion, on_delete=models.CASCADE, related_name="scores")
    spec = models.ForeignKey(WeightsSpec, on_delete=models.PROTECT, related_name="scores")
    total = models.FloatField()
    measured_total = models.FloatField(null=True)
    #: component → {"value", "weight", "contribution", "imputed", "raw", "note"}
    components = models.JSONField()
    #: aggregate measurements the components were computed from (auroc, ece, latency_ms, ...)
    measurements = models.JSONField(default=dict)
    #: task slug → {"auroc", "auroc_ci", "auroc_ea", "auroc_ds", "ece", "brier", ...}
    per_task = models.JSONField(default=dict)
    #: the measurement protocol of the runs the score was computed from ("" before protocols)
    protocol = models.CharField(max_length=20, blank=True)
    #: the environment of the probe's score runs (evaluator.core.environment), as recorded on them
    environment = models.JSONField(default=dict, blank=True)
    computed_at = models.DateTimeField(default=timezone.now)

    objects = ScoreQuerySet.as_manager()

    class Meta:
        ordering = ["-total"]
        constraints = [models.UniqueConstraint(fields=["probe_version", "spec"], name="uniq_score_per_spec")]
        indexes = [
            # the board: all scores under one spec, best first
            models.Index(fields=["spec", "-total"], name="score_spec_total"),
            # the board ranked in the database (selectors.board): one spec's scores in norm-2
            # order, so a page is read from the top of the index, not sorted from every row
            models.Index(F("spec"), score_ranking_key().desc(), F("total").desc(), name="score_board_key"),
        ]

    def __str__(self) -> str:
        return f"{self.probe_version} {self.spec_id}: {self.total:.4f}"


class RankInterval(models.Model):
    """A board entry's bootstrap ProbeScore interval, 95% rank interval and tie group
    (evaluator.metrics.rank_intervals) among the active entries of its category under the Score's spec.
    Recomputed for the whole board whenever a Score on it changes; never computed per request."""

    score = models.OneToOneField(Score, on_delete=models.CASCADE, related_name="rank_interval")
    score_lo = models.FloatField()
    score_hi = models.FloatField()
    rank = models.PositiveIntegerField(help_text="board rank of the point estimate")
    rank_lo = models.PositiveIntegerField()
    rank_hi = models.PositiveIntegerField()
    tied_for_first = models.BooleanField(default=False)
    tie_group = models.PositiveIntegerField(help_text="1, 2, ... in board order")
    borda_rank = models.PositiveIntegerField(
        null=True, blank=True, help_text="rank by the mean share of entries beaten per task (evaluator.ranks)"
    )
    borda_score = models.FloatField(null=True, blank=True)
    rank_delta = models.IntegerField(
        null=True, blank=True, help_text="rank on the latest quarterly holdout minus rank on test"
    )
    rank_delta_quarter = models.CharField(max_length=10, blank=True)
    n_entries = models.PositiveIntegerField(help_text="active entries on the board it was computed for")
    n_resamples = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    computed_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.score}: rank {self.rank} [{self.rank_lo}, {self.rank_hi}], group {self.tie_group}"


# --------------------------------------------------------------------------- leakage


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


class ReferenceUpdate(models.Model):
    """A new version of a base model's eval-awareness reference probe, and the public diff of
    every auroc_ea and ProbeScore it changed (recomputed from stored per-example scores)."""

    class Status(models.TextChoices):
        RUNNING = "running"  # the new reference is scoring the dependents' test items
        COMPLETED = "completed"
        FAILED = "failed"

    base_model = models.ForeignKey(BaseModel, on_delete=models.PROTECT, related_name="reference_updates")
    old_version = models.ForeignKey(
        ProbeVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    new_version = models.ForeignKey(ProbeVersion, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    #: [{"probe", "version", "task", "auroc_ea_before", "auroc_ea_after", "total_before", "total_after"}]
    diff = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["new_version"], name="uniq_update_per_version")]

    def __str__(self) -> str:
        return f"eval-awareness reference update on {self.base_model_id} → {self.new_version}"


class SystemAccount(models.Model):
    """Marks the one user the reference probes are installed under (``leaderboard.accounts``).
    Only ``services.accounts.system_account_get_or_create`` writes this row, together with the
    user it creates: inactive, with an unusable password, refused by the login backend and by the
    token service. The current eval-awareness reference is only ever a probe this user owns."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="system_account"
    )
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"system account {self.user}"


def is_system_account(user) -> bool:
    """True for the system account (one indexed lookup; False for anonymous users)."""
    return bool(getattr(user, "pk", None)) and SystemAccount.objects.filter(user_id=user.pk).exists()


class ApiToken(models.Model):
    """A user's API key, stored as its SHA-256 only: the key is shown once, when it is made
    (``leaderboard.services.tokens.api_token_create``), and a stolen database does not let anyone in.
    ``prefix`` (the key's first characters) lets its owner recognise it on the account page."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token")
    prefix = models.CharField(max_length=8)
    #: sha256(key), hex: every token-authenticated request looks it up (the unique index)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"API token {self.prefix}… of {self.user}"
