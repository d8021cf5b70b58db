"""Load and validate the registry: tasks.yaml, registry/licenses.yaml, registry/models.yaml and
the weights specs under registry/weights/.

Every problem is a :class:`RegistryError` that names the file, the entry and what is accepted.
The loader is pure: it reads files under a root directory and returns frozen dataclasses.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evaluator.errors import RegistryError, SplitHashMismatch, UnknownNameError

#: The eight categories of SPEC.md §1, in board order.
CATEGORIES: tuple[str, ...] = (
    "hallucination",
    "reasoning",
    "deception",
    "sandbagging",
    "eval_awareness",
    "reward_hacking",
    "manipulation",
    "refusal",
)
SPLIT_NAMES: tuple[str, ...] = ("train", "test", "distshift", "holdout_pool")
REQUIRED_SPLITS: tuple[str, ...] = ("train", "test", "holdout_pool")
TASK_STATUSES: tuple[str, ...] = ("active", "superseded")
#: The components of ProbeScore (SPEC.md §4), in display order.
COMPONENTS: tuple[str, ...] = (
    "auroc",
    "auroc_ea",
    "auroc_ds",
    "calibration",
    "rho_ce",
    "latency",
    "license",
)
MAX_COMPONENT_WEIGHT = 0.30  # Norm 1: the component cap.
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_TASK_ID = re.compile(r"^[a-z0-9][a-z0-9-]*-v[0-9]+$")
_SPEC_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """SHA-256 (64 lowercase hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class Category:
    id: str
    name: str
    description: str


@dataclass(frozen=True)
class SplitSpec:
    name: str
    path: str  # relative to the registry root (the directory holding tasks.yaml)
    rows: int
    sha256: str


@dataclass(frozen=True)
class TaskSpec:
    id: str
    category: str
    family: str
    name: str
    description: str
    positive: str  # what label 1 means
    negative: str  # what label 0 means
    source: dict[str, Any]  # package, version, path, license, citation
    templates: dict[str, Any]  # "single": "...{text}...", "contrast_pair": ["...", "..."]
    splits: dict[str, SplitSpec]
    status: str = "active"
    superseded_by: str | None = None
    #: the task this one refreshes: both run side by side for one re-evaluation cycle, after
    #: which the old one is superseded (by the cycle, in the database; see registry_sync)
    supersedes: str | None = None
    minted: str = ""
    card: str = ""  # path of the markdown task card, relative to the root
    caveats: str = ""

    @property
    def is_active(self) -> bool:
        return self.status == "active"

    def template_hash(self, kind: str) -> str:
        """Content hash of one prompt template, part of every activation-cache key."""
        if kind not in self.templates:
            raise UnknownNameError("template", kind, sorted(self.templates))
        text = yaml.safe_dump(self.templates[kind], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class LicenseSpec:
    id: str
    name: str
    score: float


@dataclass(frozen=True)
class ModelSpec:
    id: str
    name: str
    family: str
    architecture: str
    n_layers: int
    d_model: int
    license: str
    package: str
    package_version: str
    file: str  # path inside the installed package (or produced by the package's assembler)
    format: str  # "gguf" | "hf_dir"
    weights_sha256: str
    dtype: str = "float32"
    encoder: bool = False
    #: import name of the package (found without importing it); default: package with _ for -
    module: str = ""
    #: the file is produced by the package's ``assemble(output_path)`` (chunked GGUF packages)
    assembled: bool = False
    #: bf16 compute validated to give the same probe results as fp32 (used where bf16 is native)
    bf16_ok: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WeightsSpec:
    version: str
    released: str
    description: str
    weights: dict[str, float]
    imputation: dict[str, float]
    sha256: str  # of the spec file's bytes


@dataclass(frozen=True)
class Registry:
    root: Path
    categories: dict[str, Category]
    tasks: dict[str, TaskSpec]
    licenses: dict[str, LicenseSpec]
    models: dict[str, ModelSpec]
    specs: dict[str, WeightsSpec]

    def task(self, task_id: str) -> TaskSpec:
        if task_id not in self.tasks:
            raise UnknownNameError("task", task_id, sorted(self.tasks))
        return self.tasks[task_id]

    def model(self, model_id: str) -> ModelSpec:
        if model_id not in self.models:
            raise UnknownNameError("base model", model_id, sorted(self.models))
        return self.models[model_id]

    def license(self, license_id: str) -> LicenseSpec:
        if license_id not in self.licenses:
            raise UnknownNameError("license", license_id, sorted(self.licenses))
        return self.licenses[license_id]

    def spec(self, version: str | None = None) -> WeightsSpec:
        version = version or self.latest_spec_version
        if version not in self.specs:
            raise UnknownNameError("weights spec", version, sorted(self.specs))
        return self.specs[version]

    @property
    def latest_spec_version(self) -> str:
        return max(self.specs, key=lambda v: tuple(int(x) for x in v[1:].split(".")))

    def active_tasks(self, category: str) -> list[TaskSpec]:
        return [t for t in self.tasks.values() if t.category == category and t.is_active]

    def split_path(self, task_id: str, split: str) -> Path:
        return self.root / self.task(task_id).splits[split].path

    def verify_split(self, task_id: str, split: str) -> str:
        """Re-hash one split file against tasks.yaml; return the hash or raise SplitHashMismatch."""
        spec = self.task(task_id).splits[split]
        path = self.root / spec.path
        if not path.is_file():
            raise RegistryError(f"task {task_id}: split file {spec.path} is missing")
        actual = sha256_file(path)
        if actual != spec.sha256:
            raise SplitHashMismatch(spec.path, spec.sha256, actual)
        return actual

    def verify_all_splits(self) -> dict[tuple[str, str], str]:
        return {(t, s): self.verify_split(t, s) for t in self.tasks for s in self.tasks[t].splits}


# --------------------------------------------------------------------------- loading


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise RegistryError(f"{path}: file not found")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: not valid YAML: {exc}") from None


def _require(entry: dict, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(entry, dict):
        raise RegistryError(f"{where}: expected a mapping, got {type(entry).__name__}")
    missing = [k for k in keys if entry.get(k) in (None, "")]
    if missing:
        raise RegistryError(f"{where}: missing required field(s) {', '.join(missing)}")


def load_categories(data: dict, where: str) -> dict[str, Category]:
    out: dict[str, Category] = {}
    for i, entry in enumerate(data.get("categories") or []):
        _require(entry, ("id", "name"), f"{where}: categories[{i}]")
        if entry["id"] not in CATEGORIES:
            raise UnknownNameError("category", entry["id"], list(CATEGORIES))
        out[entry["id"]] = Category(entry["id"], entry["name"], entry.get("description", ""))
    missing = [c for c in CATEGORIES if c not in out]
    if missing:
        raise RegistryError(f"{where}: categories missing: {', '.join(missing)}")
    return out


def _load_split(task_id: str, name: str, entry: dict, where: str) -> SplitSpec:
    _require(entry, ("path", "rows", "sha256"), f"{where}: task {task_id} split {name}")
    sha = str(entry["sha256"])
    if not _SHA256.match(sha):
        raise RegistryError(
            f"{where}: task {task_id} split {name}: sha256 must be 64 lowercase hex characters,"
            f" got {len(sha)} characters ({sha!r})"
        )
    rows = entry["rows"]
    if not isinstance(rows, int) or rows <= 0:
        raise RegistryError(f"{where}: task {task_id} split {name}: rows must be a positive int")
    return SplitSpec(name=name, path=str(entry["path"]), rows=rows, sha256=sha)


def load_tasks(path: Path) -> tuple[dict[str, Category], dict[str, TaskSpec]]:
    data = _read_yaml(path) or {}
    where = str(path)
    categories = load_categories(data, where)
    tasks: dict[str, TaskSpec] = {}
    for i, entry in enumerate(data.get("tasks") or []):
        _require(entry, ("id", "category", "family", "positive", "source", "splits"), f"{where}: tasks[{i}]")
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
        splits_in = entry["splits"] or {}
        unknown = [s for s in splits_in if s not in SPLIT_NAMES]
        if unknown:
            raise RegistryError(
                f"{where}: task {task_id}: unknown split(s) {', '.join(unknown)};"
                f" accepted: {', '.join(SPLIT_NAMES)}"
            )
        missing = [s for s in REQUIRED_SPLITS if s not in splits_in]
        if missing:
            raise RegistryError(f"{where}: task {task_id}: missing split(s) {', '.join(missing)}")
        status = entry.get("status", "active")
        if status not in TASK_STATUSES:
            raise RegistryError(
                f"{where}: task {task_id}: status {status!r}; accepted: {', '.join(TASK_STATUSES)}"
            )
        source = entry["source"]
        _require(source, ("package", "version", "license"), f"{where}: task {task_id} source")
        templates = entry.get("templates") or {"single": "{text}"}
        if "single" not in templates:
            raise RegistryError(f"{where}: task {task_id}: templates must define 'single'")
        pair = templates.get("contrast_pair")
        if pair is not None and (not isinstance(pair, list) or len(pair) != 2):
            raise RegistryError(f"{where}: task {task_id}: templates.contrast_pair must be [pos, neg]")
        minted = entry.get("minted", "")
        if isinstance(minted, dt.date):
            minted = minted.isoformat()
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
            splits={n: _load_split(task_id, n, s, where) for n, s in splits_in.items()},
            status=status,
            superseded_by=entry.get("superseded_by"),
            supersedes=entry.get("supersedes"),
            minted=str(minted),
            card=entry.get("card", ""),
            caveats=entry.get("caveats", ""),
        )
    for task in tasks.values():
        if task.status == "superseded" and task.superseded_by not in tasks:
            raise RegistryError(
                f"{where}: task {task.id} is superseded by {task.superseded_by!r}, which is not a task"
            )
    _check_supersessions(tasks, where)
    return categories, tasks


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


def load_licenses(path: Path) -> dict[str, LicenseSpec]:
    data = _read_yaml(path) or {}
    out: dict[str, LicenseSpec] = {}
    for i, entry in enumerate(data.get("licenses") or []):
        _require(entry, ("id", "score"), f"{path}: licenses[{i}]")
        score = entry["score"]
        if not isinstance(score, (int, float)) or not 0.2 <= score <= 1.0:
            raise RegistryError(f"{path}: license {entry['id']}: score must be in [0.2, 1.0], got {score!r}")
        out[entry["id"]] = LicenseSpec(entry["id"], entry.get("name", entry["id"]), float(score))
    if not out:
        raise RegistryError(f"{path}: no licenses defined")
    return out


def load_models(path: Path) -> dict[str, ModelSpec]:
    data = _read_yaml(path) or {}
    known = {f.name for f in dataclasses.fields(ModelSpec)} - {"extra"}
    required = (
        "id",
        "family",
        "architecture",
        "n_layers",
        "d_model",
        "license",
        "package",
        "package_version",
        "file",
        "format",
        "weights_sha256",
    )
    out: dict[str, ModelSpec] = {}
    for i, entry in enumerate(data.get("models") or []):
        _require(entry, required, f"{path}: models[{i}]")
        sha = str(entry["weights_sha256"])
        if not _SHA256.match(sha):
            raise RegistryError(f"{path}: model {entry['id']}: weights_sha256 must be 64 lowercase hex")
        if entry["format"] not in ("gguf", "hf_dir"):
            raise RegistryError(f"{path}: model {entry['id']}: format must be gguf or hf_dir")
        kwargs = {k: v for k, v in entry.items() if k in known}
        kwargs.setdefault("name", entry["id"])
        kwargs["extra"] = {k: v for k, v in entry.items() if k not in known}
        out[entry["id"]] = ModelSpec(**kwargs)
    return out


def load_weights_spec(path: Path) -> WeightsSpec:
    data = _read_yaml(path) or {}
    _require(data, ("version", "weights"), str(path))
    version = data["version"]
    if not _SPEC_VERSION.match(version):
        raise RegistryError(f"{path}: version {version!r} must look like v0.0.1")
    weights = data["weights"]
    if set(weights) != set(COMPONENTS):
        raise RegistryError(
            f"{path}: weights must name exactly the components {', '.join(COMPONENTS)};"
            f" got {', '.join(sorted(weights))}"
        )
    for name, w in weights.items():
        if not isinstance(w, (int, float)) or w < 0:
            raise RegistryError(f"{path}: weight {name} must be a non-negative number, got {w!r}")
        if w > MAX_COMPONENT_WEIGHT + 1e-9:
            raise RegistryError(
                f"{path}: weight {name} = {w} exceeds the component cap of {MAX_COMPONENT_WEIGHT} (norm 1)"
            )
    total = sum(weights.values())
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise RegistryError(f"{path}: weights sum to {total:.6g}, they must sum to 1.0")
    imputation = data.get("imputation") or {}
    for name in ("auroc_ea", "auroc_ds", "rho_ce"):
        if name not in imputation:
            raise RegistryError(f"{path}: imputation.{name} is required")
    released = data.get("released", "")
    if isinstance(released, dt.date):
        released = released.isoformat()
    return WeightsSpec(
        version=version,
        released=str(released),
        description=data.get("description", ""),
        weights={k: float(weights[k]) for k in COMPONENTS},
        imputation={k: float(v) for k, v in imputation.items()},
        sha256=sha256_file(path),
    )


def load_weights_specs(directory: Path) -> dict[str, WeightsSpec]:
    specs: dict[str, WeightsSpec] = {}
    for path in sorted(directory.glob("*.yaml")):
        spec = load_weights_spec(path)
        if spec.version in specs:
            raise RegistryError(f"{path}: weights spec {spec.version} is defined twice")
        specs[spec.version] = spec
    if not specs:
        raise RegistryError(f"{directory}: no weights spec files (*.yaml)")
    return specs


def default_root() -> Path:
    """The project root (the directory holding tasks.yaml)."""
    return Path(__file__).resolve().parent.parent


def load_registry(root: str | Path | None = None, *, verify_hashes: bool = False) -> Registry:
    """Load everything under ``root``; with ``verify_hashes`` re-hash every split file too."""
    root = Path(root) if root else default_root()
    categories, tasks = load_tasks(root / "tasks.yaml")
    reg = Registry(
        root=root,
        categories=categories,
        tasks=tasks,
        licenses=load_licenses(root / "registry" / "licenses.yaml"),
        models=load_models(root / "registry" / "models.yaml"),
        specs=load_weights_specs(root / "registry" / "weights"),
    )
    if verify_hashes:
        reg.verify_all_splits()
    return reg
