"""The board's query and what it selects: the weights specs, the filters (category, base model,
license, status) and the entries they leave (``Score.objects.on_board``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from leaderboard.errors import QueryError
from leaderboard.models import BaseModel, License, Score, WeightsSpec
from leaderboard.policy import spec_version_key

BOARD_STATUSES = ("active", "deprecated")


class BoardQueryError(QueryError):
    """A board request that names something that does not exist or is malformed."""


def weights_spec_list() -> list[WeightsSpec]:
    """Every weights spec, oldest first (semantic version order, not string order)."""
    return sorted(WeightsSpec.objects.all(), key=lambda s: spec_version_key(s.version))


def resolve_spec(specs: list[WeightsSpec], version: str | None, *, param: str) -> WeightsSpec:
    if not specs:
        raise BoardQueryError("no weights spec is loaded (run manage.py sync_registry)", param=param)
    if not version:
        return specs[-1]
    for spec in specs:
        if spec.version == version:
            return spec
    accepted = ", ".join(s.version for s in specs)
    raise BoardQueryError(f"unknown weights spec {version!r}; accepted: {accepted}", param=param)


@dataclass(frozen=True)
class BoardQuery:
    category: str | None = None
    spec: str | None = None
    compare: str | None = None
    model: str | None = None
    license: str | None = None
    status: str | None = None  # "active" | "deprecated" | None (both)
    measured_only: bool = False
    q: str = ""
    sort: str = "score"
    direction: str = ""  # "asc" | "desc" | "" (the column's natural direction)

    @property
    def descending(self) -> bool:
        if self.direction:
            return self.direction == "desc"
        return self.sort not in ("name", "model")


def board_filters(query: BoardQuery, *, via: str = "") -> Q:
    """The board's filters (category, base model, license, status) as one condition on probe
    versions, or on rows that reach them through ``via`` (``"probe_version__"`` for Scores)."""
    fields = {
        "probe__category_id": query.category,
        "probe__base_model_id": query.model,
        "license_id": query.license,
        "probe__status": query.status,
    }
    return Q(**{f"{via}{name}": value for name, value in fields.items() if value})


def board_entries(*, spec: WeightsSpec, query: BoardQuery, slugs: list[str] | None = None):
    """The board's entries (``Score.objects.on_board``) with the board's filters applied."""
    filters = board_filters(query, via="probe_version__")
    if slugs is not None:
        filters &= Q(probe_version__probe__slug__in=slugs)
    return Score.objects.on_board(spec=spec, filters=filters)


def board_filter_choices() -> dict:
    """What the filter form offers: base models and licenses (two queries)."""
    return {
        "models": list(BaseModel.objects.values("slug", "name")),
        "licenses": list(License.objects.values_list("spdx_id", flat=True)),
    }
