"""Mirror the registry files into the database (``python manage.py sync_registry``).

Idempotent: a second run with unchanged files changes nothing and reports zero changes. Rows that
disappeared from the files are never deleted (runs and scores point at them); a task removed from
tasks.yaml is a registry error to fix in the file, not something to delete silently.

Supersession: a refreshed task names the task it replaces with ``supersedes: old-id``.
The sync records the pair at once (``old.superseded_by = new``, old still active: the two run side
by side); the first re-evaluation cycle that runs both marks the old one superseded in the
database. The sync never re-activates a task that a cycle superseded while tasks.yaml still
declares the pair; it reports that the file lags behind (``status: superseded`` makes it agree).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction

from evaluator.data.registry.load import Registry, load_registry
from leaderboard.models import BaseModel, Category, License, Task, TaskSplit, WeightsSpec


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    #: things the maintainer should know that are not changes (e.g. tasks.yaml lagging a cycle)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return len(self.created) + len(self.updated)


def _upsert(model, report: SyncReport, label: str, lookup: dict, values: dict):
    obj = model.objects.filter(**lookup).first()
    if obj is None:
        obj = model.objects.create(**lookup, **values)
        report.created.append(label)
        return obj
    changed = [k for k, v in values.items() if getattr(obj, k) != v]
    if changed:
        for k in changed:
            setattr(obj, k, values[k])
        obj.save(update_fields=changed)
        report.updated.append(f"{label} ({', '.join(changed)})")
    return obj


def registry_load(*, verify_hashes: bool = False) -> Registry:
    return load_registry(settings.REGISTRY_ROOT, verify_hashes=verify_hashes)


@transaction.atomic
def _panel_summaries(reg: Registry, task) -> dict:
    """What the task keeps of its committed text-baseline panels: each file without its per-row
    scores, with its hash (per base model for an on-policy task). A pinned file that is missing or
    changed stops the sync (evaluator.axes.text_baselines.read_panel)."""
    from evaluator.axes.text_baselines import read_panel, summary

    out = {
        model: summary(read_panel(reg.root, task.id, model or None, sha), sha256=sha)
        for model, sha in task.text_panel.items()
    }
    return out if task.on_policy else out.get("", {})


def registry_sync(*, registry: Registry | None = None, verify_hashes: bool = True) -> SyncReport:
    reg = registry or registry_load(verify_hashes=verify_hashes)
    report = SyncReport()
    for order, cat in enumerate(reg.categories.values()):
        _upsert(
            Category,
            report,
            f"category {cat.id}",
            {"slug": cat.id},
            {"name": cat.name, "description": cat.description, "order": order},
        )
    for lic in reg.licenses.values():
        _upsert(
            License, report, f"license {lic.id}", {"spdx_id": lic.id}, {"name": lic.name, "score": lic.score}
        )
    for spec in reg.specs.values():
        _upsert(
            WeightsSpec,
            report,
            f"weights spec {spec.version}",
            {"version": spec.version},
            {
                "released": spec.released,
                "description": spec.description.strip(),
                "weights": spec.weights,
                "imputation": spec.imputation,
                "imputation_rules": spec.imputation_rules,
                "sha256": spec.sha256,
            },
        )
    for m in reg.models.values():
        _upsert(
            BaseModel,
            report,
            f"model {m.id}",
            {"slug": m.id},
            {
                "name": m.name,
                "family": m.family,
                "architecture": m.architecture,
                "n_layers": m.n_layers,
                "d_model": m.d_model,
                "weights_license": m.license,
                "weights_sha256": m.weights_sha256,
                "package": m.package,
                "package_version": m.package_version,
                # a model loaded on request runs only where the deployment names it; the others
                # keep whatever a maintainer set
                **({"is_active": m.id in settings.ENABLED_MODELS} if m.on_request else {}),
            },
        )
    # Two passes: superseded_by may point at a task defined later in the file.
    replaced_by = {t.supersedes: t.id for t in reg.tasks.values() if t.supersedes}
    superseded_in_db = set(Task.objects.filter(status=Task.Status.SUPERSEDED).values_list("slug", flat=True))
    for t in reg.tasks.values():
        status = t.status
        if status == "active" and t.id in replaced_by and t.id in superseded_in_db:
            status = Task.Status.SUPERSEDED  # a completed cycle retired it; the file lags behind
            report.notes.append(
                f"task {t.id} was superseded by {replaced_by[t.id]} in a re-evaluation cycle; tasks.yaml still"
                f" says active (set status: superseded, superseded_by: {replaced_by[t.id]} to match)"
            )
        card_path = Path(reg.root) / t.card if t.card else None
        card = card_path.read_text(encoding="utf-8") if card_path and card_path.is_file() else ""
        _upsert(
            Task,
            report,
            f"task {t.id}",
            {"slug": t.id},
            {
                "category_id": t.category,
                "family": t.family,
                "name": t.name,
                "description": t.description,
                "positive": t.positive,
                "negative": t.negative,
                "source": t.source,
                "templates": t.templates,
                "card": card,
                "caveats": t.caveats,
                "status": status,
                "minted": t.minted,
                "on_policy": t.on_policy,
                "text_baselines": _panel_summaries(reg, t),
            },
        )
        for s in t.splits.values():
            _upsert(
                TaskSplit,
                report,
                f"split {t.id}/{s.name}",
                {"task_id": t.id, "name": s.name, "base_model": None},
                {"path": s.path, "rows": s.rows, "sha256": s.sha256},
            )
        # an on-policy task: one set of files per base model (its own behaviour)
        for model_id, splits in t.splits_by_model.items():
            for s in splits.values():
                _upsert(
                    TaskSplit,
                    report,
                    f"split {t.id}/{model_id}/{s.name}",
                    {"task_id": t.id, "name": s.name, "base_model_id": model_id},
                    {"path": s.path, "rows": s.rows, "sha256": s.sha256},
                )
    for t in reg.tasks.values():
        _upsert(
            Task,
            report,
            f"task {t.id}",
            {"slug": t.id},
            {"superseded_by_id": t.superseded_by or replaced_by.get(t.id)},
        )
    return report
