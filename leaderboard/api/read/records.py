"""The public records: quarterly re-evaluation cycles, reference-probe updates, confirmed leakage,
the per-example exports and the open submissions' queue."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from leaderboard.api.read.base import PublicReadApi
from leaderboard.http import public_cache
from leaderboard.presentation import POLICY
from leaderboard.selectors.bundles import bundles_list
from leaderboard.selectors.cycles import (
    leakage_public_list,
    reevaluation_detail,
    reevaluation_list,
    reevaluation_reveal,
    reference_update_list,
)
from leaderboard.selectors.exports import examples_exports_list
from leaderboard.selectors.submissions import submission_queue


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
        help_text="task → the holdout drawn this quarter: its rows (a count), sha256, pool (sealed or"
        " public), pool_sha256, pool_rows and a note where the pool is public or short; an on-policy"
        " task's per base model: {by_model: {model → holdout}}. Never its rows or their ids"
    )
    commitment = serializers.DictField(
        help_text="published before any run: the draw's scheme and sizes, seed_sha256 (SHA-256 of the"
        " secret seed's 32 bytes) and per holdout its sha256 and its pool's; {} for a cycle drawn before"
        " commitments"
    )
    revealed = serializers.BooleanField(
        help_text="the cycle has completed: its seed and holdout rows are at reveal_url"
    )
    reveal_url = serializers.CharField(allow_null=True)
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
        fields = ("quarter", "status", "error", "started_at", "finished_at", "progress", "diff", "commitment")
        payload = {f: getattr(cycle, f) for f in fields} | {
            "holdouts": cycle.public_holdouts(),  # no row, id or path while it runs, nor after
            "revealed": cycle.is_revealed,
            "reveal_url": reverse("api:reevaluation-reveal", args=[cycle.quarter])
            if cycle.is_revealed
            else None,
            "results": results,
        }
        return Response(CycleDetailOutput(payload).data)


class RevealedHoldoutOutput(serializers.Serializer):
    task = serializers.CharField()
    base_model = serializers.CharField(help_text="the base model of an on-policy task's holdout, else empty")
    pool = serializers.CharField(help_text="sealed (built from the upstream source) or public (committed)")
    pool_sha256 = serializers.CharField()
    pool_rows = serializers.IntegerField()
    size = serializers.IntegerField(help_text="the rows asked of the draw")
    sha256 = serializers.CharField(help_text="SHA-256 of the holdout file: the rows as canonical JSON lines")
    reused_rows = serializers.IntegerField()
    avoided_ids = serializers.ListField(
        child=serializers.CharField(), help_text="the pool's rows earlier quarters' holdouts used"
    )
    note = serializers.CharField()
    rows = serializers.ListField(child=serializers.DictField(), help_text="the holdout's rows, sorted by id")


class RevealOutput(serializers.Serializer):
    quarter = serializers.CharField()
    scheme = serializers.CharField(help_text="the name of the draw (evaluator.data.holdouts)")
    seed = serializers.CharField(help_text="the secret seed: 64 hex digits")
    seed_sha256 = serializers.CharField()
    revealed_at = serializers.CharField()
    commitment = serializers.DictField(help_text="the commitment as it was published before any run")
    holdouts = RevealedHoldoutOutput(many=True)


@public_cache
class ReevaluationRevealApi(PublicReadApi):
    @extend_schema(
        operation_id="reevaluation_reveal",
        summary="A completed quarter's secret seed and holdout rows, to check against its commitment"
        " (python -m evaluator verify-holdout)",
        responses={
            200: RevealOutput,
            404: OpenApiResponse(
                description="no such cycle, or not completed yet: nothing is revealed before"
            ),
        },
    )
    def get(self, request, quarter):
        cycle, reveal = reevaluation_reveal(quarter=quarter)
        if cycle is None:
            raise NotFound(f"no re-evaluation cycle {quarter!r}")
        if reveal is None:
            if cycle.status == cycle.Status.COMPLETED:
                raise NotFound(
                    f"the cycle of {quarter} was drawn before seeds were committed: nothing to reveal"
                )
            raise NotFound(
                f"the cycle of {quarter} is {cycle.status}: its seed and holdouts are revealed once it has completed"
            )
        return Response(RevealOutput(reveal).data)


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


class BundleOutput(serializers.Serializer):
    id = serializers.CharField(help_text="the SHA-256 of the bundle's manifest")
    role = serializers.CharField(help_text="published (by this board) or imported")
    board = serializers.CharField(help_text="the publishing board's name")
    signer_fingerprint = serializers.CharField(
        help_text="first 16 hex digits of the SHA-256 of the Ed25519 key"
    )
    commit = serializers.CharField()
    code_version = serializers.CharField()
    quarter = serializers.CharField(help_text="the quarterly cycle that published it, or empty")
    created_at = serializers.DateTimeField()
    entries = serializers.IntegerField()
    bytes = serializers.IntegerField()
    url = serializers.SerializerMethodField(help_text="the bundle file (published ones only)")

    def get_url(self, obj) -> str | None:
        return reverse("leaderboard:bundle_file", args=[obj.id]) if obj.path else None


@public_cache
class BundleListApi(PublicReadApi):
    @extend_schema(
        operation_id="bundles",
        summary="Signed result bundles: this board's public entries with every per-example score, and those imported",
        responses=inline_serializer(
            "BundleList",
            {
                "public_key_url": serializers.CharField(help_text="the board's Ed25519 public key (PEM)"),
                "results": BundleOutput(many=True),
            },
        ),
    )
    def get(self, request):
        return Response(
            {
                "public_key_url": reverse("leaderboard:board_key"),
                "results": BundleOutput(bundles_list(), many=True).data,
            }
        )


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
