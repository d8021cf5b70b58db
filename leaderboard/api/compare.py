"""``GET /api/v1/compare?a=SLUG&b=SLUG[&spec=VERSION]``: two probes compared per task on the rows
they share (leaderboard.selectors.compare). Public, cached, ETag, like the other read endpoints."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from leaderboard.api.read.base import PublicReadApi
from leaderboard.http import public_cache
from leaderboard.inputs import CompareQueryInput, query_parse
from leaderboard.selectors.compare import compare_rows, probes_compare


class RankIntervalOutput(serializers.Serializer):
    rank = serializers.IntegerField(help_text="board rank of the point estimate")
    rank_ci = serializers.SerializerMethodField(help_text="95% rank interval [lo, hi]")
    score_ci = serializers.SerializerMethodField(help_text="95% bootstrap interval of the ProbeScore")
    tied_for_first = serializers.BooleanField()
    tie_group = serializers.IntegerField()
    n_entries = serializers.IntegerField()

    def get_rank_ci(self, obj) -> list[int]:
        return [obj.rank_lo, obj.rank_hi]

    def get_score_ci(self, obj) -> list[float]:
        return [obj.score_lo, obj.score_hi]


class CompareSideOutput(serializers.Serializer):
    probe = serializers.CharField(source="probe.slug")
    name = serializers.CharField(source="probe.name")
    url = serializers.SerializerMethodField()
    version = serializers.IntegerField(source="version.number")
    base_model = serializers.CharField(source="probe.base_model_id")
    total = serializers.FloatField(source="score.total", allow_null=True, default=None)
    rank_interval = RankIntervalOutput(allow_null=True)
    measurements = serializers.SerializerMethodField()

    def get_url(self, side) -> str:
        return reverse("leaderboard:probe", args=[side.probe.slug])

    def get_measurements(self, side) -> dict:
        m = (side.score.measurements if side.score else None) or {}
        return {row.key: m.get(row.key) for row in compare_rows()}


class PairedOutput(serializers.Serializer):
    n_shared = serializers.IntegerField(help_text="test rows both probes were scored on")
    n_a = serializers.IntegerField()
    n_b = serializers.IntegerField()
    auroc_a = serializers.FloatField()
    auroc_b = serializers.FloatField()
    delta = serializers.FloatField(help_text="auroc_a − auroc_b on the shared rows")
    delta_ci = serializers.ListField(
        child=serializers.FloatField(), help_text="paired 95% bootstrap interval"
    )
    p_value = serializers.FloatField(help_text="DeLong's two-sided test for correlated ROC curves")


class TaskComparisonOutput(serializers.Serializer):
    task = serializers.CharField()
    paired = PairedOutput(allow_null=True, help_text="null when the task cannot be paired (see reason)")
    reason = serializers.CharField(help_text="why the task cannot be paired; empty when it is")
    metrics = serializers.SerializerMethodField(help_text="the other per-task metrics, side by side")

    def get_metrics(self, t) -> dict:
        rows = compare_rows(per_task=True)
        return {r.key: {"a": (t.a or {}).get(r.key), "b": (t.b or {}).get(r.key)} for r in rows}


class CompareOutput(serializers.Serializer):
    spec = serializers.CharField(source="spec.version")
    n_resamples = serializers.IntegerField()
    seed = serializers.IntegerField()
    a = CompareSideOutput()
    b = CompareSideOutput()
    tasks = TaskComparisonOutput(many=True)


@public_cache
class CompareApi(PublicReadApi):
    @extend_schema(
        operation_id="compare",
        summary="Two probes per task: ΔAUROC with its paired interval and DeLong's p on shared rows",
        parameters=[
            OpenApiParameter("a", str, required=True, allow_blank=False, description="probe id (slug) of A"),
            OpenApiParameter(
                "b", str, required=True, allow_blank=False, description="probe id (slug) of B, not A's"
            ),
            OpenApiParameter("spec", str, description="weights spec version (default: the latest)"),
        ],
        responses={200: CompareOutput, 404: OpenApiResponse(description="a or b names no public probe")},
    )
    def get(self, request):
        params = query_parse(CompareQueryInput, request.query_params)
        comparison = probes_compare(a=params.get("a"), b=params.get("b"), spec=params.get("spec"))
        return Response(CompareOutput(comparison).data)
