"""Reads for the registry pages: categories, tasks, base models, and the methodology page."""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db.models import Count, Exists, OuterRef, Prefetch, Q

from evaluator.data.registry.load import load_registry
from evaluator.data.registry.saes import SaeSpec
from evaluator.data.registry.weights import COMPONENTS
from evaluator.data.split_groups import domains_present, named_domains_missing
from evaluator.errors import EvaluatorError
from leaderboard import runner
from leaderboard.models import (
    BaseModel,
    Category,
    License,
    Probe,
    ProbeVersion,
    Score,
    Task,
    TaskSplit,
    WeightsSpec,
)
from leaderboard.policy import SATURATED_AUROC, saturated
from leaderboard.presentation import COMPONENT_FORMULAS, COMPONENT_LABELS, POLICY
from leaderboard.selectors.board.get import board_get, category_tabs
from leaderboard.selectors.board.query import BoardQuery, weights_spec_list
from leaderboard.selectors.board.rows import Board, BoardRow, JsonPaths, board_rows, json_list, parse_ci

SPLIT_ORDER = ("train", "test", "distshift", "holdout_pool")

log = logging.getLogger(__name__)


def category_list() -> list[Category]:
    """The categories with ``n_tasks`` and ``n_probes`` (probes with a public version, from the
    cached category tabs)."""
    counts = {t["slug"]: t["count"] for t in category_tabs()}
    categories: list[Category] = list(Category.objects.annotate(n_tasks=Count("tasks")).order_by("order"))
    for c in categories:
        c.n_probes = counts.get(c.slug, 0)
    return categories


def category_named_domains_missing(*, category: str) -> list[str]:
    """The domains the methodology names (evaluator.data.split_groups.NAMED_DOMAINS) that no active
    task of ``category`` has test rows in, read from the pinned test split files (every base model's
    for an on-policy task). Each file is read once per process and pinned hash, so a page view reads
    none. Empty when no test split of the category names any domain (then nothing is known either
    way) or a file cannot be read (logged)."""
    splits = TaskSplit.objects.filter(
        task__category_id=category, task__status=Task.Status.ACTIVE, name=TaskSplit.Name.TEST
    ).values_list("path", "sha256")
    present: set[str] = set()
    for path, sha256 in splits:
        try:
            present |= domains_present(Path(settings.REGISTRY_ROOT) / path, sha256)
        except EvaluatorError as exc:
            log.warning("domains of %s not read: %s", path, exc)
            return []
    return named_domains_missing(present) if present else []


def task_list(*, category: str | None = None) -> list[Task]:
    qs = (
        Task.objects.select_related("category").prefetch_related("splits").order_by("category__order", "slug")
    )
    if category:
        qs = qs.filter(category_id=category)
    return list(qs)


def base_model_list() -> list[BaseModel]:
    public = ProbeVersion.objects.public().filter(probe_id=OuterRef("pk"))
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
    #: the probe's test AUROC minus the task's strongest text baseline on the same rows, and the
    #: lift's 95% interval
    lift_over_text: float | None = None
    lift_over_text_ci: list[float] | None = None


@dataclass
class TaskDetail:
    task: Task
    splits: list
    superseded: list[Task]
    spec: WeightsSpec | None
    probes: list[TaskProbe]
    #: (probes at or above SATURATED_AUROC here, probes with an AUROC here) when most are, else None
    saturated: tuple[int, int] | None = None
    #: the committed text-baseline panel as rows (task_text_baselines)
    text_baselines: list[dict] = field(default_factory=list)


def task_text_baselines(task: Task) -> list[dict]:
    """The task's text-baseline panel as table rows, one per (base model, member) (the model is ""
    for a task about its text): the member's test and distshift AUROC with intervals, its CV AUROC
    on train and chosen hyperparameters, and whether it is the strongest on test (the bar a probe's
    lift is measured over) or the one CV on train picks."""
    from evaluator.axes.text_baselines import chosen_by_cv, strongest

    panels = task.text_baselines or {}
    by_model = sorted(panels.items()) if task.on_policy else [("", panels)]
    rows = []
    for model, panel in by_model:
        if not isinstance(panel, dict) or not panel.get("members"):
            continue
        best, cv_pick = strongest(panel, "test"), chosen_by_cv(panel)
        for name, member in panel["members"].items():
            splits = member.get("splits") or {}
            rows.append(
                {
                    "model": model,
                    "member": name,
                    "test": splits.get("test") or {},
                    "distshift": splits.get("distshift") or {},
                    "cv_auroc": member.get("cv_auroc"),
                    "params": ", ".join(f"{k}={v}" for k, v in (member.get("params") or {}).items()),
                    "strongest": name == best,
                    "by_cv": name == cv_pick,
                }
            )
    return rows


def _saturation(aurocs: list[float]) -> tuple[int, int] | None:
    high = sum(a >= SATURATED_AUROC for a in aurocs)
    return (high, len(aurocs)) if saturated(high, len(aurocs)) else None


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
        scores = (
            Score.objects.on_board(
                spec=spec,
                filters=Q(
                    probe_version__probe__category_id=task.category_id
                ),  # probes run on their category's tasks
            )
            .annotate(
                result=JsonPaths(
                    "per_task",
                    [
                        (slug, "auroc"),
                        (slug, "auroc_ci"),
                        (slug, "lift_over_text"),
                        (slug, "lift_over_text_ci"),
                    ],
                    large=True,
                )
            )
            .values_list("probe_version__probe__slug", "result")
        )
        found = {probe: json_list(raw, 4) for probe, raw in scores}
        ran = {probe: v for probe, v in found.items() if v[0] is not None or v[1] is not None}
        rows = board_rows(spec=spec, query=BoardQuery(), slugs=list(ran))
        for row in rows:
            auroc, ci, lift, lift_ci = ran[row.probe]
            probes.append(
                TaskProbe(
                    row=row,
                    auroc=float(auroc) if auroc is not None else None,
                    auroc_ci=parse_ci(ci),
                    lift_over_text=float(lift) if lift is not None else None,
                    lift_over_text_ci=parse_ci(lift_ci),
                )
            )
        probes.sort(key=lambda p: (p.auroc is not None, p.auroc or 0.0), reverse=True)
    order = {name: i for i, name in enumerate(SPLIT_ORDER)}
    splits = sorted(task.splits.all(), key=lambda s: (s.base_model_id or "", order.get(s.name, 99)))
    return TaskDetail(
        task=task,
        splits=splits,
        superseded=list(task.task_set.all()),
        spec=spec,
        probes=probes,
        text_baselines=task_text_baselines(task),
        saturated=_saturation([p.auroc for p in probes if p.auroc is not None]),
    )


@dataclass(frozen=True)
class SaeCard:
    """A registered SAE of a base model (registry/saes.yaml) and its card, the ``card.json``
    beside its weights (None until measured: ``python -m evaluator sae-card --sae ID --write``)."""

    spec: SaeSpec
    card: dict | None

    @property
    def loss(self) -> dict:
        return (self.card or {}).get("loss") or {}


def model_saes(slug: str) -> list[SaeCard]:
    """The registered SAEs of base model ``slug``, by layer, each with its card."""
    reg = runner.registry()  # parsed once per process, reloaded when the registry's files change
    cards = []
    for spec in sorted(reg.saes.saes.values(), key=lambda s: (s.layer, s.id)):
        if spec.model != slug:
            continue
        path = spec.directory(reg.root) / "card.json"
        cards.append(SaeCard(spec=spec, card=json.loads(path.read_text()) if path.is_file() else None))
    return cards


@dataclass
class ModelDetail:
    model: BaseModel
    board: Board
    by_category: list[tuple[str, int]]
    saes: list[SaeCard] = field(default_factory=list)


def base_model_detail(*, slug: str) -> ModelDetail | None:
    model = BaseModel.objects.filter(slug=slug).first()
    if model is None:
        return None
    board = board_get(query=BoardQuery(model=slug), values=True)
    counts = Counter(row.category for row in board.rows)
    return ModelDetail(model=model, board=board, by_category=sorted(counts.items()), saes=model_saes(slug))


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
        # the tolerances and settings are the protocol file's, never written in the template
        "protocol": load_registry(settings.REGISTRY_ROOT).protocol(),
    }
