"""Submission API (v1): one view per action, token authentication, rate-limited submits.

POST /api/v1/submissions        multipart: artifact (.safetensors), metadata (JSON), recipe (JSON)
GET  /api/v1/submissions        the caller's submissions, paginated (count, next, previous, results;
                                ``?limit=&offset=``, leaderboard.api.pagination); ``?probe=SLUG``: only
                                that probe's
GET  /api/v1/submissions/{id}   status, progress, per-run states, failure/rejection reason, the
                                queue position and ETA (measured run times), and once scored the
                                per-task metrics and the ProbeScore per spec
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.api.errors import ErrorSerializer
from leaderboard.api.pagination import ApiPagination
from leaderboard.selectors.submissions import (
    submission_detail_get,
    submission_queue_estimate,
    submissions_for_user,
)
from leaderboard.services.submissions import submission_create

#: ``?probe=``: a probe id, or empty for every probe's submissions
PROBE_FILTER = re.compile(r"^[A-Za-z0-9._-]{0,200}$")


class RunSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    kind = serializers.CharField()
    task = serializers.CharField(source="task_id")
    split = serializers.CharField()
    base_model = serializers.CharField(source="base_model_id")
    status = serializers.CharField()
    progress = serializers.FloatField()
    step = serializers.CharField()
    attempts = serializers.IntegerField()
    error = serializers.CharField()


class SubmissionOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    status = serializers.CharField()
    url = serializers.SerializerMethodField()
    page = serializers.SerializerMethodField()
    probe = serializers.CharField(source="probe_version.probe.slug")
    version = serializers.IntegerField(source="probe_version.number")
    artifact_sha256 = serializers.CharField(source="probe_version.artifact_sha256")
    created_at = serializers.DateTimeField()
    age_days = serializers.SerializerMethodField()

    def get_url(self, obj) -> str:
        request = self.context.get("request")
        path = f"/api/v1/submissions/{obj.pk}"
        return request.build_absolute_uri(path) if request else path

    def get_page(self, obj) -> str:
        """The submission's page (signed-in owner or staff; a token-only user follows the API)."""
        request = self.context.get("request")
        return request.build_absolute_uri(obj.get_absolute_url()) if request else obj.get_absolute_url()

    def get_age_days(self, obj) -> float:
        return round(obj.age.total_seconds() / 86400, 2)


class QueueEstimateSerializer(serializers.Serializer):
    queue_position = serializers.IntegerField(
        allow_null=True,
        help_text="1: the next run a worker takes is this submission's; counted in the order the"
        " workers take runs (primary before secondary, the maintainers' work first, then round-robin"
        " across submitters), over the runs it is scored on while one is open; null: none waits",
    )
    runs_ahead = serializers.IntegerField(allow_null=True)
    eta_seconds = serializers.FloatField(
        allow_null=True,
        help_text="until it is scored: the measured mean run time per kind × the queued runs taken up"
        " to its last one (its own among them), plus what is left of the running runs, over the busy"
        " workers; null when one of those kinds was never measured or the submission is final",
    )
    run_seconds = serializers.DictField(child=serializers.DictField(), help_text="kind → mean_s, runs")


class SubmissionDetailSerializer(SubmissionOutputSerializer):
    category = serializers.CharField(source="probe_version.probe.category_id")
    progress = serializers.FloatField()
    step = serializers.CharField()
    failure_reason = serializers.CharField()
    rejection_reason = serializers.CharField()
    runs = RunSerializer(many=True, source="runs_sorted")
    queue = serializers.SerializerMethodField()
    queue_position = serializers.SerializerMethodField()
    eta_seconds = serializers.SerializerMethodField()
    scores = serializers.SerializerMethodField()
    per_task = serializers.SerializerMethodField()
    reproduced = serializers.BooleanField(source="probe_version.reproduced", allow_null=True)
    declared_gaps = serializers.JSONField(source="probe_version.declared_gaps")

    def _estimate(self, obj):
        if not hasattr(obj, "queue_estimate"):
            obj.queue_estimate = submission_queue_estimate(sub=obj)
        return obj.queue_estimate

    @extend_schema_field(QueueEstimateSerializer)
    def get_queue(self, obj) -> dict:
        return QueueEstimateSerializer(self._estimate(obj)).data

    def get_queue_position(self, obj) -> int | None:
        return self._estimate(obj).queue_position

    def get_eta_seconds(self, obj) -> float | None:
        return self._estimate(obj).eta_seconds

    def get_scores(self, obj) -> dict:
        return {
            s.spec_id: {
                "total": s.total,
                "measured_total": s.measured_total,
                "components": s.components,
                "measurements": s.measurements,
            }
            for s in obj.scores_sorted
        }

    def get_per_task(self, obj) -> dict:
        return obj.scores_sorted[0].per_task if obj.scores_sorted else {}


@extend_schema_field(OpenApiTypes.STR)
class JsonTextField(serializers.Field):
    """JSON sent as a form field or as an uploaded file; parsed (with its size and depth limits) by
    the service (``leaderboard.validation.parse_json_field``), whose errors name the field."""

    def to_internal_value(self, data):
        return data

    def to_representation(self, value):
        return value


class SubmissionInputSerializer(serializers.Serializer):
    """The multipart form; the metadata and the artifact's tensors are validated by the service
    (leaderboard.validation, evaluator.core.probes), whose errors name the field at fault."""

    artifact = serializers.FileField(
        allow_empty_file=True,
        help_text="probe.safetensors",
        error_messages={"invalid": "must be an uploaded file (multipart)"},
    )
    metadata = JsonTextField(
        help_text="JSON: the probe.json written by `python -m evaluator train`. Without a recipe it must"
        ' name trained_on: a list of registry task ids the probe was trained on, or "external" (alone or'
        " in the list) with training_data.text_sha256 declaring the external texts; its scores are then"
        " split into in-domain (those tasks) and cross-domain (the category's other tasks)"
    )
    recipe = JsonTextField(required=False, help_text="optional JSON recipe")

    def to_internal_value(self, data):
        # the required fields are checked together first, so that one message names all that is missing
        if isinstance(data, Mapping):
            missing = [k for k in ("artifact", "metadata") if not data.get(k)]
            if missing:
                raise serializers.ValidationError(
                    {
                        missing[0]: f"missing field(s): {', '.join(missing)}; a submission is multipart"
                        " with artifact (.safetensors file) and metadata (JSON)"
                    }
                )
        return super().to_internal_value(data)


class SubmissionListCreateApi(APIView):
    # authentication: the API's default, a hashed token (leaderboard.authentication) or a session
    permission_classes = [IsAuthenticated]
    parser_classes = [MultiPartParser, FormParser]
    pagination_class = ApiPagination
    throttle_scope = "submissions"

    def get_throttles(self):
        # Only submitting is rate-limited per user; reading your own list is not.
        if self.request.method != "POST":
            return []
        return super().get_throttles()

    @extend_schema(
        operation_id="submissions_create",
        request=SubmissionInputSerializer,
        responses={
            201: inline_serializer(
                "SubmissionCreated",
                fields={
                    "id": serializers.IntegerField(),
                    "status": serializers.CharField(),
                    "url": serializers.URLField(),
                    "page": serializers.URLField(),
                },
            ),
            400: OpenApiResponse(ErrorSerializer, description="invalid metadata or artifact"),
            401: OpenApiResponse(description="no or invalid token"),
            409: OpenApiResponse(ErrorSerializer, description="the same artifact was already submitted"),
            413: OpenApiResponse(ErrorSerializer, description="artifact over the size limit"),
            429: OpenApiResponse(
                ErrorSerializer,
                description=(
                    "too many submissions (the rate limit), or the account's queued work would go"
                    " over PROBEBENCH_MAX_QUEUED_RUN_SECONDS: the body adds retry_after_s, and"
                    " Retry-After says when to submit again"
                ),
            ),
            503: OpenApiResponse(
                ErrorSerializer,
                description="the rate-limit counts or the task broker cannot be reached: nothing was stored",
            ),
        },
    )
    def post(self, request):
        data = SubmissionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        sub = submission_create(
            user=request.user,
            artifact=data.validated_data["artifact"],
            metadata=data.validated_data["metadata"],
            recipe=data.validated_data.get("recipe") or None,
            via="api",
        )
        out = SubmissionOutputSerializer(sub, context={"request": request}).data
        return Response(
            {"id": out["id"], "status": out["status"], "url": out["url"], "page": out["page"]},
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        operation_id="submissions_list",
        parameters=[
            OpenApiParameter(
                "probe",
                str,
                pattern=PROBE_FILTER.pattern,
                description="only this probe's submissions (its id; empty: every probe's)",
            )
        ],
        # paged by ``pagination_class``: drf-spectacular documents the object it answers
        # ({count, next, previous, results}) and its limit and offset parameters
        responses=SubmissionOutputSerializer(many=True),
    )
    def get(self, request):
        paginator = self.pagination_class()
        probe = request.query_params.get("probe", "")
        if not PROBE_FILTER.fullmatch(probe):
            raise serializers.ValidationError(
                {"probe": "must be a probe id: 1 to 200 letters, digits, '-', '_' or '.'"}
            )
        probe = probe or None
        page = paginator.paginate_queryset(
            submissions_for_user(user=request.user, probe=probe), request, view=self
        )
        data = SubmissionOutputSerializer(page, many=True, context={"request": request}).data
        return paginator.get_paginated_response(data)


class SubmissionDetailApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="submissions_retrieve",
        parameters=[
            OpenApiParameter(
                "id",
                {"type": "integer", "minimum": 1},
                OpenApiParameter.PATH,
                description="the submission's id",
            )
        ],
        responses={200: SubmissionDetailSerializer, 404: ErrorSerializer},
    )
    def get(self, request, pk: int):
        sub = submission_detail_get(pk=pk, user=request.user)
        if sub is None:  # someone else's submission is indistinguishable from a missing one
            raise NotFound("no such submission")
        return Response(SubmissionDetailSerializer(sub, context={"request": request}).data)
