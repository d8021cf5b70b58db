"""``GET /api/v1/probes/<slug>``: one probe's public version, its scores, per-task results, history
and leakage records."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from evaluator.metrics import metric_table
from evaluator.metrics.breakdown import MEASURED, MIN_ROWS_PER_CLASS, TOO_FEW_ROWS
from leaderboard.api.read.base import SLUG_PATTERN, PublicReadApi
from leaderboard.api.read.board import ComponentsOutput
from leaderboard.api.read.records import CycleResultOutput, LeakageOutput
from leaderboard.http import public_cache
from leaderboard.inputs import MAX_VERSION, ProbeQueryInput, query_parse
from leaderboard.presentation import metric_help
from leaderboard.selectors.probes import probe_detail


def _task_metric(name: str) -> serializers.FloatField:
    """One task's value of a metric of the metric table, with its help text from the row."""
    return serializers.FloatField(
        source=f"result.{name}", allow_null=True, help_text=metric_help(metric_table.metric(name), task=True)
    )


class GroupResultOutput(serializers.Serializer):
    """One group of a task's breakdown by domain or source (evaluator.metrics.breakdown)."""

    group = serializers.CharField(
        help_text="the domain or source the test split's rows name (data, not a fixed list)"
    )
    n_pos = serializers.IntegerField(help_text="its test rows with the behaviour (label 1)")
    n_neg = serializers.IntegerField(help_text="its test rows without it (label 0)")
    status = serializers.ChoiceField(
        choices=[MEASURED, TOO_FEW_ROWS],
        help_text=f"measured, or too_few_rows: fewer than {MIN_ROWS_PER_CLASS} rows of either class (no numbers)",
    )
    auroc = serializers.FloatField(allow_null=True, help_text="AUROC on the group's test rows")
    auroc_ci = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="its 95% bootstrap interval [low, high]"
    )
    recall_at_1pct_fpr = serializers.FloatField(
        allow_null=True,
        help_text="recall of the group's positives at the task's operating point (the threshold fixed on"
        " the train split's negatives at 1% FPR); null without a train run",
    )
    recall_at_1pct_fpr_ci = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="its Wilson 95% interval [low, high]"
    )


class TaskResultOutput(serializers.Serializer):
    task = serializers.CharField()
    task_name = serializers.CharField()
    auroc = _task_metric("auroc")
    auroc_ci = serializers.ListField(
        child=serializers.FloatField(), source="result.auroc_ci", allow_null=True
    )
    auroc_ea = _task_metric("auroc_ea")
    auroc_ea_imputed = serializers.BooleanField(source="result.auroc_ea_imputed")
    auroc_ea_na = serializers.BooleanField(source="result.auroc_ea_na", help_text="eval_awareness probes")
    auroc_ds = _task_metric("auroc_ds")
    auroc_ds_imputed = serializers.BooleanField(source="result.auroc_ds_imputed")
    ece = _task_metric("ece")
    brier = _task_metric("brier")
    recall_at_1pct_fpr = _task_metric("recall_at_1pct_fpr")
    lift_over_text = _task_metric("lift_over_text")
    lift_over_text_ci = serializers.ListField(
        child=serializers.FloatField(),
        source="result.lift_over_text_ci",
        allow_null=True,
        help_text="DeLong's paired 95% interval of the lift",
    )
    text_baseline = serializers.CharField(
        source="result.text_baseline", allow_null=True, help_text="the panel member the lift is over"
    )
    controlled_auroc = _task_metric("controlled_auroc")
    controlled_auroc_ci = serializers.ListField(
        child=serializers.FloatField(), source="result.controlled_auroc_ci", allow_null=True
    )
    text_baseline_auroc = serializers.FloatField(source="result.text_baseline_auroc", allow_null=True)
    n_test = serializers.IntegerField(source="result.n_test", allow_null=True)
    in_domain = serializers.BooleanField(
        source="result.in_domain",
        allow_null=True,
        help_text="one of the tasks the probe was trained on (its recipe's task, or its declared"
        " trained_on): in distribution; false: frozen and out of domain; null: the probe declares no"
        " training task, or scored before the split (the score's measurements hold the in-domain and"
        " cross-domain means)",
    )
    baselines = serializers.DictField(
        child=serializers.FloatField(),
        source="result.baselines",
        help_text="AUROC: random_direction, diff_of_means",
    )
    lift = serializers.DictField(child=serializers.FloatField(), source="result.lift")
    roc = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField()),
        source="result.roc",
        help_text="[[fpr, tpr], ...]",
    )
    reliability = serializers.ListField(child=serializers.DictField(), source="result.reliability")
    by_domain = GroupResultOutput(
        many=True,
        source="result.by_domain",
        help_text="the test results by the rows' domain, groups in sorted order (empty: the split names"
        " none, or scored before the breakdown)",
    )
    by_source = GroupResultOutput(
        many=True,
        source="result.by_source",
        help_text="the test results by the rows' source (the dataset they come from), likewise",
    )


class VersionOutput(serializers.Serializer):
    number = serializers.IntegerField()
    artifact_sha256 = serializers.CharField()
    artifact_bytes = serializers.IntegerField()
    artifact_url = serializers.SerializerMethodField()
    kind = serializers.CharField()
    layer = serializers.IntegerField()
    position = serializers.CharField()
    input = serializers.CharField()
    output = serializers.CharField()
    license = serializers.CharField(source="license_id")
    authors = serializers.ListField(child=serializers.CharField())
    paper_url = serializers.CharField()
    description = serializers.CharField()
    training_data = serializers.DictField()
    declared_metrics = serializers.DictField()
    declared_gaps = serializers.DictField()
    recipe = serializers.DictField(allow_null=True)
    reproduction = serializers.DictField(allow_null=True)
    reproduced = serializers.BooleanField(allow_null=True)
    reference_auroc = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()

    def get_artifact_url(self, version) -> str:
        return reverse("leaderboard:artifact", args=[version.probe.slug, version.number])


class ScoreSummaryOutput(serializers.Serializer):
    spec = serializers.CharField(source="spec_id")
    total = serializers.FloatField()
    measured_total = serializers.FloatField(allow_null=True)
    computed_at = serializers.DateTimeField()


class ScoreOutput(ScoreSummaryOutput):
    components = ComponentsOutput()
    measurements = serializers.DictField()
    protocol = serializers.CharField(
        help_text="the measurement protocol of its runs (registry/protocols/<id>.yaml); empty before protocols"
    )


class ProbeOutput(serializers.Serializer):
    slug = serializers.CharField(source="probe.slug")
    name = serializers.CharField(source="probe.name")
    category = serializers.CharField(source="probe.category_id")
    base_model = serializers.CharField(source="probe.base_model_id")
    reference = serializers.BooleanField(source="probe.is_reference")
    status = serializers.CharField(source="probe.status")
    deprecated_reason = serializers.CharField(source="probe.deprecated_reason")
    stability_quarters = serializers.IntegerField(source="probe.stability_quarters")
    stable = serializers.BooleanField()
    spec = serializers.CharField(source="spec.version")
    version = VersionOutput()
    versions = serializers.ListField(child=serializers.IntegerField(), source="version_numbers")
    score = ScoreOutput(allow_null=True)
    scores = ScoreSummaryOutput(many=True, help_text="this version's total under every spec")
    tasks = TaskResultOutput(many=True, source="results")
    transfer = serializers.ListField(child=serializers.DictField(), help_text="[{model, name, pearson}]")
    declared = serializers.ListField(child=serializers.DictField(), help_text="declared vs measured metrics")
    leakage = LeakageOutput(many=True)
    history = CycleResultOutput(many=True)
    ea_reference = inline_serializer(
        "EaReference",
        fields={
            "probe": serializers.CharField(),
            "version": serializers.IntegerField(),
            "artifact_sha256": serializers.CharField(),
        },
        allow_null=True,
        help_text="the eval-awareness reference probe auroc_ea is measured against (null: none, or"
        " an eval-awareness probe); `python -m evaluator reproduce` downloads it",
    )
    not_applicable = serializers.DictField(
        child=serializers.CharField(),
        help_text="task → why this probe cannot read it (its input's template, its base model's"
        " files for an on-policy task): such tasks are never planned and not in the score",
    )
    pending_axes = serializers.SerializerMethodField(
        help_text="the axes still being measured: [{axis, done, total, label}] (empty: none)"
    )
    replications = serializers.DictField(
        source="receipts",
        help_text="replicated elsewhere: {count, agree, differ, receipts: [{replicator_fingerprint,"
        " replicator_public_key, submitter, verdict, runs_compared, max_abs_diff, created_at, bundle,"
        " receipt, signature}]}; each receipt verifies offline: Ed25519 over its canonical JSON",
    )
    published_by = inline_serializer(
        "PublishedBy",
        fields={
            "bundle": serializers.CharField(help_text="the bundle's id (SHA-256 of its manifest)"),
            "board": serializers.CharField(),
            "signer_fingerprint": serializers.CharField(),
            "created_at": serializers.DateTimeField(),
            "commit": serializers.CharField(),
            "replication": serializers.CharField(
                help_text="not started | replicating | replicated | differs"
            ),
            "replicated_here": serializers.BooleanField(),
            "runs_published": serializers.IntegerField(allow_null=True),
            "runs_compared": serializers.IntegerField(),
            "max_abs_diff": serializers.FloatField(
                allow_null=True, help_text="largest per-example |Δs| compared"
            ),
            "max_abs_diff_text": serializers.CharField(),
            "differs": serializers.ListField(child=serializers.DictField(), help_text="[{run, why}]"),
            "not_compared": serializers.ListField(
                child=serializers.CharField(), help_text="runs with no per-example scores"
            ),
        },
        allow_null=True,
        help_text="null: measured on this board; else the signed bundle this version was imported from"
        " (its numbers recomputed here from the published per-example scores)",
    )

    sae = inline_serializer(
        "SaeBaselines",
        fields={
            "sae_id": serializers.CharField(allow_null=True, help_text="the registered SAE it reads"),
            "k": serializers.IntegerField(allow_null=True, help_text="latents read"),
            "train_task": serializers.CharField(allow_null=True, help_text="where all three were fit"),
            "neurons": serializers.DictField(
                allow_null=True, help_text="the same-k neuron probe: {indices, C, cv_auroc}"
            ),
            "dense": serializers.DictField(allow_null=True, help_text="the dense probe: {C, cv_auroc}"),
            "tasks": serializers.ListField(
                child=serializers.DictField(),
                help_text="per task on the same test rows: {task_id, in_domain, n, sae_auroc, sae_ci,"
                " neurons_auroc, neurons_ci, dense_auroc, dense_ci, sae_minus_neurons,"
                " sae_minus_neurons_ci, sae_minus_dense, sae_minus_dense_ci}",
            ),
            "features": serializers.ListField(
                child=serializers.DictField(),
                help_text="per latent read: {latent, weight, frequency, mean_when_active, max, top:"
                " [{value, text_before, token, text_after, document, position}]}",
            ),
            "note": serializers.CharField(help_text="while no task is measured: pending, failed or why not"),
        },
        allow_null=True,
        help_text="null unless an sae_features probe: beside it, the same-k neuron probe and the dense"
        " probe fit on its training task and scored on the same rows, and its feature cards",
    )

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_pending_axes(self, detail) -> list[dict]:
        return [a.to_dict() for a in detail.pending_axes]


@public_cache
class ProbeDetailApi(PublicReadApi):
    @extend_schema(
        operation_id="probe",
        summary="One probe: its public version, scores, per-task results, history and leakage records",
        parameters=[
            OpenApiParameter(
                "slug", str, OpenApiParameter.PATH, pattern=SLUG_PATTERN, description="the probe's id"
            ),
            OpenApiParameter("spec", str, description="weights spec version (default: the latest)"),
            OpenApiParameter(
                "version",
                {"type": "integer", "minimum": 1, "maximum": MAX_VERSION},
                description="a public version number (default: the latest)",
            ),
        ],
        responses={200: ProbeOutput, 404: OpenApiResponse(description="no such public probe")},
    )
    def get(self, request, slug):
        params = query_parse(ProbeQueryInput, request.query_params)
        detail = probe_detail(
            slug=slug, spec=params.get("spec"), version=params.get("version"), ea_reference=True
        )
        if detail is None:
            raise NotFound(f"no public probe {slug!r}")
        return Response(ProbeOutput(detail).data)
