"""Reads for the probe page: one probe's versions, Scores, per-task results, history."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Prefetch

from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.metrics import metric_table
from evaluator.metrics.breakdown import MIN_ROWS_PER_CLASS
from evaluator.metrics.in_domain import IN_DOMAIN_TASKS_KEY, SIDES, SPLIT_METRICS
from evaluator.metrics.records import TaskRecord
from leaderboard.models import (
    BaseModel,
    CycleResult,
    LeakageRecord,
    Probe,
    ProbeVersion,
    Score,
    Task,
    WeightsSpec,
)
from leaderboard.policy import STABILITY_MIN_QUARTERS, spec_version_key
from leaderboard.selectors.board.query import resolve_spec, weights_spec_list
from leaderboard.selectors.board.rows import parse_ci
from leaderboard.selectors.progress import pending_axes
from leaderboard.selectors.shared import ea_reference_version, tasks_applicable


@dataclass
class TaskResult:
    task: str
    task_name: str
    result: dict  # normalized by task_result_normalize

    @property
    def auroc_ci(self):
        return parse_ci(self.result.get("auroc_ci"))


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def task_result_normalize(raw: dict) -> dict:
    """One task's stored results in the shape the pages and the API show, read through the one
    record of a stored task result (``evaluator.metrics.records.TaskRecord.from_json``, which also reads
    the evaluator's spellings)."""
    record = TaskRecord.from_json(raw)
    m = record.metrics
    baselines = {
        "random_direction": _number(record.random_direction),
        "diff_of_means": _number(record.diff_of_means),
    }
    lift = {
        "random_direction": _number(record.lift_random_direction),
        "diff_of_means": _number(record.lift_diff_of_means),
    }
    return {
        "auroc": _number(m.auroc),
        "auroc_ci": parse_ci(m.auroc_ci),
        "auroc_ea": _number(m.auroc_ea),
        "auroc_ea_imputed": m.auroc_ea_status == "imputed",
        "auroc_ea_na": m.auroc_ea_status == "n/a",
        "auroc_ds": _number(m.auroc_ds),
        "auroc_ds_imputed": m.auroc_ds_imputed,
        "ece": _number(m.ece),
        "brier": _number(m.brier),
        "recall_at_1pct_fpr": _number(m.recall_at_1pct_fpr),
        "lift_over_text": _number(record.lift_over_text),
        "lift_over_text_ci": parse_ci(record.lift_over_text_ci),
        "text_baseline": record.text_baseline,
        "controlled_auroc": _number(record.controlled_auroc),
        "controlled_auroc_ci": parse_ci(record.controlled_auroc_ci),
        "text_baseline_auroc": _number(record.text_baseline_auroc),
        "threshold_1pct_fpr": _number(m.threshold_1pct_fpr),
        "fpr_at_1pct_threshold": _number(m.fpr_at_1pct_threshold),
        "n_test": m.n_test,
        "roc": [list(point) for point in m.roc_points],
        "reliability": m.reliability,
        "baselines": {k: v for k, v in baselines.items() if v is not None},
        "lift": {k: v for k, v in lift.items() if v is not None},
        "in_domain": record.in_domain,
        "by_domain": _groups_shown(record.by_domain),
        "by_source": _groups_shown(record.by_source),
    }


def _groups_shown(groups: dict) -> list[dict]:
    """A task's breakdown (``TaskRecord.by_domain`` / ``by_source``) as rows: ``group`` first, then
    the stored fields (evaluator.metrics.breakdown.GroupResult), in the stored (sorted) order."""
    return [{"group": group, **result.to_json()} for group, result in groups.items()]


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
    #: the active tasks of its category this version cannot read: {task: why} (never planned)
    not_applicable: dict[str, str] = field(default_factory=dict)
    #: its axes still being measured (selectors.progress): [PendingAxis]
    pending_axes: list = field(default_factory=list)
    #: the eval-awareness reference its auroc_ea is measured against (ea_reference_summary); read
    #: only when asked for (the probe API)
    ea_reference: dict | None = None

    @property
    def published_by(self) -> dict | None:
        """Where the shown version was first measured when it came in a bundle (None: measured
        here): the publishing board, its key's fingerprint, when and at which commit it was
        written, and how far this board's replication has got (services.replication): until a
        run is replicated, the numbers shown for it are recomputed from the per-example scores
        the bundle published, not measured on this board's models."""
        bundle = self.version.bundle
        if bundle is None:
            return None
        replication = self.version.replication or {}
        return {
            "bundle": bundle.id,
            "board": bundle.board,
            "signer_fingerprint": bundle.signer_fingerprint,
            "created_at": bundle.created_at,
            "commit": bundle.commit,
            "replication": replication.get("state", "not started"),
            "replicated_here": replication.get("state") == "replicated",
            "runs_published": replication.get("runs_published"),
            "runs_compared": replication.get("runs_compared", 0),
            "max_abs_diff": replication.get("max_abs_diff"),
            "max_abs_diff_text": (
                f"{replication['max_abs_diff']:.2g}" if replication.get("max_abs_diff") is not None else "n/a"
            ),
            "differs": replication.get("differs", []),
            "not_compared": replication.get("not_compared", []),
        }

    @property
    def receipts(self) -> dict:
        """Who replicated the shown version elsewhere from a bundle this board published, each
        with the receipt as signed (verifiable offline with the replicator's key): the counts that
        agree and that differ, and the receipts, newest first."""
        rows = [
            {
                "replicator_fingerprint": r.replicator_fingerprint,
                "replicator_public_key": r.replicator_public_key,
                "submitter": r.submitter.username,
                "verdict": r.verdict,
                "runs_compared": r.runs_compared,
                "max_abs_diff": r.max_abs_diff,
                "created_at": r.created_at,
                "bundle": r.bundle_id,
                "receipt": r.receipt,
                "signature": r.signature,
            }
            for r in self.version.receipts.select_related("submitter").order_by("-created_at", "pk")
        ]
        agree = sum(r["verdict"] == "agrees" for r in rows)
        return {"count": len(rows), "agree": agree, "differ": len(rows) - agree, "receipts": rows}

    @property
    def domains(self) -> dict:
        """The in-domain / cross-domain split of the shown Score (evaluator.metrics.in_domain): its
        state (``split``; ``not_declared``: the version names no training task; ``not_computed``:
        scored before the split, a rescore fills it), the tasks counted in-domain, and a row per
        split metric with both sides and the all-task mean, each value with its interval."""
        m = (self.score.measurements if self.score is not None else None) or {}
        if IN_DOMAIN_TASKS_KEY not in m:
            state = "not_computed"
        else:
            state = "not_declared" if m[IN_DOMAIN_TASKS_KEY] is None else "split"
        rows = []
        for name in SPLIT_METRICS:
            cells = [(f"{name}_{side}", metric_table.metric(f"{name}_{side}")) for side in SIDES]
            rows.append(
                {
                    "label": metric_table.metric(name).label,
                    "definition": metric_table.metric(name).definition,
                    "cells": [
                        {"value": _number(m.get(key)), "ci": parse_ci(m.get(f"{key}_ci")), "fmt": row.fmt}
                        for key, row in cells
                    ],
                    "all": {"value": _number(m.get(name)), "ci": parse_ci(m.get(f"{name}_ci"))},
                }
            )
        return {"state": state, "tasks": m.get(IN_DOMAIN_TASKS_KEY) or [], "rows": rows}

    @property
    def version_numbers(self) -> list[int]:
        return [v.number for v in self.versions]

    @property
    def ea_not_applicable(self) -> bool:
        return self.probe.category_id == EVAL_AWARENESS

    @property
    def breakdown_min_rows(self) -> int:
        """The rows of each class a group of the breakdown by domain or source needs to be shown."""
        return MIN_ROWS_PER_CLASS

    @property
    def stable(self) -> bool:
        return self.probe.stability_quarters >= STABILITY_MIN_QUARTERS

    @property
    def declared_mismatch(self) -> bool:
        return any(d["flagged"] for d in self.declared)

    @property
    def measured_on(self) -> str:
        """Where the shown Score was measured ("cpu (AMD EPYC, AVX512, 2 threads) · float32 ·
        torch …"): the environment its test runs recorded, without the protocol id."""
        from evaluator.core.environment import environment_label

        env = dict(self.score.environment) if self.score is not None else {}
        if not env:
            return ""
        return environment_label(env).split(" · ", 1)[-1]


def ea_reference_summary(*, probe: Probe) -> dict | None:
    """The eval-awareness reference probe the probe's auroc_ea is measured against, as the public
    API names it (what ``python -m evaluator reproduce`` downloads); None for eval-awareness probes
    and for a base model without one."""
    if probe.category_id == EVAL_AWARENESS:
        return None
    ref = ea_reference_version(base_model=probe.base_model_id)
    if ref is None:
        return None
    return {"probe": ref.probe.slug, "version": ref.number, "artifact_sha256": ref.artifact_sha256}


def probe_detail(
    *, slug: str, spec: str | None = None, version: int | None = None, ea_reference: bool = False
) -> ProbeDetail | None:
    """A probe with a public version: its metadata, scores, per-task results, history and records
    (with ``ea_reference``, the eval-awareness reference it is measured against). None when the
    probe does not exist or has no scored version. Raises BoardQueryError on an unknown spec."""
    probe = (
        Probe.objects.select_related("category", "base_model", "owner")
        .prefetch_related(
            Prefetch(
                "versions",
                queryset=ProbeVersion.objects.public()
                .select_related("submission", "license", "bundle")
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
    resolved = resolve_spec(specs, spec, param="spec")
    scores = list(Score.objects.filter(probe_version=chosen).select_related("spec").defer("per_task"))
    scores.sort(key=lambda s: spec_version_key(s.spec_id))
    score = Score.objects.filter(probe_version=chosen, spec=resolved).first()
    per_task = (score.per_task if score else None) or {}
    task_names = dict(Task.objects.filter(slug__in=list(per_task)).values_list("slug", "name"))
    results = [
        TaskResult(slug, task_names.get(slug, slug), task_result_normalize(per_task[slug]))
        for slug in sorted(per_task)
    ]
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
        gap = gap if isinstance(gap, dict) else None
        measured = gap.get("measured") if gap else measurements.get(metric)
        declared.append(
            {
                "metric": metric,
                "declared": declared_value,
                "measured": measured if not isinstance(measured, dict) else None,
                "gap": gap.get("gap") if gap else None,
                "flagged": bool(gap and gap.get("flagged", True)),
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
        not_applicable=dict(sorted(tasks_applicable(version=chosen)[1].items())),
        pending_axes=pending_axes(version_ids=[chosen.pk]).get(chosen.pk, []),
        ea_reference=ea_reference_summary(probe=probe) if ea_reference else None,
    )


def artifact_version_get(*, slug: str, number: int) -> ProbeVersion | None:
    """A publicly visible version (scored submission) whose artifact may be downloaded."""
    return (
        ProbeVersion.objects.public()
        .filter(probe__slug=slug, number=number)
        .only("artifact_path", "artifact_sha256", "number", "probe__slug")
        .select_related("probe")
        .first()
    )
