"""The registry's reads: categories, tasks with their splits, base models, weights specs."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response

from leaderboard.api.read.base import PublicReadApi
from leaderboard.http import public_cache
from leaderboard.inputs import TaskListInput, query_parse
from leaderboard.selectors.board.query import weights_spec_list
from leaderboard.selectors.registry import base_model_list, category_list, model_saes, task_list


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


class SaeCardNumbers(serializers.Serializer):
    tokens = serializers.IntegerField(help_text="held-out corpus tokens the card read")
    l0 = serializers.FloatField(help_text="mean active latents per token")
    fve = serializers.FloatField(help_text="fraction of variance explained")
    dead_latents = serializers.IntegerField(help_text="latents never active on the held-out tokens")
    alive_latents = serializers.IntegerField()
    loss_recovered = serializers.FloatField(
        allow_null=True, help_text="(L_zero − L_reconstruction) / (L_zero − L_clean), next-token loss"
    )
    loss = serializers.DictField(help_text="clean, reconstruction and zero-ablation loss in nats")


class SaeOutput(serializers.Serializer):
    id = serializers.CharField(source="spec.id")
    layer = serializers.IntegerField(source="spec.layer", help_text="the residual stream after block L")
    hook = serializers.CharField(source="spec.hook", help_text="the same site as SAELens names it")
    architecture = serializers.CharField(source="spec.architecture")
    width = serializers.IntegerField(source="spec.width")
    k = serializers.IntegerField(source="spec.k")
    tokens = serializers.IntegerField(source="spec.tokens", help_text="training tokens")
    seed = serializers.IntegerField(source="spec.seed")
    weights_sha256 = serializers.CharField(source="spec.weights_sha256")
    path = serializers.CharField(source="spec.path", help_text="its directory (SAELens layout)")
    card = SaeCardNumbers(allow_null=True, help_text="null until measured")


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
    saes = serializers.SerializerMethodField(help_text="its registered sparse autoencoders and their cards")

    @extend_schema_field(SaeOutput(many=True))
    def get_saes(self, model) -> list[dict]:
        return list(SaeOutput(model_saes(model.slug), many=True).data)


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
    imputation_rules = serializers.DictField(
        child=serializers.CharField(),
        help_text="component → imputation rule; category_lowest: the lowest value measured in the probe's"
        " category (the default in imputation only where the category has none)",
    )
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
