"""Replication receipts (v1): someone reran an entry of a bundle this board published and posts
what they found, signed with their own key (``python -m evaluator replicate``)."""

from drf_spectacular.utils import OpenApiRequest, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.api.errors import ErrorSerializer
from leaderboard.services.replication import RECEIPT_MAX_BYTES, receipt_record


class RawJsonParser(BaseParser):
    """The body as bytes (read up to the cap), whatever its declared type: the service parses it as
    JSON with strict limits and names the body when it is not."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read(RECEIPT_MAX_BYTES + 1) if stream is not None else b""


class ReplicationCreateApi(APIView):
    # authentication: the API's default, a hashed token (leaderboard.authentication) or a session
    permission_classes = [IsAuthenticated]
    parser_classes = [RawJsonParser]
    throttle_scope = "replications"

    @extend_schema(
        operation_id="replications_create",
        summary="Post a signed replication receipt for an entry of a bundle this board published",
        request=OpenApiRequest(
            inline_serializer(
                "ReceiptInput",
                fields={
                    "receipt": serializers.DictField(
                        help_text="format probebench-receipt/1: bundle, probe, version, artifact_sha256,"
                        " replicator {public_key}, verdict, runs [{run, agrees, max_abs_diff, why}]"
                    ),
                    "signature": serializers.CharField(
                        help_text="Ed25519 over the receipt's canonical JSON, base64"
                    ),
                },
            )
        ),
        responses={
            201: inline_serializer(
                "ReceiptStored",
                fields={
                    "id": serializers.IntegerField(),
                    "verdict": serializers.CharField(),
                    "replicator_fingerprint": serializers.CharField(),
                    "url": serializers.CharField(),
                },
            ),
            400: ErrorSerializer,
            401: ErrorSerializer,
            429: ErrorSerializer,
        },
    )
    def post(self, request):
        row = receipt_record(user=request.user, body=request.data or b"")
        return Response(
            {
                "id": row.pk,
                "verdict": row.verdict,
                "replicator_fingerprint": row.replicator_fingerprint,
                "url": f"/api/v1/probes/{row.probe_version.probe.slug}",
            },
            status=status.HTTP_201_CREATED,
        )
