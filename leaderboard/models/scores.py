"""Scores, their rank intervals, the board's entries and ranking, and reference-probe updates.

"The board's entries" (``Score.objects.on_board``) and the order every board is ranked in
(``board_rank_order``) are defined here and nowhere else; selectors and services read them through
``Score.objects``."""

from __future__ import annotations

from django.db import models
from django.db.models import BooleanField, Exists, ExpressionWrapper, F, OuterRef, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from leaderboard.models.catalog import BaseModel, WeightsSpec
from leaderboard.models.probes import Probe, ProbeVersion, public_q


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
