"""Staff-only API actions (v1)."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import IsAdminUser
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.api.errors import ErrorSerializer
from leaderboard.services.reevaluation import reevaluation_start


class ReevaluationStartApi(APIView):
    """Start the quarterly re-evaluation cycle (staff only; one cycle per quarter)."""

    # authentication: the API's default, a hashed token (leaderboard.authentication) or a session
    permission_classes = [IsAdminUser]
    throttle_scope = "maintainer"

    class InputSerializer(serializers.Serializer):
        quarter = serializers.RegexField(
            r"^20\d\dQ[1-4]$", help_text="e.g. 2026Q4", error_messages={"invalid": "must look like 2026Q4"}
        )

    @extend_schema(
        operation_id="reevaluations_start",
        request=InputSerializer,
        responses={
            201: inline_serializer(
                "CycleStarted",
                fields={
                    "quarter": serializers.CharField(),
                    "status": serializers.CharField(),
                    "runs": serializers.IntegerField(),
                    "url": serializers.CharField(),
                },
            ),
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            409: ErrorSerializer,
        },
    )
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cycle = reevaluation_start(quarter=data.validated_data["quarter"], by=request.user)
        return Response(
            {
                "quarter": cycle.quarter,
                "status": cycle.status,
                "runs": cycle.runs.count(),
                "url": f"/api/v1/reevaluations/{cycle.quarter}",
            },
            status=status.HTTP_201_CREATED,
        )
