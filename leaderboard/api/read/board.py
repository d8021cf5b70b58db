"""``GET /api/v1/leaderboard``: the board, a page of rows under one weights spec.

A row's metric fields are the metric table's exported metrics (``evaluator.metrics.metric_table``):
each one's value (mean over tasks) and, where it has one, its 95% interval (``<name>_ci``), with
the help text written from its label and definition (``presentation.metric_help``)."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response

from evaluator.data.registry.weights import COMPONENTS
from evaluator.metrics import metric_table
from leaderboard.api.pagination import ApiPagination
from leaderboard.api.read.base import PublicReadApi
from leaderboard.http import public_cache
from leaderboard.inputs import board_query
from leaderboard.presentation import metric_help, metric_interval_help
from leaderboard.selectors.board.get import board_get
from leaderboard.selectors.board.query import BOARD_STATUSES
from leaderboard.selectors.board.rows import Board, board_details_attach
from leaderboard.selectors.board.sorting import sort_keys


def request_board(request) -> Board:
    """The board a request's query string asks for (errors: the exception handler's 400)."""
    return board_get(query=board_query(request.query_params))


BOARD_PARAMETERS = [
    OpenApiParameter("category", str, description="category slug, e.g. hallucination (default: all)"),
    OpenApiParameter("spec", str, description="weights spec version, e.g. v0.0.1 (default: the latest)"),
    OpenApiParameter("compare", str, description="a second spec version: each row gets its rank there"),
    OpenApiParameter("model", str, description="base model slug"),
    OpenApiParameter("license", str, description="license id, e.g. Apache-2.0"),
    # an empty value is the default, as a form with nothing chosen sends it
    OpenApiParameter("status", str, enum=["", *BOARD_STATUSES], description="probe status (default: any)"),
    OpenApiParameter("measured_only", bool, description="rank by the measured components only"),
    OpenApiParameter("q", str, description="search in probe name, id and authors"),
    OpenApiParameter("sort", str, enum=["", *sort_keys()], description="sort column (default: score)"),
    OpenApiParameter(
        "dir", str, enum=["", "asc", "desc"], description="sort direction (default: the column's own)"
    ),
]


# --------------------------------------------------------------------------- serializers


class ComponentOutput(serializers.Serializer):
    value = serializers.FloatField(help_text="the component in [0, 1] that the weight multiplies")
    weight = serializers.FloatField()
    contribution = serializers.FloatField(help_text="value × weight")
    imputed = serializers.BooleanField(help_text="not measured: imputed conservatively (norm 3)")
    raw = serializers.FloatField(allow_null=True, default=None, help_text="what was measured")
    note = serializers.CharField(allow_blank=True, default="")


ComponentsOutput = type(
    "ComponentsOutput",
    (serializers.Serializer,),
    {name: ComponentOutput(default=None, allow_null=True) for name in COMPONENTS},
)
_COMPONENT_KEYS = ("value", "weight", "contribution", "imputed", "raw", "note")


@extend_schema_field(ComponentsOutput)
class ComponentsField(serializers.Field):
    """The components as stored, in the shape of ComponentsOutput (a plain field: the board
    serializes hundreds of rows, and nested serializers cost more than the rest of the request)."""

    def to_representation(self, value):
        return {
            name: {k: (value[name].get(k, "" if k == "note" else None)) for k in _COMPONENT_KEYS}
            if value.get(name)
            else None
            for name in COMPONENTS
        }


class BadgesOutput(serializers.Serializer):
    reproduced = serializers.BooleanField(allow_null=True, help_text="null: no recipe to rerun")
    stability_quarters = serializers.IntegerField(help_text="consecutive quarterly cycles held")
    stable = serializers.BooleanField()
    deprecated = serializers.BooleanField()
    deprecated_reason = serializers.CharField(allow_blank=True)
    leakage = serializers.BooleanField(help_text="a confirmed leakage record exists")
    declared_gaps = serializers.DictField(
        source="declared_mismatch",
        child=serializers.DictField(),
        help_text="metric → {declared, measured, gap}: declared metrics whose gap to the measured one is flagged",
    )
    reference = serializers.BooleanField(source="is_reference", help_text="a maintainers' reference probe")


class BoardRankIntervalOutput(serializers.Serializer):
    rank_ci = serializers.SerializerMethodField(help_text="95% rank interval [lo, hi]")
    score_ci = serializers.SerializerMethodField(help_text="95% bootstrap interval of the ProbeScore")
    tied_for_first = serializers.BooleanField(
        help_text="its rank interval includes 1, as another entry's does"
    )
    tie_group = serializers.IntegerField(
        help_text="adjacent entries the data cannot tell apart share a group"
    )
    n_entries = serializers.IntegerField(help_text="active entries of the board it was computed on")

    def get_rank_ci(self, obj) -> list[int]:
        return [obj["rank_lo"], obj["rank_hi"]]

    def get_score_ci(self, obj) -> list[float]:
        return [obj["score_lo"], obj["score_hi"]]


def metric_fields() -> dict[str, serializers.Field]:
    """A board row's field for each exported metric of the metric table, in table order: its value
    (``BoardRow.metrics``) and, where it has one, its interval (``<name>_ci``), with help text from
    its label and definition."""
    fields: dict[str, serializers.Field] = {}
    for m in metric_table.metrics():
        if not m.exported:
            continue
        fields[m.name] = serializers.FloatField(
            source=f"metrics.{m.name}", allow_null=True, help_text=metric_help(m)
        )
        if m.interval:
            fields[f"{m.name}_ci"] = serializers.ListField(
                child=serializers.FloatField(),
                source=f"metric_cis.{m.name}",
                allow_null=True,
                help_text=metric_interval_help(m),
            )
    return fields


class LeaderboardRowOutput(serializers.Serializer):
    rank = serializers.IntegerField(allow_null=True, help_text="null for deprecated entries")
    rank_interval = BoardRankIntervalOutput(
        allow_null=True,
        help_text="paired bootstrap over the test rows (methodology#uncertainty); null when not computed"
        " for this board view (a filtered or measured-only view, or scores changed a moment ago)",
    )
    probe = serializers.CharField(help_text="probe id (slug)")
    name = serializers.CharField()
    url = serializers.SerializerMethodField()
    category = serializers.CharField()
    base_model = serializers.CharField()
    version = serializers.IntegerField()
    license = serializers.CharField()
    authors = serializers.ListField(child=serializers.CharField())
    total = serializers.FloatField(help_text="ProbeScore under the spec")
    measured_total = serializers.FloatField(allow_null=True, help_text="weighted mean of measured components")
    auroc_ci = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        min_length=2,
        max_length=2,
        help_text="95% interval on AUROC",
    )
    auroc_ci_kind = serializers.CharField(
        help_text="bootstrap | per-task (one task) | mean-of-tasks (mean of the per-task bounds)"
    )
    components = ComponentsField()
    borda_rank = serializers.IntegerField(
        allow_null=True,
        help_text="rank in its category by the mean share of other entries it beats on each task's test"
        " AUROC (the full category board's, whatever the view); null until computed",
    )
    rank_delta = serializers.IntegerField(
        allow_null=True,
        help_text="rank on the latest quarterly holdout minus rank on test among the entries that cycle"
        " measured (positive: it fell behind on fresh rows); null when not measured",
    )
    rank_delta_quarter = serializers.CharField(allow_blank=True, help_text="the cycle rank_delta is from")
    badges = BadgesOutput(source="*")
    compare_rank = serializers.IntegerField(allow_null=True)
    compare_total = serializers.FloatField(allow_null=True)
    rank_change = serializers.IntegerField(
        allow_null=True, help_text="places gained against the compared spec"
    )
    computed_at = serializers.DateTimeField()

    def get_fields(self) -> dict[str, serializers.Field]:
        """The declared fields, with the metric table's exported metrics after ``components``."""
        fields = {}
        for name, declared in super().get_fields().items():
            fields[name] = declared
            if name == "components":
                fields |= metric_fields()
        return fields

    def get_url(self, row) -> str:
        return reverse("leaderboard:probe", args=[row.probe])


class LeaderboardOutput(serializers.Serializer):
    spec = serializers.CharField()
    compare = serializers.CharField(allow_null=True)
    category = serializers.CharField(allow_null=True)
    measured_only = serializers.BooleanField()
    sort = serializers.CharField()
    dir = serializers.CharField()
    weights = serializers.DictField(child=serializers.FloatField())
    metric_versions = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="each metric's definition version (the methodology's metric table): a number is"
        " comparable only with numbers of the same version",
    )
    count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    results = LeaderboardRowOutput(many=True)


def board_meta(board: Board) -> dict:
    q = board.query
    return {
        "spec": board.spec.version,
        "compare": board.compare.version if board.compare else None,
        "category": q.category,
        "measured_only": q.measured_only,
        "sort": q.sort,
        "dir": "desc" if q.descending else "asc",
        "weights": board.spec.weights,
        "metric_versions": {m.name: m.version for m in metric_table.metrics()},
    }


@public_cache
class LeaderboardApi(PublicReadApi):
    @extend_schema(
        operation_id="leaderboard",
        summary="The board: latest scored version of each probe under one weights spec",
        parameters=[
            *BOARD_PARAMETERS,
            *ApiPagination.schema_parameters(),
        ],
        responses=LeaderboardOutput,
    )
    def get(self, request):
        board = request_board(request)
        paginator = ApiPagination()
        page = paginator.paginate_queryset(board.rows, request, view=self)
        assert page is not None  # ApiPagination has a default limit: it always pages
        board_details_attach(page)
        data = board_meta(board) | {
            "count": paginator.count,
            "next": paginator.get_next_link(),
            "previous": paginator.get_previous_link(),
            "results": LeaderboardRowOutput(page, many=True).data,
        }
        return Response(data)
