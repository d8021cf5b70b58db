"""The read API (``/api/v1/``): one view per endpoint, each with its OutputSerializer.

Reads go through leaderboard.selectors; serializers only shape what the selectors return. Public
reads carry ``Cache-Control: public, max-age=…`` and an ETag (a matching ``If-None-Match`` gets
304). The board's CSV and JSON exports are built from the same serializer as the API rows, so they
agree field for field.
"""

from __future__ import annotations

import csv
import io
import json

from django.http import HttpResponse
from django.urls import reverse
from django.urls.converters import SlugConverter
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluator.data.registry.weights import COMPONENTS
from evaluator.metrics import metric_table
from leaderboard.api.pagination import ApiPagination
from leaderboard.http import public_cache
from leaderboard.inputs import MAX_VERSION, ProbeQueryInput, TaskListInput, board_query, query_parse
from leaderboard.models import holdouts_map
from leaderboard.presentation import POLICY
from leaderboard.selectors.board import (
    BOARD_STATUSES,
    SORT_KEYS,
    Board,
    board_details_attach,
    board_get,
    weights_spec_list,
)
from leaderboard.selectors.cycles import (
    leakage_public_list,
    reevaluation_detail,
    reevaluation_list,
    reference_update_list,
)
from leaderboard.selectors.exports import examples_exports_list
from leaderboard.selectors.probes import probe_detail
from leaderboard.selectors.registry import base_model_list, category_list, task_list
from leaderboard.selectors.submissions import submission_queue

#: a probe id in a URL path (the ``slug`` converter of the URL conf, leaderboard/api/read_urls.py)
SLUG_PATTERN = f"^{SlugConverter.regex}$"


class PublicReadApi(APIView):
    """Base of the read endpoints: anonymous, GET only."""

    authentication_classes: list = []
    permission_classes: list = []
    http_method_names = ["get", "head", "options"]


def _board(request) -> Board:
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
    OpenApiParameter("sort", str, enum=["", *SORT_KEYS], description="sort column (default: score)"),
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
    recall_at_1pct_fpr = serializers.FloatField(
        source="recall",
        allow_null=True,
        help_text="recall at the 1%-FPR threshold fixed on the train split, on test; mean over tasks",
    )
    lift_over_text = serializers.FloatField(
        allow_null=True,
        help_text="probe test AUROC minus the strongest text-only baseline's on the same rows; mean over"
        " tasks",
    )
    lift_over_text_ci = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="95% interval of that mean (DeLong per task, tasks independent); one that includes 0"
        " means the probe is not shown to beat text",
    )
    controlled_auroc = serializers.FloatField(
        allow_null=True,
        help_text="AUROC the probe adds to the text controls (strongest text baseline, length), cross-fitted"
        " on test; mean over tasks",
    )
    controlled_auroc_ci = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="95% interval of that mean"
    )
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
    direction_utility = serializers.FloatField(
        allow_null=True,
        help_text="does the probe's direction steer the model's behavioural readout: mean over the judged"
        " tasks (readout valid against the labels) of the addition's (effect − random mean)/random sd at"
        " the strength chosen on train; null where not measured or no task is judged; not part of the"
        " ProbeScore",
    )
    stress_auroc = serializers.FloatField(
        allow_null=True,
        help_text="AUROC on the tasks' stress splits under the worst rewrite of form, mean over tasks; null"
        " where not measured; not part of the ProbeScore",
    )
    stress_recall = serializers.FloatField(
        allow_null=True,
        help_text="recall of the stress splits' positives at the clean 1%-FPR threshold under the worst"
        " rewrite, mean over tasks; null where not measured",
    )
    attack_recall = serializers.FloatField(
        allow_null=True,
        help_text="recall of the test positives under the protocol's soft-suffix attack at the clean 1%-FPR"
        " threshold, mean over tasks; null where not measured (the ratio to the clean recall is the goodhart"
        " component)",
    )
    goodhart_resistance = serializers.FloatField(
        allow_null=True,
        help_text="attack_recall ÷ the clean recall, clipped to [0, 1], mean over tasks: the measured value of the"
        " goodhart component (null where not measured: the component then shows the spec's default, flagged)",
    )
    transfer_attack_recall = serializers.FloatField(
        allow_null=True,
        help_text="recall of the test positives under the suffix made against the category's reference probe on"
        " the same base model (the transfer attack), mean over tasks; null where not measured",
    )
    badges = BadgesOutput(source="*")
    compare_rank = serializers.IntegerField(allow_null=True)
    compare_total = serializers.FloatField(allow_null=True)
    rank_change = serializers.IntegerField(
        allow_null=True, help_text="places gained against the compared spec"
    )
    computed_at = serializers.DateTimeField()

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


def _board_meta(board: Board) -> dict:
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


# --------------------------------------------------------------------------- board


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
        board = _board(request)
        paginator = ApiPagination()
        page = paginator.paginate_queryset(board.rows, request, view=self)
        assert page is not None  # ApiPagination has a default limit: it always pages
        board_details_attach(page)
        data = _board_meta(board) | {
            "count": paginator.count,
            "next": paginator.get_next_link(),
            "previous": paginator.get_previous_link(),
            "results": LeaderboardRowOutput(page, many=True).data,
        }
        return Response(data)


def export_columns() -> list[str]:
    cols = [
        "spec",
        "rank",
        "probe",
        "name",
        "category",
        "base_model",
        "version",
        "license",
        "authors",
        "total",
        "measured_total",
        "auroc_ci_lo",
        "auroc_ci_hi",
        "auroc_ci_kind",
        "score_ci_lo",
        "score_ci_hi",
        "rank_ci_lo",
        "rank_ci_hi",
        "tied_for_first",
        "tie_group",
        "borda_rank",
        "rank_delta",
        "rank_delta_quarter",
        *metric_table.exported_columns(),
    ]
    for name in COMPONENTS:
        cols += [f"{name}_value", f"{name}_weight", f"{name}_contribution", f"{name}_imputed", f"{name}_raw"]
    cols += [
        "reproduced",
        "stability_quarters",
        "deprecated",
        "deprecated_reason",
        "leakage",
        "declared_gaps",
        "reference",
        "compare_spec",
        "compare_rank",
        "compare_total",
        "rank_change",
        "computed_at",
        "url",
    ]
    return cols


#: A spreadsheet reads a cell starting with one of these as a formula (CSV injection): text cells
#: that do are exported with a leading single quote. Numbers are written as numbers.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return str(value)


def flatten_row(row: dict, *, spec: str, compare: str | None) -> dict:
    """One API row as one CSV record (the columns of :func:`export_columns`)."""
    ci = row["auroc_ci"] or [None, None]
    badges = row["badges"]
    flat = {
        "spec": spec,
        "rank": row["rank"],
        "probe": row["probe"],
        "name": row["name"],
        "category": row["category"],
        "base_model": row["base_model"],
        "version": row["version"],
        "license": row["license"],
        "authors": "; ".join(row["authors"]),
        "total": row["total"],
        "measured_total": row["measured_total"],
        "auroc_ci_lo": ci[0],
        "auroc_ci_hi": ci[1],
        "auroc_ci_kind": row["auroc_ci_kind"],
    }
    interval = row["rank_interval"] or {}
    score_ci, rank_ci = interval.get("score_ci") or [None, None], interval.get("rank_ci") or [None, None]
    flat |= {
        "score_ci_lo": score_ci[0],
        "score_ci_hi": score_ci[1],
        "rank_ci_lo": rank_ci[0],
        "rank_ci_hi": rank_ci[1],
        "tied_for_first": interval.get("tied_for_first"),
        "tie_group": interval.get("tie_group"),
        "borda_rank": row.get("borda_rank"),
        "rank_delta": row.get("rank_delta"),
        "rank_delta_quarter": row.get("rank_delta_quarter"),
        **metric_table.exported_values(row),
    }
    for name in COMPONENTS:
        comp = row["components"].get(name) or {}
        for key in ("value", "weight", "contribution", "imputed", "raw"):
            flat[f"{name}_{key}"] = comp.get(key)
    flat |= {
        "reproduced": badges["reproduced"],
        "stability_quarters": badges["stability_quarters"],
        "deprecated": badges["deprecated"],
        "deprecated_reason": badges["deprecated_reason"],
        "leakage": badges["leakage"],
        "declared_gaps": json.dumps(badges["declared_gaps"], sort_keys=True)
        if badges["declared_gaps"]
        else "",
        "reference": badges["reference"],
        "compare_spec": compare,
        "compare_rank": row["compare_rank"],
        "compare_total": row["compare_total"],
        "rank_change": row["rank_change"],
        "computed_at": row["computed_at"],
        "url": row["url"],
    }
    return {k: _cell(v) for k, v in flat.items()}


def _export_filename(board: Board, ext: str) -> str:
    scope = board.query.category or "all"
    return f"probebench-{scope}-{board.spec.version}.{ext}"


@public_cache
class LeaderboardCsvApi(PublicReadApi):
    @extend_schema(
        operation_id="leaderboard_csv",
        summary="The whole board as CSV (same rows and filters as /leaderboard, no pagination)",
        parameters=BOARD_PARAMETERS,
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="one row per entry")},
    )
    def get(self, request):
        board = _board(request)
        entries = list(board.rows)  # every entry (ranked in the database or not): one query
        board_details_attach(entries)
        rows = LeaderboardRowOutput(entries, many=True).data
        compare = board.compare.version if board.compare else None
        buf = io.StringIO()
        # RFC 4180 line ends: a cell holding a carriage return is quoted too, not read as a row end
        writer = csv.DictWriter(buf, fieldnames=export_columns(), lineterminator="\r\n")
        writer.writeheader()
        for row in rows:
            writer.writerow(flatten_row(row, spec=board.spec.version, compare=compare))
        response = HttpResponse(buf.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{_export_filename(board, "csv")}"'
        return response


@public_cache
class LeaderboardJsonExportApi(PublicReadApi):
    renderer_classes = [JSONRenderer]

    @extend_schema(
        operation_id="leaderboard_json_export",
        summary="The whole board as one JSON document (same rows as /leaderboard, no pagination)",
        parameters=BOARD_PARAMETERS,
        responses=LeaderboardOutput,
    )
    def get(self, request):
        board = _board(request)
        entries = list(board.rows)
        board_details_attach(entries)
        data = _board_meta(board) | {
            "count": len(entries),
            "next": None,
            "previous": None,
            "results": LeaderboardRowOutput(entries, many=True).data,
        }
        response = Response(data)
        response["Content-Disposition"] = f'attachment; filename="{_export_filename(board, "json")}"'
        return response


# --------------------------------------------------------------------------- registry


class CategoryOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    n_tasks = serializers.IntegerField()
    n_probes = serializers.IntegerField(help_text="probes with a scored version")
    url = serializers.CharField(source="get_absolute_url")


@public_cache
class CategoryListApi(PublicReadApi):
    @extend_schema(
        operation_id="categories", summary="The eight categories", responses=CategoryOutput(many=True)
    )
    def get(self, request):
        return Response(CategoryOutput(category_list(), many=True).data)


class SplitOutput(serializers.Serializer):
    name = serializers.CharField()
    base_model = serializers.CharField(
        source="base_model_id", allow_null=True, help_text="on-policy tasks: whose behaviour labels this file"
    )
    path = serializers.CharField()
    rows = serializers.IntegerField()
    sha256 = serializers.CharField()


class TaskOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    category = serializers.CharField(source="category_id")
    family = serializers.CharField()
    description = serializers.CharField()
    positive = serializers.CharField()
    negative = serializers.CharField()
    # a declared field may share a name with a Field attribute: DRF's metaclass takes it off the class
    source = serializers.DictField()  # type: ignore[assignment]
    status = serializers.CharField()
    superseded_by = serializers.CharField(source="superseded_by_id", allow_null=True)
    minted = serializers.CharField()
    on_policy = serializers.BooleanField(
        help_text="labels from each base model's own behaviour; splits per model"
    )
    text_baselines = serializers.DictField(
        help_text="the committed text-baseline panel (members fit on train, hyperparameters by CV on"
        " train; AUROC per split; the file's sha256), per base model for an on-policy task"
    )
    splits = SplitOutput(many=True, source="splits.all")
    url = serializers.CharField(source="get_absolute_url")


@public_cache
class TaskListApi(PublicReadApi):
    @extend_schema(
        operation_id="tasks",
        summary="Tasks with their splits (row counts, SHA-256)",
        parameters=[OpenApiParameter("category", str, description="only this category")],
        responses=TaskOutput(many=True),
    )
    def get(self, request):
        category = query_parse(TaskListInput, request.query_params).get("category")
        return Response(TaskOutput(task_list(category=category), many=True).data)


class BaseModelOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    family = serializers.CharField()
    architecture = serializers.CharField()
    n_layers = serializers.IntegerField()
    d_model = serializers.IntegerField()
    weights_license = serializers.CharField()
    weights_sha256 = serializers.CharField()
    package = serializers.CharField()
    package_version = serializers.CharField()
    is_active = serializers.BooleanField()
    n_probes = serializers.IntegerField()
    url = serializers.CharField(source="get_absolute_url")


@public_cache
class BaseModelListApi(PublicReadApi):
    @extend_schema(
        operation_id="models", summary="Base models the workers run", responses=BaseModelOutput(many=True)
    )
    def get(self, request):
        return Response(BaseModelOutput(base_model_list(), many=True).data)


class WeightsSpecOutput(serializers.Serializer):
    version = serializers.CharField()
    released = serializers.CharField()
    description = serializers.CharField()
    weights = serializers.DictField(child=serializers.FloatField())
    imputation = serializers.DictField(child=serializers.FloatField())
    sha256 = serializers.CharField()


@public_cache
class WeightsSpecListApi(PublicReadApi):
    @extend_schema(
        operation_id="specs",
        summary="ProbeScore weights specs, oldest first",
        responses=WeightsSpecOutput(many=True),
    )
    def get(self, request):
        return Response(WeightsSpecOutput(weights_spec_list(), many=True).data)


# --------------------------------------------------------------------------- probe


class TaskResultOutput(serializers.Serializer):
    task = serializers.CharField()
    task_name = serializers.CharField()
    auroc = serializers.FloatField(source="result.auroc", allow_null=True)
    auroc_ci = serializers.ListField(
        child=serializers.FloatField(), source="result.auroc_ci", allow_null=True
    )
    auroc_ea = serializers.FloatField(source="result.auroc_ea", allow_null=True)
    auroc_ea_imputed = serializers.BooleanField(source="result.auroc_ea_imputed")
    auroc_ea_na = serializers.BooleanField(source="result.auroc_ea_na", help_text="eval_awareness probes")
    auroc_ds = serializers.FloatField(source="result.auroc_ds", allow_null=True)
    auroc_ds_imputed = serializers.BooleanField(source="result.auroc_ds_imputed")
    ece = serializers.FloatField(source="result.ece", allow_null=True)
    brier = serializers.FloatField(source="result.brier", allow_null=True)
    recall_at_1pct_fpr = serializers.FloatField(source="result.recall_at_1pct_fpr", allow_null=True)
    lift_over_text = serializers.FloatField(
        source="result.lift_over_text",
        allow_null=True,
        help_text="this AUROC minus the strongest text-only baseline's AUROC on the same test rows",
    )
    lift_over_text_ci = serializers.ListField(
        child=serializers.FloatField(),
        source="result.lift_over_text_ci",
        allow_null=True,
        help_text="DeLong's paired 95% interval of the lift",
    )
    text_baseline = serializers.CharField(
        source="result.text_baseline", allow_null=True, help_text="the panel member the lift is over"
    )
    controlled_auroc = serializers.FloatField(
        source="result.controlled_auroc",
        allow_null=True,
        help_text="AUROC the probe adds to the text controls, cross-fitted on this task's test rows",
    )
    controlled_auroc_ci = serializers.ListField(
        child=serializers.FloatField(), source="result.controlled_auroc_ci", allow_null=True
    )
    text_baseline_auroc = serializers.FloatField(source="result.text_baseline_auroc", allow_null=True)
    n_test = serializers.IntegerField(source="result.n_test", allow_null=True)
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


class CycleResultOutput(serializers.Serializer):
    quarter = serializers.CharField(source="cycle.quarter")
    version = serializers.IntegerField(source="probe_version.number")
    reference_auroc = serializers.FloatField(allow_null=True)
    holdout_auroc = serializers.FloatField(allow_null=True)
    test_auroc = serializers.FloatField(allow_null=True)
    drop_points = serializers.FloatField(allow_null=True)
    outcome = serializers.CharField()


class LeakageOutput(serializers.Serializer):
    id = serializers.IntegerField()
    probe = serializers.CharField(source="probe.slug")
    version = serializers.IntegerField(source="probe_version.number", default=None, allow_null=True)
    source = serializers.CharField()  # type: ignore[assignment]  # a field named like Field.source (see TaskOutput)
    rule = serializers.CharField()
    summary = serializers.CharField()
    public_note = serializers.CharField()
    evidence = serializers.DictField()
    created_at = serializers.DateTimeField()
    reviewed_at = serializers.DateTimeField(allow_null=True)


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


# --------------------------------------------------------------------------- cycles, leakage, queue


class CycleOutput(serializers.Serializer):
    quarter = serializers.CharField()
    status = serializers.CharField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    n_results = serializers.IntegerField()
    outcome_counts = serializers.DictField(child=serializers.IntegerField())
    url = serializers.CharField(source="get_absolute_url")


@public_cache
class ReevaluationListApi(PublicReadApi):
    @extend_schema(
        operation_id="reevaluations",
        summary="Quarterly re-evaluation cycles, newest first",
        responses=CycleOutput(many=True),
    )
    def get(self, request):
        return Response(CycleOutput(reevaluation_list(), many=True).data)


class CycleResultRowOutput(CycleResultOutput):
    probe = serializers.CharField(source="probe_version.probe.slug")
    name = serializers.CharField(source="probe_version.probe.name")
    category = serializers.CharField(source="probe_version.probe.category_id")


class CycleDetailOutput(serializers.Serializer):
    quarter = serializers.CharField()
    status = serializers.CharField()
    error = serializers.CharField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    holdouts = serializers.DictField(
        help_text="task → the holdout minted this quarter (path, rows, sha256);"
        " an on-policy task's per base model: {by_model: {model → holdout}}"
    )
    progress = inline_serializer(
        "CycleProgress",
        fields={
            "total": serializers.IntegerField(),
            "done": serializers.IntegerField(),
            "failed": serializers.IntegerField(),
        },
    )
    diff = serializers.DictField(help_text="the public diff")
    results = CycleResultRowOutput(many=True)


def _public_holdouts(holdouts: dict) -> dict:
    """The minted holdouts without their item ids (the holdout stays unseen by submitters)."""
    return holdouts_map(holdouts, lambda entry: {k: v for k, v in entry.items() if k != "ids"})


@public_cache
class ReevaluationDetailApi(PublicReadApi):
    @extend_schema(
        operation_id="reevaluation",
        summary="One quarter's re-evaluation: its public diff and every public result",
        responses={200: CycleDetailOutput, 404: OpenApiResponse(description="no such cycle")},
    )
    def get(self, request, quarter):
        found = reevaluation_detail(quarter=quarter)
        if found is None:
            raise NotFound(f"no re-evaluation cycle {quarter!r}")
        cycle, results = found
        fields = ("quarter", "status", "error", "started_at", "finished_at", "progress", "diff")
        payload = {f: getattr(cycle, f) for f in fields} | {
            "holdouts": _public_holdouts(cycle.holdouts),
            "results": results,
        }
        return Response(CycleDetailOutput(payload).data)


class ReferenceUpdateEntryOutput(serializers.Serializer):
    probe = serializers.CharField()
    version = serializers.IntegerField()
    spec = serializers.CharField()
    auroc_ea_before = serializers.FloatField(allow_null=True)
    auroc_ea_after = serializers.FloatField(allow_null=True)
    auroc_ea_imputed_after = serializers.BooleanField(default=False)
    total_before = serializers.FloatField(allow_null=True)
    total_after = serializers.FloatField(allow_null=True)


class ReferenceUpdateOutput(serializers.Serializer):
    id = serializers.IntegerField()
    base_model = serializers.CharField(source="base_model_id")
    reference_probe = serializers.CharField(source="new_version.probe.slug")
    old_version = serializers.IntegerField(source="old_version.number", default=None, allow_null=True)
    new_version = serializers.IntegerField(source="new_version.number")
    finished_at = serializers.DateTimeField(allow_null=True)
    diff = ReferenceUpdateEntryOutput(many=True, help_text="every dependent entry, before and after")


@public_cache
class ReferenceUpdateListApi(PublicReadApi):
    @extend_schema(
        operation_id="reference_updates",
        summary="Eval-awareness reference-probe updates and the auroc_ea / ProbeScore changes they published",
        responses=ReferenceUpdateOutput(many=True),
    )
    def get(self, request):
        return Response(ReferenceUpdateOutput(reference_update_list(), many=True).data)


class LeakagePublicOutput(LeakageOutput):
    probe_name = serializers.CharField(source="probe.name")
    probe_url = serializers.SerializerMethodField()

    def get_probe_url(self, record) -> str | None:
        return reverse("leaderboard:probe", args=[record.probe.slug]) if record.probe_public else None


@public_cache
class LeakageListApi(PublicReadApi):
    @extend_schema(
        operation_id="leakage",
        summary="Confirmed leakage records (public and permanent)",
        responses=LeakagePublicOutput(many=True),
    )
    def get(self, request):
        return Response(LeakagePublicOutput(leakage_public_list(), many=True).data)


class ExamplesExportOutput(serializers.Serializer):
    quarter = serializers.CharField()
    url = serializers.SerializerMethodField(help_text="the gzipped JSON-lines file")
    rows = serializers.IntegerField()
    entries = serializers.IntegerField()
    splits = serializers.ListField(child=serializers.CharField())
    columns = serializers.ListField(child=serializers.CharField())
    sha256 = serializers.CharField()
    bytes = serializers.IntegerField()
    written_at = serializers.CharField()
    code_version = serializers.CharField()

    def get_url(self, obj) -> str:
        from django.urls import reverse

        return reverse("leaderboard:examples_export", args=[obj["quarter"]])


@public_cache
class ExamplesExportListApi(PublicReadApi):
    @extend_schema(
        operation_id="exports",
        summary="The quarterly per-example exports: every public entry's per-row scores on the public splits",
        responses=ExamplesExportOutput(many=True),
    )
    def get(self, request):
        return Response(ExamplesExportOutput(examples_exports_list(), many=True).data)


class QueueEntryOutput(serializers.Serializer):
    id = serializers.IntegerField()
    probe_name = serializers.CharField()
    category = serializers.CharField()
    base_model = serializers.CharField()
    version = serializers.IntegerField()
    status = serializers.CharField()
    progress = serializers.FloatField()
    created_at = serializers.DateTimeField()
    age_days = serializers.FloatField()
    overdue = serializers.BooleanField(help_text="older than the review goal")


@public_cache
class QueueApi(PublicReadApi):
    @extend_schema(
        operation_id="queue",
        summary="Open submissions, oldest first, with their age against the review goal",
        responses=inline_serializer(
            "QueueOutput",
            {"review_goal_days": serializers.IntegerField(), "results": QueueEntryOutput(many=True)},
        ),
    )
    def get(self, request):
        return Response(
            {
                "review_goal_days": POLICY["review_goal_days"],
                "results": QueueEntryOutput(submission_queue(), many=True).data,
            }
        )
