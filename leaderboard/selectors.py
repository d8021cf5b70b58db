"""Reads for the public pages, the read API and the exports.

Every function here runs a fixed number of SQL queries whatever the number of probes (related rows
come with ``select_related`` / ``prefetch_related`` or as annotations), and returns plain data for
views, serializers and templates. Nothing here writes.

What is public (SPEC.md §1, §6): a probe version is shown once its submission is *scored*; the board
shows the latest scored version of each probe that has a Score under the requested weights spec.
Rejected and failed submissions never appear; the public queue lists open submissions without
private details. Confirmed leakage records are shown forever.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.db.models import Count, Exists, OuterRef, Prefetch, Q, Subquery
from django.db.models.fields.json import KT
from django.utils import timezone

from evaluator.registry import COMPONENTS, MAX_COMPONENT_WEIGHT
from evaluator.scoring import ECE_RANGE, LATENCY_RANGE_MS, RHO_RANGE, ranking_key
from leaderboard.models import (
    BaseModel,
    Category,
    CycleResult,
    LeakageRecord,
    License,
    Probe,
    ProbeVersion,
    ReevaluationCycle,
    Score,
    Submission,
    Task,
    WeightsSpec,
)

SCORED = Submission.Status.SCORED
OPEN_STATUSES = (
    Submission.Status.SUBMITTED,
    Submission.Status.VALIDATED,
    Submission.Status.QUEUED,
    Submission.Status.RUNNING,
)

#: The policy numbers of SPEC.md §5–§6 that the pages explain (the methodology page renders these,
#: never a number written in a template). AUROC "points" are AUROC × 100.
POLICY = {
    "max_component_weight": MAX_COMPONENT_WEIGHT,
    "diff_drop_points": 5,
    "deprecate_drop_points": 10,
    "stability_min_quarters": 2,
    "declared_gap_points": 5,
    "leakage_test_over_holdout_points": 10,
    "review_goal_days": 7,
    "ece_range": ECE_RANGE,
    "latency_range_ms": LATENCY_RANGE_MS,
    "rho_range": RHO_RANGE,
}
REVIEW_GOAL = timedelta(days=POLICY["review_goal_days"])

COMPONENT_LABELS = {
    "auroc": "AUROC",
    "auroc_ea": "AUROC (EA-corrected)",
    "auroc_ds": "AUROC (dist. shift)",
    "calibration": "Calibration",
    "rho_ce": "Transfer ρ",
    "latency": "Latency",
    "license": "License",
}
COMPONENT_SHORT = {
    "auroc": "AUROC",
    "auroc_ea": "AUROC-EA",
    "auroc_ds": "AUROC-DS",
    "calibration": "Calib.",
    "rho_ce": "ρ CE",
    "latency": "Latency",
    "license": "License",
}
#: How each component's value is computed from what was measured (SPEC.md §4). The numbers in
#: these strings come from evaluator.scoring's clamp ranges.
COMPONENT_FORMULAS = {
    "auroc": "mean test-split AUROC over the category's active tasks",
    "auroc_ea": "AUROC counting only pairs inside the same eval-awareness reference-probe quintile",
    "auroc_ds": "mean AUROC on the tasks' distribution-shift splits",
    "calibration": f"1 − 2·ECE, ECE clamped to [{ECE_RANGE[0]:g}, {ECE_RANGE[1]:g}] (10 equal-width bins)",
    "rho_ce": f"mean Pearson ρ of word-ablation effects across base models, clamped to "
    f"[{RHO_RANGE[0]:g}, {RHO_RANGE[1]:g}]",
    "latency": f"1 − log10(ms)/{math.log10(LATENCY_RANGE_MS[1]):g}, ms clamped to "
    f"[{LATENCY_RANGE_MS[0]:g}, {LATENCY_RANGE_MS[1]:g}]",
    "license": "the openness score L of the probe's license (registry)",
}

SPLIT_ORDER = ("train", "test", "distshift", "holdout_pool")
SORT_KEYS = ("score", "measured", "name", "model", *COMPONENTS)
BOARD_STATUSES = ("active", "deprecated")
EA_NOT_APPLICABLE_CATEGORY = "eval_awareness"


class BoardQueryError(ValueError):
    """A board request that names something that does not exist or is malformed."""

    def __init__(self, message: str, *, param: str):
        super().__init__(message)
        self.message = message
        self.param = param


# --------------------------------------------------------------------------- weights specs


def _version_key(version: str) -> tuple:
    try:
        return (0, *(int(x) for x in version.lstrip("v").split(".")))
    except ValueError:
        return (-1, version)


def weights_spec_list() -> list[WeightsSpec]:
    """Every weights spec, oldest first (semantic version order, not string order)."""
    return sorted(WeightsSpec.objects.all(), key=lambda s: _version_key(s.version))


def _resolve_spec(specs: list[WeightsSpec], version: str | None, *, param: str) -> WeightsSpec:
    if not specs:
        raise BoardQueryError("no weights spec is loaded (run manage.py sync_registry)", param=param)
    if not version:
        return specs[-1]
    for spec in specs:
        if spec.version == version:
            return spec
    accepted = ", ".join(s.version for s in specs)
    raise BoardQueryError(f"unknown weights spec {version!r}; accepted: {accepted}", param=param)


# --------------------------------------------------------------------------- the board


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


def _flag(value: str | None, *, param: str) -> bool:
    if value in (None, "", "0", "false", "False", "off", "no"):
        return False
    if value in ("1", "true", "True", "on", "yes"):
        return True
    raise BoardQueryError(f"{param} must be true or false, got {value!r}", param=param)


def board_query_from_params(params: Mapping[str, str], *, category: str | None = None) -> BoardQuery:
    """Parse and check the board's query string (shared by the page, the API and the exports)."""
    sort = (params.get("sort") or "score").strip()
    if sort not in SORT_KEYS:
        raise BoardQueryError(f"unknown sort key {sort!r}; accepted: {', '.join(SORT_KEYS)}", param="sort")
    direction = (params.get("dir") or "").strip()
    if direction not in ("", "asc", "desc"):
        raise BoardQueryError("dir must be asc or desc", param="dir")
    status = (params.get("status") or "").strip() or None
    if status is not None and status not in BOARD_STATUSES:
        raise BoardQueryError(f"status must be one of {', '.join(BOARD_STATUSES)}", param="status")
    return BoardQuery(
        category=category if category is not None else ((params.get("category") or "").strip() or None),
        spec=(params.get("spec") or "").strip() or None,
        compare=(params.get("compare") or "").strip() or None,
        model=(params.get("model") or "").strip() or None,
        license=(params.get("license") or "").strip() or None,
        status=status,
        measured_only=_flag(params.get("measured_only"), param="measured_only"),
        q=(params.get("q") or "").strip()[:100],
        sort=sort,
        direction=direction,
    )


@dataclass
class BoardRow:
    """One probe on the board: its latest scored version under one weights spec."""

    probe: str
    name: str
    category: str
    base_model: str
    base_model_name: str
    version: int
    license: str
    authors: list[str]
    owner: str
    is_reference: bool
    total: float
    measured_total: float | None
    components: dict[str, dict]
    measurements: dict
    auroc_ci: list[float] | None
    auroc_ci_kind: str  # "bootstrap" | "per-task" (mean of per-task bounds) | "mean-of-tasks" | ""
    reproduced: bool | None
    stability_quarters: int
    deprecated: bool
    deprecated_reason: str
    leakage: bool
    declared_gaps: dict
    computed_at: datetime
    rank: int | None = None
    compare_rank: int | None = None
    compare_total: float | None = None

    @property
    def stable(self) -> bool:
        return self.stability_quarters >= POLICY["stability_min_quarters"]

    @property
    def ea_not_applicable(self) -> bool:
        return self.category == EA_NOT_APPLICABLE_CATEGORY

    @property
    def rank_change(self) -> int | None:
        """Places gained against the compared spec (positive: ranks higher under this spec)."""
        if self.rank is None or self.compare_rank is None:
            return None
        return self.compare_rank - self.rank

    @property
    def measured_weight(self) -> float:
        return sum(c.get("weight", 0.0) for c in self.components.values() if not c.get("imputed"))

    def ranking_key(self, *, measured_only: bool = False) -> tuple[float, float]:
        """Norm 2 (evaluator.scoring.ranking_key) on the total, or on the measured-only total."""
        lic = float(self.components.get("license", {}).get("contribution") or 0.0)
        if not measured_only:
            return ranking_key(self.total, lic)
        if self.measured_total is None or self.measured_weight <= 0:
            return (-math.inf, -math.inf)
        return ranking_key(self.measured_total, lic / self.measured_weight)

    def component_value(self, name: str, *, measured_only: bool = False) -> float | None:
        comp = self.components.get(name)
        if not comp or (measured_only and comp.get("imputed")):
            return None
        return comp.get("value")


@dataclass
class Board:
    spec: WeightsSpec
    specs: list[WeightsSpec]
    compare: WeightsSpec | None
    query: BoardQuery
    category: Category | None
    rows: list[BoardRow]
    #: entries before the text search (the search finds, it does not re-rank)
    ranked_count: int

    @property
    def components(self) -> list[dict]:
        return [
            {
                "name": name,
                "label": COMPONENT_LABELS[name],
                "short": COMPONENT_SHORT[name],
                "weight": self.spec.weights.get(name),
            }
            for name in COMPONENTS
        ]


def _latest_public_version(spec: WeightsSpec) -> Subquery:
    """The pk of a probe's newest scored version that has a Score under ``spec``."""
    return Subquery(
        ProbeVersion.objects.filter(
            probe_id=OuterRef("probe_version__probe_id"), submission__status=SCORED, scores__spec=spec
        )
        .order_by("-number")
        .values("pk")[:1]
    )


_ROW_FIELDS = {
    "total": "total",
    "measured_total": "measured_total",
    "components": "components",
    "measurements": "measurements",
    "computed_at": "computed_at",
    "version": "probe_version__number",
    "license": "probe_version__license_id",
    "authors": "probe_version__authors",
    "reproduced": "probe_version__reproduced",
    "declared_gaps": "probe_version__declared_gaps",
    "probe": "probe_version__probe__slug",
    "name": "probe_version__probe__name",
    "category": "probe_version__probe__category_id",
    "base_model": "probe_version__probe__base_model_id",
    "base_model_name": "probe_version__probe__base_model__name",
    "owner": "probe_version__probe__owner__username",
    "is_reference": "probe_version__probe__is_reference",
    "status": "probe_version__probe__status",
    "deprecated_reason": "probe_version__probe__deprecated_reason",
    "stability_quarters": "probe_version__probe__stability_quarters",
}


def _parse_ci(raw) -> list[float] | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if isinstance(raw, (list, tuple)) and len(raw) == 2 and all(isinstance(x, (int, float)) for x in raw):
        return [float(raw[0]), float(raw[1])]
    return None


def _auroc_interval(measurements: dict, task_cis: list) -> tuple[list[float] | None, str]:
    """The interval shown next to AUROC: the stored bootstrap interval of the mean when the
    pipeline recorded one, else the mean of the per-task 95% bounds (conservative: at least as
    wide as the interval of the mean)."""
    direct = _parse_ci(measurements.get("auroc_ci"))
    if direct:
        return direct, "bootstrap"
    cis = [ci for ci in (_parse_ci(raw) for raw in task_cis) if ci]
    if not cis:
        return None, ""
    if len(cis) == 1:
        return cis[0], "per-task"
    return [sum(c[0] for c in cis) / len(cis), sum(c[1] for c in cis) / len(cis)], "mean-of-tasks"


def _board_rows(
    *, spec: WeightsSpec, query: BoardQuery, ci_tasks: list[str] | None = None, slugs: list[str] | None = None
) -> list[BoardRow]:
    """One query: the public rows under ``spec`` with the SQL-side filters of ``query``."""
    qs = Score.objects.filter(spec=spec, probe_version_id=_latest_public_version(spec))
    if query.category:
        qs = qs.filter(probe_version__probe__category_id=query.category)
    if query.model:
        qs = qs.filter(probe_version__probe__base_model_id=query.model)
    if query.license:
        qs = qs.filter(probe_version__license_id=query.license)
    if query.status:
        qs = qs.filter(probe_version__probe__status=query.status)
    if slugs is not None:
        qs = qs.filter(probe_version__probe__slug__in=slugs)
    ci_tasks = ci_tasks or []
    annotations = {f"ci_{i}": KT(f"per_task__{slug}__auroc_ci") for i, slug in enumerate(ci_tasks)}
    leakage = LeakageRecord.objects.filter(
        probe_id=OuterRef("probe_version__probe_id"), status=LeakageRecord.Status.CONFIRMED
    )
    qs = qs.annotate(leakage=Exists(leakage), **annotations).order_by()
    values = qs.values(*_ROW_FIELDS.values(), "leakage", *annotations)
    rows = []
    for v in values:
        data = {name: v[src] for name, src in _ROW_FIELDS.items()}
        measurements = data["measurements"] or {}
        ci, ci_kind = _auroc_interval(measurements, [v[k] for k in annotations])
        status = data.pop("status")
        rows.append(
            BoardRow(
                **(data | {"measurements": measurements, "authors": data["authors"] or []}),
                auroc_ci=ci,
                auroc_ci_kind=ci_kind,
                deprecated=status == Probe.Status.DEPRECATED,
                leakage=v["leakage"],
            )
        )
    return rows


def _rank(rows: list[BoardRow], *, measured_only: bool) -> list[BoardRow]:
    """Rank active entries by norm 2 (best first); deprecated entries follow, greyed, unranked."""
    rows = sorted(rows, key=lambda r: r.probe)  # deterministic ties
    rows.sort(key=lambda r: r.ranking_key(measured_only=measured_only), reverse=True)
    active = [r for r in rows if not r.deprecated]
    for i, row in enumerate(active, 1):
        row.rank = i
    return active + [r for r in rows if r.deprecated]


def _sort(rows: list[BoardRow], query: BoardQuery) -> list[BoardRow]:
    if query.sort == "score" and query.descending:
        return rows  # already in rank order
    if query.sort == "score":
        return list(reversed(rows))
    if query.sort == "name":
        key = lambda r: r.name.casefold()  # noqa: E731
    elif query.sort == "model":
        key = lambda r: r.base_model  # noqa: E731
    elif query.sort == "measured":
        key = lambda r: r.ranking_key(measured_only=True)[0] if r.measured_total is not None else None  # noqa: E731
    else:
        key = lambda r: r.component_value(query.sort, measured_only=query.measured_only)  # noqa: E731
    present = [r for r in rows if key(r) is not None]
    missing = [r for r in rows if key(r) is None]  # always last, whichever the direction
    present.sort(key=key, reverse=query.descending)
    return present + missing


def _matches(row: BoardRow, needle: str) -> bool:
    haystack = [row.name, row.probe, row.owner, *(str(a) for a in row.authors)]
    return any(needle in h.casefold() for h in haystack)


def board_get(*, query: BoardQuery) -> Board:
    """The board of one category (or of every category when ``query.category`` is None).

    Queries: the specs, the category with its tasks, the rows, and the rows under the compared spec
    when ``query.compare`` is given — never one per probe.
    """
    specs = weights_spec_list()
    spec = _resolve_spec(specs, query.spec, param="spec")
    compare = _resolve_spec(specs, query.compare, param="compare") if query.compare else None
    if compare is not None and compare.version == spec.version:
        compare = None
    category = None
    ci_tasks: list[str] = []
    if query.category:
        category = (
            Category.objects.filter(slug=query.category)
            .prefetch_related(Prefetch("tasks", queryset=Task.objects.order_by("slug")))
            .first()
        )
        if category is None:
            raise BoardQueryError(f"unknown category {query.category!r}", param="category")
        ci_tasks = [t.slug for t in category.tasks.all()]
    rows = _rank(_board_rows(spec=spec, query=query, ci_tasks=ci_tasks), measured_only=query.measured_only)
    if compare is not None:
        others = _rank(_board_rows(spec=compare, query=query), measured_only=query.measured_only)
        by_slug = {r.probe: r for r in others}
        for row in rows:
            other = by_slug.get(row.probe)
            if other is not None:
                row.compare_rank, row.compare_total = other.rank, other.total
    ranked_count = len(rows)
    if query.q:
        needle = query.q.casefold()
        rows = [r for r in rows if _matches(r, needle)]
    return Board(
        spec=spec,
        specs=specs,
        compare=compare,
        query=replace(query, spec=spec.version, compare=compare.version if compare else None),
        category=category,
        rows=_sort(rows, query),
        ranked_count=ranked_count,
    )


@dataclass
class CategorySummary:
    category: Category
    count: int = 0
    top: list[BoardRow] = field(default_factory=list)

    @property
    def is_open(self) -> bool:
        return self.count == 0


def board_overview(*, spec: str | None = None, top: int = 3) -> tuple[WeightsSpec, list[WeightsSpec], list[CategorySummary]]:
    """Every category with its number of public entries and its top entries (open slots: 0)."""
    specs = weights_spec_list()
    resolved = _resolve_spec(specs, spec, param="spec")
    summaries = {c.slug: CategorySummary(c) for c in Category.objects.prefetch_related("tasks")}
    rows = _rank(_board_rows(spec=resolved, query=BoardQuery()), measured_only=False)
    for row in rows:
        summary = summaries.get(row.category)
        if summary is None:
            continue
        summary.count += 1
        if len(summary.top) < top and not row.deprecated:
            summary.top.append(row)
    return resolved, specs, list(summaries.values())


def category_tabs() -> list[dict]:
    """The category tabs: slug, name and the number of probes with a public version."""
    public = ProbeVersion.objects.filter(probe_id=OuterRef("pk"), submission__status=SCORED)
    counts = dict(
        Probe.objects.filter(Exists(public)).values_list("category_id").annotate(n=Count("pk")).order_by()
    )
    return [
        {"slug": c.slug, "name": c.name, "count": counts.get(c.slug, 0)}
        for c in Category.objects.only("slug", "name", "order")
    ]


def board_filter_choices() -> dict:
    """What the filter form offers: base models and licenses (two queries)."""
    return {
        "models": list(BaseModel.objects.values("slug", "name")),
        "licenses": list(License.objects.values_list("spdx_id", flat=True)),
    }


# --------------------------------------------------------------------------- registry pages


def category_list() -> list[Category]:
    return list(Category.objects.annotate(n_tasks=Count("tasks")).order_by("order"))


def task_list(*, category: str | None = None) -> list[Task]:
    qs = Task.objects.select_related("category").prefetch_related("splits").order_by("category__order", "slug")
    if category:
        qs = qs.filter(category_id=category)
    return list(qs)


def base_model_list() -> list[BaseModel]:
    public = ProbeVersion.objects.filter(probe_id=OuterRef("pk"), submission__status=SCORED)
    counts = dict(
        Probe.objects.filter(Exists(public)).values_list("base_model_id").annotate(n=Count("pk")).order_by()
    )
    models = list(BaseModel.objects.order_by("slug"))
    for model in models:
        model.n_probes = counts.get(model.slug, 0)
    return models


@dataclass
class TaskProbe:
    row: BoardRow
    auroc: float | None
    auroc_ci: list[float] | None


@dataclass
class TaskDetail:
    task: Task
    splits: list
    superseded: list[Task]
    spec: WeightsSpec | None
    probes: list[TaskProbe]


def task_detail(*, slug: str) -> TaskDetail | None:
    """A task with its splits and the public probes whose latest score has a result on it."""
    task = (
        Task.objects.select_related("category", "superseded_by")
        .prefetch_related("splits", Prefetch("task_set", queryset=Task.objects.only("slug", "superseded_by")))
        .filter(slug=slug)
        .first()
    )
    if task is None:
        return None
    specs = weights_spec_list()
    probes: list[TaskProbe] = []
    spec = specs[-1] if specs else None
    if spec is not None:
        qs = (
            Score.objects.filter(spec=spec, probe_version_id=_latest_public_version(spec), per_task__has_key=slug)
            .annotate(t_auroc=KT(f"per_task__{slug}__auroc"), t_ci=KT(f"per_task__{slug}__auroc_ci"))
            .values("probe_version__probe__slug", "t_auroc", "t_ci")
        )
        per_probe = {v["probe_version__probe__slug"]: v for v in qs}
        rows = _rank(_board_rows(spec=spec, query=BoardQuery(), slugs=list(per_probe)), measured_only=False)
        for row in rows:
            v = per_probe[row.probe]
            auroc = float(v["t_auroc"]) if v["t_auroc"] not in (None, "") else None
            probes.append(TaskProbe(row=row, auroc=auroc, auroc_ci=_parse_ci(v["t_ci"])))
        probes.sort(key=lambda p: (p.auroc is not None, p.auroc or 0.0), reverse=True)
    order = {name: i for i, name in enumerate(SPLIT_ORDER)}
    splits = sorted(task.splits.all(), key=lambda s: order.get(s.name, 99))
    return TaskDetail(task=task, splits=splits, superseded=list(task.task_set.all()), spec=spec, probes=probes)


@dataclass
class ModelDetail:
    model: BaseModel
    board: Board
    by_category: list[tuple[str, int]]


def base_model_detail(*, slug: str) -> ModelDetail | None:
    model = BaseModel.objects.filter(slug=slug).first()
    if model is None:
        return None
    board = board_get(query=BoardQuery(model=slug))
    counts = Counter(row.category for row in board.rows)
    return ModelDetail(model=model, board=board, by_category=sorted(counts.items()))


# --------------------------------------------------------------------------- probe page


@dataclass
class TaskResult:
    task: str
    task_name: str
    result: dict

    @property
    def auroc_ci(self):
        return _parse_ci(self.result.get("auroc_ci"))


@dataclass
class ProbeDetail:
    probe: Probe
    version: ProbeVersion
    versions: list[ProbeVersion]
    spec: WeightsSpec
    specs: list[WeightsSpec]
    score: Score | None
    scores: list[Score]
    results: list[TaskResult]
    leakage: list[LeakageRecord]
    history: list[CycleResult]
    transfer: list[dict]
    declared: list[dict]
    model_names: dict[str, str]

    @property
    def ea_not_applicable(self) -> bool:
        return self.probe.category_id == EA_NOT_APPLICABLE_CATEGORY

    @property
    def stable(self) -> bool:
        return self.probe.stability_quarters >= POLICY["stability_min_quarters"]


def public_versions(probe: Probe) -> list[ProbeVersion]:
    return [v for v in probe.versions.all() if getattr(v, "submission", None) and v.submission.status == SCORED]


def probe_detail(*, slug: str, spec: str | None = None, version: int | None = None) -> ProbeDetail | None:
    """A probe with a public version: its metadata, scores, per-task results, history and records.
    None when the probe does not exist or has no scored version. Raises BoardQueryError on an
    unknown spec."""
    probe = (
        Probe.objects.select_related("category", "base_model", "owner")
        .prefetch_related(
            Prefetch(
                "versions",
                queryset=ProbeVersion.objects.select_related("submission", "license")
                .filter(submission__status=SCORED)
                .order_by("-number"),
            )
        )
        .filter(slug=slug)
        .first()
    )
    if probe is None:
        return None
    versions = list(probe.versions.all())
    if not versions:
        return None
    chosen = versions[0] if version is None else next((v for v in versions if v.number == version), None)
    if chosen is None:
        return None
    specs = weights_spec_list()
    resolved = _resolve_spec(specs, spec, param="spec")
    scores = list(Score.objects.filter(probe_version=chosen).select_related("spec").defer("per_task"))
    scores.sort(key=lambda s: _version_key(s.spec_id))
    score = Score.objects.filter(probe_version=chosen, spec=resolved).first()
    per_task = (score.per_task if score else None) or {}
    task_names = dict(Task.objects.filter(slug__in=list(per_task)).values_list("slug", "name"))
    results = [TaskResult(slug, task_names.get(slug, slug), per_task[slug] or {}) for slug in sorted(per_task)]
    leakage = list(
        LeakageRecord.objects.filter(probe=probe, status=LeakageRecord.Status.CONFIRMED)
        .select_related("probe_version")
        .order_by("-reviewed_at", "-created_at")
    )
    history = list(
        CycleResult.objects.filter(probe_version__in=versions)
        .select_related("cycle", "probe_version")
        .order_by("cycle__quarter", "probe_version__number")
    )
    measurements = (score.measurements if score else None) or {}
    transfer_raw = measurements.get("transfer") or {}
    model_names = dict(BaseModel.objects.values_list("slug", "name"))
    transfer = [
        {"model": target, "name": model_names.get(target, target), "pearson": value}
        for target, value in sorted(transfer_raw.items())
    ]
    declared = []
    for metric, declared_value in sorted((chosen.declared_metrics or {}).items()):
        gap = (chosen.declared_gaps or {}).get(metric)
        declared.append(
            {
                "metric": metric,
                "declared": declared_value,
                "measured": gap["measured"] if gap else measurements.get(metric),
                "gap": gap["gap"] if gap else None,
                "flagged": gap is not None,
            }
        )
    return ProbeDetail(
        probe=probe,
        version=chosen,
        versions=versions,
        spec=resolved,
        specs=specs,
        score=score,
        scores=scores,
        results=results,
        leakage=leakage,
        history=history,
        transfer=transfer,
        declared=declared,
        model_names=model_names,
    )


def artifact_version_get(*, slug: str, number: int) -> ProbeVersion | None:
    """A publicly visible version (scored submission) whose artifact may be downloaded."""
    return (
        ProbeVersion.objects.filter(probe__slug=slug, number=number, submission__status=SCORED)
        .only("artifact_path", "artifact_sha256", "number", "probe__slug")
        .select_related("probe")
        .first()
    )


# --------------------------------------------------------------------------- methodology


def methodology() -> dict:
    specs = weights_spec_list()
    rows = [
        {
            "name": name,
            "label": COMPONENT_LABELS[name],
            "formula": COMPONENT_FORMULAS[name],
            "weights": [spec.weights.get(name) for spec in specs],
            "imputation": [spec.imputation.get(name) for spec in specs],
        }
        for name in COMPONENTS
    ]
    return {
        "specs": specs,
        "components": rows,
        "licenses": list(License.objects.order_by("-score", "spdx_id")),
        "policy": POLICY,
    }


# --------------------------------------------------------------------------- re-evaluations


def _public_results():
    return CycleResult.objects.filter(probe_version__submission__status=SCORED)


def reevaluation_list() -> list[ReevaluationCycle]:
    """Cycles, newest first, with their public results counted by outcome (one query)."""
    public = Q(results__probe_version__submission__status=SCORED)
    counts = {
        outcome: Count("results", filter=public & Q(results__outcome=outcome))
        for outcome in CycleResult.Outcome.values
    }
    cycles = list(
        ReevaluationCycle.objects.annotate(n_results=Count("results", filter=public), **{f"n_{k}": v for k, v in counts.items()})
        .order_by("-quarter")
    )
    for cycle in cycles:
        cycle.outcome_counts = {k: getattr(cycle, f"n_{k}") for k in CycleResult.Outcome.values}
    return cycles


def reevaluation_detail(*, quarter: str) -> tuple[ReevaluationCycle, list[CycleResult]] | None:
    cycle = ReevaluationCycle.objects.filter(quarter=quarter).first()
    if cycle is None:
        return None
    results = list(
        _public_results()
        .filter(cycle=cycle)
        .select_related("probe_version__probe__category", "probe_version__probe__base_model")
        .order_by("probe_version__probe__category__order", "probe_version__probe__slug", "probe_version__number")
    )
    return cycle, results


# --------------------------------------------------------------------------- leakage and queue


def leakage_public_list() -> list[LeakageRecord]:
    """Confirmed records, newest first; ``probe_public`` says whether the probe page exists."""
    public = ProbeVersion.objects.filter(probe_id=OuterRef("probe_id"), submission__status=SCORED)
    return list(
        LeakageRecord.objects.filter(status=LeakageRecord.Status.CONFIRMED)
        .select_related("probe__category", "probe_version")
        .annotate(probe_public=Exists(public))
        .order_by("-reviewed_at", "-created_at")
    )


@dataclass
class QueueEntry:
    id: int
    probe_name: str
    category: str
    base_model: str
    version: int
    status: str
    progress: float
    created_at: datetime
    age: timedelta

    @property
    def age_days(self) -> float:
        return self.age.total_seconds() / 86400

    @property
    def overdue(self) -> bool:
        return self.age > REVIEW_GOAL

    @property
    def goal_fraction(self) -> float:
        return min(self.age / REVIEW_GOAL, 1.0)


def submission_queue(*, now: datetime | None = None) -> list[QueueEntry]:
    """Open submissions, oldest first, with public fields only (no submitter, no failure reason)."""
    now = now or timezone.now()
    rows = (
        Submission.objects.filter(status__in=OPEN_STATUSES)
        .order_by("created_at", "pk")
        .values(
            "pk",
            "status",
            "progress",
            "created_at",
            "probe_version__number",
            "probe_version__probe__name",
            "probe_version__probe__category__name",
            "probe_version__probe__base_model_id",
        )
    )
    return [
        QueueEntry(
            id=r["pk"],
            probe_name=r["probe_version__probe__name"],
            category=r["probe_version__probe__category__name"],
            base_model=r["probe_version__probe__base_model_id"],
            version=r["probe_version__number"],
            status=r["status"],
            progress=r["progress"],
            created_at=r["created_at"],
            age=now - r["created_at"],
        )
        for r in rows
    ]
