"""The registry's reads: categories, tasks with their splits, base models, weights specs."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from leaderboard.api.read.base import PublicReadApi
from leaderboard.http import public_cache
from leaderboard.inputs import TaskListInput, query_parse
from leaderboard.selectors.board.query import weights_spec_list
from leaderboard.selectors.registry import base_model_list, category_list, task_list


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
