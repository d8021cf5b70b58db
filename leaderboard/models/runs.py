"""Evaluation runs and the quarterly re-evaluation cycles (with their minted holdouts and results)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from leaderboard.models.catalog import BaseModel, Task
from leaderboard.models.probes import ProbeVersion, Submission


class ReevaluationCycle(models.Model):
    """A quarterly re-evaluation."""

    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    quarter = models.CharField(max_length=6, unique=True, help_text="e.g. 2026Q4")
    triggered_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    #: task slug → {"path", "rows", "sha256", "ids", "pool", "pool_sha256", ...}: the holdout drawn
    #: for this quarter; an on-policy task's entry is {"by_model": {base model id → that entry}},
    #: one holdout per base model drawn from that model's pool (read them with ``holdout_for`` /
    #: ``holdout_files``). Private while the cycle runs: what is shown of it is ``public_holdouts``
    holdouts = models.JSONField(default=dict)
    #: the secret the holdouts were drawn with (64 hex digits); shown only once the cycle has
    #: completed (``leaderboard.selectors.cycles.reevaluation_reveal``)
    seed = models.CharField(max_length=64, blank=True, default="")
    #: published before any run: the seed's SHA-256 and each holdout's and pool's SHA-256
    #: (``leaderboard.services.holdouts.commitment_build``)
    commitment = models.JSONField(default=dict, blank=True)
    #: when the seed and the holdouts' rows became public (the cycle's completion)
    revealed_at = models.DateTimeField(null=True, blank=True)
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
        """Every drawn holdout, one row each: {"task", "base_model" ("" unless on-policy), and the
        entry's public fields (``holdout_public``)}, by task then model."""
        return [
            {"task": task, "base_model": model, **holdout_public(entry)}
            for task, model, entry in holdout_items(self.holdouts)
        ]

    def public_holdouts(self) -> dict:
        """The holdouts as the pages and the API show them: no row, id or file path."""
        return holdouts_map(self.holdouts, holdout_public)

    @property
    def is_revealed(self) -> bool:
        """The cycle has completed and its seed and holdout rows are public."""
        return self.status == self.Status.COMPLETED and bool(self.seed) and self.revealed_at is not None


#: what is shown of a holdout while its cycle runs: its size, its SHA-256 and its pool's (the
#: commitment), never its rows, their ids or its file
PUBLIC_HOLDOUT_FIELDS = (
    "rows",
    "sha256",
    "pool",
    "pool_sha256",
    "pool_rows",
    "sealed_pool_rows",
    "reused_rows",
    "note",
)


def holdout_public(entry: dict) -> dict:
    return {k: entry[k] for k in PUBLIC_HOLDOUT_FIELDS if k in entry}


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
        """Names for the run kinds the code refers to. The kinds are the axes of leaderboard.axes
        (``AXES``): the field takes any declared one, checked in code (the planner, the admin), so
        a new axis needs no migration and no constant here."""

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
    #: the run's axis (leaderboard.axes): no ``choices``, so a new axis needs no migration
    kind = models.CharField(max_length=20, default=Kind.SCORE)
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
