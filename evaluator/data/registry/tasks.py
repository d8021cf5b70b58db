"""The tasks as the registry declares them (tasks.yaml): categories, split files, the behavioural
readout, the structured text-baseline features, the task itself; where a task's text-baseline panel
lives."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evaluator.errors import RegistryError, UnknownNameError

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
#: The judges a readout may apply to the model's own greedy continuation (evaluator.axes.steer):
#: ``refusal`` is judge v1 (onpolicy-refusal-v1's), ``refusal-v2`` judge v2 (evaluator.data.judges).
READOUT_JUDGES: tuple[str, ...] = ("refusal", "refusal-v2")
SPLIT_NAMES: tuple[str, ...] = ("train", "test", "distshift", "holdout_pool")
REQUIRED_SPLITS: tuple[str, ...] = ("train", "test", "holdout_pool")
TASK_STATUSES: tuple[str, ...] = ("active", "superseded")
#: kinds of a task card's structured text-baseline feature (``structured_baseline`` in tasks.yaml)
STRUCTURED_KINDS: tuple[str, ...] = ("numeric", "categorical")
#: row metadata a structured feature may not read: what the base model did (its outputs, the
#: generation that labelled the row), the model itself and the label
FORBIDDEN_FEATURE_FIELDS = re.compile(r"output|generation|label|judge|^model$")


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
#: the stress rows whose transform appends a tail after the content (chat, json, dilution), each
#: cut where the original content ends: read from the stress file, never a file of its own
#: (evaluator.core.activations.read_split)
STRESS_CONTENT_END_SPLIT = "stress_content_end"


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
    continuation (a name in evaluator.data.judges.JUDGES), read on a few rows beside the next-token one."""

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
        return _read_declared(self.name, self.pattern, self.field, text, meta)


def _read_declared(
    name: str, pattern: str, fld: str, text: str, meta: Mapping[str, Any] | None
) -> str | None:
    if fld:
        value = (meta or {}).get(fld)
        return None if value is None else str(value)
    match = re.search(pattern, text)
    return None if match is None else match.group(name)


@dataclass(frozen=True)
class StructuredEntity:
    """One entity a task's rows name (``structured_baseline.entities``): a city, a country, read
    like a :class:`StructuredFeature` (the named group ``name`` of ``pattern`` in the text, or
    ``meta[field]``, never FORBIDDEN_FEATURE_FIELDS). The panel's ``entity_embed`` member embeds
    each with the sentence encoder and combines them in pairs (evaluator.axes.text_panel)."""

    name: str
    pattern: str = ""
    field: str = ""

    def extract(self, text: str, meta: Mapping[str, Any] | None = None) -> str | None:
        return _read_declared(self.name, self.pattern, self.field, text, meta)


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
    #: the entities the rows name (``structured_baseline.entities``), () when the card declares none
    structured_entities: tuple[StructuredEntity, ...] = ()

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
        stress split (``"stress"``, and ``"stress_content_end"``, read from it); None when there is
        none."""
        if split in (STRESS_SPLIT, STRESS_CONTENT_END_SPLIT):
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
