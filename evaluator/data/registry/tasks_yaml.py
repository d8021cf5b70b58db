"""Read and validate tasks.yaml: the categories and every task (splits, readout, structured
baseline, stress split, text panel, supersessions)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from evaluator.data.registry.files import SHA256, read_yaml, require
from evaluator.data.registry.tasks import (
    CATEGORIES,
    FORBIDDEN_FEATURE_FIELDS,
    READOUT_JUDGES,
    REQUIRED_SPLITS,
    SPLIT_NAMES,
    STRUCTURED_KINDS,
    TASK_STATUSES,
    Category,
    ReadoutSpec,
    SplitSpec,
    StructuredEntity,
    StructuredFeature,
    TaskSpec,
)
from evaluator.errors import RegistryError, UnknownNameError

_TASK_ID = re.compile(r"^[a-z0-9][a-z0-9-]*-v[0-9]+$")
_FEATURE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def load_categories(data: dict, where: str) -> dict[str, Category]:
    out: dict[str, Category] = {}
    for i, entry in enumerate(data.get("categories") or []):
        require(entry, ("id", "name"), f"{where}: categories[{i}]")
        if entry["id"] not in CATEGORIES:
            raise UnknownNameError("category", entry["id"], list(CATEGORIES))
        out[entry["id"]] = Category(entry["id"], entry["name"], entry.get("description", ""))
    missing = [c for c in CATEGORIES if c not in out]
    if missing:
        raise RegistryError(f"{where}: categories missing: {', '.join(missing)}")
    return out


def _load_split(task_id: str, name: str, entry: dict, where: str) -> SplitSpec:
    require(entry, ("path", "rows", "sha256"), f"{where}: task {task_id} split {name}")
    sha = str(entry["sha256"])
    if not SHA256.match(sha):
        raise RegistryError(
            f"{where}: task {task_id} split {name}: sha256 must be 64 lowercase hex characters,"
            f" got {len(sha)} characters ({sha!r})"
        )
    rows = entry["rows"]
    if not isinstance(rows, int) or rows <= 0:
        raise RegistryError(f"{where}: task {task_id} split {name}: rows must be a positive int")
    return SplitSpec(name=name, path=str(entry["path"]), rows=rows, sha256=sha)


def _readout_openings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise RegistryError(f"{where} must be a non-empty list of non-empty strings")
    return tuple(value)


def _load_readout(entry: dict, where: str) -> tuple[ReadoutSpec | None, str]:
    """``readout: {template, positive, negative}``, or ``readout: null`` with ``readout_reason``.
    A task that says nothing has no readout ("" reason: n/a, tasks.yaml declares none)."""
    if "readout" not in entry:
        return None, ""
    data = entry["readout"]
    if data is None:
        reason = entry.get("readout_reason")
        if not isinstance(reason, str) or not reason.strip():
            raise RegistryError(f"{where}: readout: null needs a readout_reason (why there is none)")
        return None, reason.strip()
    if not isinstance(data, dict):
        raise RegistryError(f"{where}: readout must be a mapping (template, positive, negative) or null")
    require(data, ("template", "positive", "negative"), f"{where} readout")
    unknown = sorted(set(data) - {"template", "positive", "negative", "instruction", "generated"})
    if unknown:
        raise RegistryError(f"{where}: readout: unknown key(s) {', '.join(unknown)}")
    template = data["template"]
    templates = template.values() if isinstance(template, dict) else [template]
    if isinstance(template, dict) and not template:
        raise RegistryError(f"{where}: readout.template: an empty mapping of model families")
    if not all(isinstance(t, str) and "{text}" in t for t in templates):
        raise RegistryError(f"{where}: readout.template must contain {{text}} (per family when a mapping)")
    positive = _readout_openings(data["positive"], f"{where}: readout.positive")
    negative = _readout_openings(data["negative"], f"{where}: readout.negative")
    if set(positive) & set(negative):
        raise RegistryError(f"{where}: readout.positive and readout.negative share an opening")
    if entry.get("readout_reason"):
        raise RegistryError(f"{where}: readout_reason is only for readout: null")
    instruction = data.get("instruction") or {}
    if not isinstance(instruction, dict) or set(instruction) - {"text", "before"}:
        raise RegistryError(f"{where}: readout.instruction must be a mapping of text (and before)")
    if instruction and not (isinstance(instruction.get("text"), str) and instruction["text"].strip()):
        raise RegistryError(f"{where}: readout.instruction.text must be a non-empty string")
    if not isinstance(instruction.get("before", ""), str):
        raise RegistryError(f"{where}: readout.instruction.before must be a string")
    generated = data.get("generated") or ""
    if generated not in ("", *READOUT_JUDGES):
        raise RegistryError(
            f"{where}: readout.generated {generated!r} is not a judge; accepted: {', '.join(READOUT_JUDGES)}"
        )
    return ReadoutSpec(
        template=dict(template) if isinstance(template, dict) else template,
        positive=positive,
        negative=negative,
        instruction=str(instruction.get("text", "")),
        instruction_before=str(instruction.get("before", "")),
        generated=str(generated),
    ), ""


def _load_read(item: Any, at: str, *, what: str) -> tuple[str, str, str]:
    """The (name, pattern, field) of one ``structured_baseline`` feature or entity: a pattern is a
    regular expression with a named group called ``name``; a field names a key of each row's
    ``meta`` that is a fact about the input (never FORBIDDEN_FEATURE_FIELDS)."""
    name = item["name"]
    if not isinstance(name, str) or not _FEATURE_NAME.match(name):
        raise RegistryError(
            f"{at}.name must be lowercase letters, digits and _ (a letter first), got {name!r}"
        )
    if ("pattern" in item) == ("field" in item):
        raise RegistryError(f"{at}: give exactly one of pattern (read from the text) or field (row meta)")
    if "field" in item:
        fld = item["field"]
        if not isinstance(fld, str) or not _FEATURE_NAME.match(fld):
            raise RegistryError(
                f"{at}.field must be a meta key (lowercase letters, digits and _), got {fld!r}"
            )
        if FORBIDDEN_FEATURE_FIELDS.search(fld):
            raise RegistryError(
                f"{at}.field {fld!r} reads what the base model did or the label; a structured"
                f" {what} may only read facts about the input"
            )
        return name, "", fld
    pattern = item["pattern"]
    if not isinstance(pattern, str):
        raise RegistryError(f"{at}.pattern must be a string (a regular expression)")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise RegistryError(f"{at}.pattern is not a valid regular expression: {exc}") from None
    if name not in compiled.groupindex:
        raise RegistryError(f"{at}.pattern needs a named group (?P<{name}>...) for {what} {name!r}")
    return name, pattern, ""


def _load_structured_baseline(
    entry: dict, where: str
) -> tuple[tuple[StructuredFeature, ...], tuple[StructuredEntity, ...]]:
    """``structured_baseline: {features: [{name, kind, pattern | field}, ...], entities: [{name,
    pattern | field}, ...]}``, each list optional but not both absent. A feature's kind is one of
    STRUCTURED_KINDS; an entity is a string the row names (a city, a country) that the panel's
    ``entity_embed`` member embeds with the sentence encoder (evaluator.axes.text_panel)."""
    if "structured_baseline" not in entry:
        return (), ()
    data = entry["structured_baseline"]
    key = "structured_baseline"
    if not isinstance(data, dict):
        raise RegistryError(f"{where}: {key} must be a mapping with a features list and/or an entities list")
    unknown = sorted(set(data) - {"features", "entities"})
    if unknown:
        raise RegistryError(
            f"{where}: {key}: unknown key(s) {', '.join(map(str, unknown))}; accepted: features, entities"
        )
    if not data.get("features") and not data.get("entities"):
        raise RegistryError(f"{where}: {key} needs a non-empty features list or entities list (or both)")
    features = data.get("features", [])
    if not isinstance(features, list):
        raise RegistryError(f"{where}: {key}.features must be a list of {{name, kind, pattern or field}}")
    entities = data.get("entities", [])
    if not isinstance(entities, list):
        raise RegistryError(f"{where}: {key}.entities must be a list of {{name, pattern or field}}")
    out: list[StructuredFeature] = []
    for i, feature in enumerate(features):
        at = f"{where}: {key}.features[{i}]"
        require(feature, ("name", "kind"), at)
        extra = sorted(set(feature) - {"name", "pattern", "field", "kind"})
        if extra:
            raise RegistryError(
                f"{at}: unknown key(s) {', '.join(map(str, extra))}; accepted: name, kind, pattern, field"
            )
        name, pattern, fld = _load_read(feature, at, what="feature")
        if name in {f.name for f in out}:
            raise RegistryError(f"{at}.name {name!r} is used twice")
        kind = feature["kind"]
        if kind not in STRUCTURED_KINDS:
            raise RegistryError(f"{at}.kind {kind!r}; accepted: {', '.join(STRUCTURED_KINDS)}")
        out.append(StructuredFeature(name=name, pattern=pattern, kind=kind, field=fld))
    ents: list[StructuredEntity] = []
    for i, entity in enumerate(entities):
        at = f"{where}: {key}.entities[{i}]"
        require(entity, ("name",), at)
        extra = sorted(set(entity) - {"name", "pattern", "field"})
        if extra:
            raise RegistryError(
                f"{at}: unknown key(s) {', '.join(map(str, extra))}; accepted: name, pattern, field"
            )
        name, pattern, fld = _load_read(entity, at, what="entity")
        if name in {e.name for e in ents}:
            raise RegistryError(f"{at}.name {name!r} is used twice")
        ents.append(StructuredEntity(name=name, pattern=pattern, field=fld))
    if len(ents) == 1:
        raise RegistryError(
            f"{where}: {key}.entities names one entity; name two or more (the member combines pairs)"
        )
    return tuple(out), tuple(ents)


def _load_stress(task_id: str, entry: dict, on_policy: bool, where: str) -> SplitSpec | None:
    if "stress" not in entry:
        return None
    if on_policy:
        raise RegistryError(
            f"{where}: task {task_id} is on-policy: it has no stress split (its labels are what its model"
            " did with the exact prompt)"
        )
    return _load_split(task_id, "stress", entry["stress"], where)


def _load_text_panel(value: Any, on_policy: bool, where: str) -> dict[str, str]:
    """``text_panel`` in tasks.yaml: a SHA-256 (a task about its text) or {model: SHA-256} (an
    on-policy task); absent when no panel is committed."""
    if value is None:
        return {}

    def sha(v: Any, at: str) -> str:
        if not (isinstance(v, str) and SHA256.match(v)):
            raise RegistryError(f"{at}: text_panel must be a lowercase hex SHA-256, got {v!r}")
        return v

    if on_policy:
        if not isinstance(value, dict):
            raise RegistryError(f"{where}: text_panel of an on-policy task maps each base model to a SHA-256")
        return {str(m): sha(v, f"{where} ({m})") for m, v in value.items()}
    return {"": sha(value, where)}


def load_tasks(path: Path) -> tuple[dict[str, Category], dict[str, TaskSpec]]:
    data = read_yaml(path) or {}
    where = str(path)
    categories = load_categories(data, where)
    tasks: dict[str, TaskSpec] = {}
    for i, entry in enumerate(data.get("tasks") or []):
        on_policy = entry.get("on_policy", False)
        if not isinstance(on_policy, bool):
            raise RegistryError(f"{where}: tasks[{i}]: on_policy must be true or false, got {on_policy!r}")
        split_key = "splits_by_model" if on_policy else "splits"
        require(entry, ("id", "category", "family", "positive", "source", split_key), f"{where}: tasks[{i}]")
        task_id = entry["id"]
        if not _TASK_ID.match(task_id):
            raise RegistryError(f"{where}: task id {task_id!r} must look like 'name-v1'")
        if task_id in tasks:
            raise RegistryError(f"{where}: task id {task_id!r} is defined twice")
        if entry["category"] not in CATEGORIES:
            raise RegistryError(
                f"{where}: task {task_id}: unknown category {entry['category']!r};"
                f" accepted: {', '.join(CATEGORIES)}"
            )
        splits, splits_by_model = _load_task_splits(entry, task_id, on_policy, where)
        status = entry.get("status", "active")
        if status not in TASK_STATUSES:
            raise RegistryError(
                f"{where}: task {task_id}: status {status!r}; accepted: {', '.join(TASK_STATUSES)}"
            )
        source = entry["source"]
        require(source, ("package", "version", "license"), f"{where}: task {task_id} source")
        templates = entry.get("templates") or {"single": "{text}"}
        if "single" not in templates:
            raise RegistryError(f"{where}: task {task_id}: templates must define 'single'")
        pair = templates.get("contrast_pair")
        if pair is not None and (not isinstance(pair, list) or len(pair) != 2):
            raise RegistryError(f"{where}: task {task_id}: templates.contrast_pair must be [pos, neg]")
        minted = entry.get("minted", "")
        if isinstance(minted, dt.date):
            minted = minted.isoformat()
        readout, readout_reason = _load_readout(entry, f"{where}: task {task_id}")
        structured, entities = _load_structured_baseline(entry, f"{where}: task {task_id}")
        tasks[task_id] = TaskSpec(
            id=task_id,
            category=entry["category"],
            family=entry["family"],
            name=entry.get("name", task_id),
            description=entry.get("description", ""),
            positive=entry["positive"],
            negative=entry.get("negative", ""),
            source=dict(source),
            templates=dict(templates),
            splits=splits,
            on_policy=on_policy,
            splits_by_model=splits_by_model,
            text_panel=_load_text_panel(entry.get("text_panel"), on_policy, f"{where}: task {task_id}"),
            stress=_load_stress(task_id, entry, on_policy, where),
            structured_baseline=structured,
            structured_entities=entities,
            status=status,
            superseded_by=entry.get("superseded_by"),
            supersedes=entry.get("supersedes"),
            minted=str(minted),
            card=entry.get("card", ""),
            caveats=entry.get("caveats", ""),
            readout=readout,
            readout_reason=readout_reason,
        )
    for task in tasks.values():
        if task.status == "superseded" and task.superseded_by not in tasks:
            raise RegistryError(
                f"{where}: task {task.id} is superseded by {task.superseded_by!r}, which is not a task"
            )
    _check_supersessions(tasks, where)
    return categories, tasks


def _load_split_set(task_id: str, splits_in: Any, where: str, label: str) -> dict[str, SplitSpec]:
    if not isinstance(splits_in, dict):
        raise RegistryError(f"{where}: task {task_id}: {label} must be a mapping of split name to file")
    unknown = [s for s in splits_in if s not in SPLIT_NAMES]
    if unknown:
        raise RegistryError(
            f"{where}: task {task_id}: unknown split(s) {', '.join(unknown)} in {label};"
            f" accepted: {', '.join(SPLIT_NAMES)}"
        )
    missing = [s for s in REQUIRED_SPLITS if s not in splits_in]
    if missing:
        raise RegistryError(f"{where}: task {task_id}: missing split(s) {', '.join(missing)} in {label}")
    return {n: _load_split(task_id, n, s, where) for n, s in splits_in.items()}


def _load_task_splits(
    entry: dict, task_id: str, on_policy: bool, where: str
) -> tuple[dict[str, SplitSpec], dict[str, dict[str, SplitSpec]]]:
    """A task's split files: ``splits`` for a task about its input text; for an on-policy task
    ``splits_by_model`` (base model id -> splits) and no ``splits``."""
    if not on_policy:
        if entry.get("splits_by_model"):
            raise RegistryError(
                f"{where}: task {task_id}: splits_by_model is for on-policy tasks (on_policy: true)"
            )
        return _load_split_set(task_id, entry["splits"], where, "splits"), {}
    if entry.get("splits"):
        raise RegistryError(
            f"{where}: task {task_id}: an on-policy task pins its files per base model in"
            " splits_by_model, not in splits"
        )
    by_model = entry["splits_by_model"]
    if not isinstance(by_model, dict):
        raise RegistryError(f"{where}: task {task_id}: splits_by_model must map base model ids to splits")
    return {}, {
        str(model): _load_split_set(task_id, splits, where, f"splits_by_model.{model}")
        for model, splits in by_model.items()
    }


def _check_supersessions(tasks: dict[str, TaskSpec], where: str) -> None:
    """``supersedes: old-id`` names an existing task of the same category that no other task
    supersedes, and agrees with the old task's own ``superseded_by`` if it has one."""
    claimed: dict[str, str] = {}
    for task in tasks.values():
        old_id = task.supersedes
        if old_id is None:
            continue
        if not isinstance(old_id, str) or old_id not in tasks:
            raise RegistryError(f"{where}: task {task.id} supersedes {old_id!r}, which is not a task")
        if old_id == task.id:
            raise RegistryError(f"{where}: task {task.id} cannot supersede itself")
        if task.status != "active":
            raise RegistryError(f"{where}: task {task.id} supersedes {old_id} but is not active itself")
        old = tasks[old_id]
        if old.category != task.category:
            raise RegistryError(
                f"{where}: task {task.id} ({task.category}) supersedes {old_id} ({old.category});"
                " a refreshed task keeps its category"
            )
        if old_id in claimed:
            raise RegistryError(
                f"{where}: task {old_id} is superseded by both {claimed[old_id]} and {task.id}"
            )
        if old.superseded_by not in (None, task.id):
            raise RegistryError(
                f"{where}: task {task.id} supersedes {old_id}, but {old_id} says superseded_by"
                f" {old.superseded_by}"
            )
        claimed[old_id] = task.id
