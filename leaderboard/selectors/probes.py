"""Reads for the probe page: one probe's versions, Scores, per-task results, history."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Prefetch

from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.data.registry.weights import COMPONENTS
from evaluator.metrics import metric_table
from evaluator.metrics.breakdown import MIN_ROWS_PER_CLASS
from evaluator.metrics.in_domain import IN_DOMAIN_TASKS_KEY, SIDES, SPLIT_METRICS
from evaluator.metrics.records import TaskRecord
from leaderboard.axes import axes_enabled, axis
from leaderboard.axes.sae import KIND as SAE_AXIS
from leaderboard.axes.sae import SAE_KIND
from leaderboard.models import (
    BaseModel,
    CycleResult,
    EvaluationRun,
    LeakageRecord,
    Probe,
    ProbeVersion,
    Score,
    Task,
    WeightsSpec,
)
from leaderboard.policy import STABILITY_MIN_QUARTERS, spec_version_key
from leaderboard.presentation import COMPONENT_LABELS
from leaderboard.selectors.board.query import resolve_spec, weights_spec_list
from leaderboard.selectors.board.rows import parse_ci
from leaderboard.selectors.progress import AxisState, axis_of_column, axis_states
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
    #: each of its shown axes and where its runs stand (selectors.progress.axis_states)
    axes: dict[str, AxisState] = field(default_factory=dict)
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
    def sae(self) -> dict | None:
        """An SAE-feature probe beside its baselines (leaderboard.axes.sae), None for another kind:
        per task (in-domain first) the probe's, the same-k neuron probe's and the dense probe's
        AUROC on the same test rows with their intervals and the paired intervals of the
        differences; the neuron and dense fits (C, cross-validated AUROC); the feature cards of its
        latents; and, while that shows nothing, what its section says instead."""
        if self.version.kind != SAE_KIND:
            return None
        runs = EvaluationRun.objects.filter(
            probe_version=self.version,
            kind=SAE_AXIS,
            cycle__isnull=True,
            status=EvaluationRun.Status.SUCCEEDED,
        ).order_by("pk")
        tasks: list[dict] = []
        head: dict = {}
        for run in runs:
            measured = run.metrics.get("sae") or {}
            tasks += measured.get("tasks") or []
            if not head or measured.get("features"):
                head = measured
        tasks.sort(key=lambda t: (not t.get("in_domain"), t.get("task_id")))
        note = self._axis_unmeasured_text(
            SAE_AXIS,
            not_applicable="n/a: no baseline (the probe names no single registry task it was trained on)",
            empty="not measured: its SAE runs gave no result",
        )
        return {
            "sae_id": head.get("sae_id"),
            "k": head.get("k"),
            "train_task": head.get("train_task"),
            "neurons": head.get("neurons"),
            "dense": head.get("dense"),
            "tasks": tasks,
            "features": head.get("features") or [],
            "note": "" if tasks else note,
        }

    def _axis(self, kind: str) -> AxisState:
        return self.axes.get(kind) or AxisState(kind)

    def _axis_pending_text(self, kind: str) -> str:
        state = self._axis(kind)
        return (
            f"pending: its {kind} runs are queued or running ({state.done} of {state.total} finished);"
            " this fills in once they have"
        )

    def _axis_unmeasured_text(self, kind: str, *, not_applicable: str, empty: str) -> str:
        """What a section of ``kind`` says while it shows no number: pending while its runs are
        queued or running; why not once they failed or gave none; ``not_applicable`` only when no
        run was planned because the axis does not apply (an axis turned off on this board says so)."""
        state = self._axis(kind)
        if state.pending:
            return self._axis_pending_text(kind)
        if state.all_failed:
            return f"not measured: its {kind} run{'s' if state.total > 1 else ''} failed"
        if state.planned:
            return empty
        if kind not in {a.name for a in axes_enabled()}:
            return f"not measured: this board does not run the {axis(kind).label.lower()} axis"
        return not_applicable

    @property
    def section_notes(self) -> dict[str, str]:
        """What each axis's section of the probe page says while it holds no number: one true
        statement (pending, failed, or why it does not apply), from the axis's runs."""
        return {
            "steer": self._axis_unmeasured_text(
                "steer",
                not_applicable="n/a: not measured (direction utility needs a linear probe on a decoder model"
                " and a task with a behavioural readout)",
                empty="not measured: no task's behavioural readout was read on this model",
            ),
            "stress": self._axis_unmeasured_text(
                "stress",
                not_applicable="n/a: not measured (no task of this probe has a stress split, e.g. only"
                " on-policy tasks)",
                empty="not measured: its stress runs gave no result",
            ),
            "robustness": self._axis_unmeasured_text(
                "robustness",
                not_applicable="n/a: not measured (under protocol p1, a contrast-pair probe or an encoder"
                " base model, which the suffix attack does not apply to)",
                empty="not measured: its robustness runs gave no result",
            ),
            "transfer": self._axis_unmeasured_text(
                "transfer",
                not_applicable="No transfer measured: the probe has no recipe, so it cannot be re-fit on"
                " other models (the transfer component takes its default, marked imputed)"
                if not self.version.recipe
                else "No transfer measured: its recipe cannot be re-fit on another base model (the"
                " transfer component takes its default, marked imputed)",
                empty="No transfer measured",
            ),
        }

    @property
    def reproduction_run_failed(self) -> bool:
        """The recipe's re-run failed (its error is all the version records): not a recipe that
        did not reproduce."""
        r = self.version.reproduction
        return isinstance(r, dict) and "error" in r and "reproduced" not in r

    @property
    def reproduction_text(self) -> str:
        """The reproduction's state in words: reproduced, did not reproduce, pending while its run is
        queued or running, not run (no recipe) only when there is no recipe, else why not."""
        if self.reproduction_run_failed:
            return "not run: its run failed"
        if self.version.reproduced is not None:
            return "reproduced" if self.version.reproduced else "did not reproduce"
        state = self._axis("reproduce")
        if state.pending:
            return "pending: its run is queued or running"
        if not self.version.recipe:
            return "not run (no recipe)"
        if state.all_failed:
            return "not run: its run failed"
        if state.planned:
            return "not run"
        if "reproduce" not in {a.name for a in axes_enabled()}:
            return "not run: this board does not re-run recipes"
        return "not run: the recipe cannot be re-run on this base model"

    @property
    def components(self) -> list[dict]:
        """The shown Score's components as the probe page lists them: name, label, the stored
        component (``c``), whether the axis that would measure an imputed one is still running
        (``pending``) and the note: why it is imputed, from the axis's own reason (the Score's
        measurements), pending while its runs are queued or running."""
        if self.score is None:
            return []
        stored = self.score.components or {}
        reasons = (self.score.measurements or {}).get("imputed") or {}
        rows = []
        for name in COMPONENTS:
            c = stored.get(name) or {}
            kind = axis_of_column(name)
            pending = bool(c.get("imputed")) and kind is not None and self._axis(kind).pending
            note, reason = c.get("note") or "", reasons.get(name) or ""
            if pending and not (reason.startswith("pending") and reason in note):
                # its own reason ("pending: transfer to … not measured yet"), not the default's
                note = reason if reason.startswith("pending") else self._axis_pending_text(str(kind))
            elif c.get("imputed") and reason.startswith("pending"):
                # stored while its runs were open; they have finished since, the rescore follows
                note = f"{note}: its runs have finished, the score is recomputed from them"
            elif c.get("imputed") and reason and reason not in note:
                note = f"{note}: {reason}" if note else reason
            rows.append(
                {
                    "name": name,
                    "label": COMPONENT_LABELS[name],
                    "c": stored.get(name),
                    "pending": pending,
                    "note": note,
                }
            )
        return rows

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


def _transfer_state(state: AxisState, model: str) -> str:
    """Where the transfer to ``model`` stands while no Pearson is stored for it: pending (its run
    queued or running), failed, or not measured."""
    if model in state.open_models:
        return "pending"
    if model in state.failed_models:
        return "failed"
    return "not measured"


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
    states = axis_states(version_id=chosen.pk)
    transfer = [
        {
            "model": target,
            "name": model_names.get(target, target),
            "pearson": value,
            "state": _transfer_state(states["transfer"], target) if value is None else "measured",
        }
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
        pending_axes=[state.progress for state in states.values() if state.pending],
        axes=states,
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
