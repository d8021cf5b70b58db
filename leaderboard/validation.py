"""Validation of a submission's metadata, shared by the API and the web form.

Each problem is a ValidationFailed naming the field, what was wrong and what is accepted. The
artifact bytes themselves are validated by ``evaluator.core.probes`` against the base model.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator

from evaluator.core.applicability import INPUTS, OUTPUTS, POSITIONS
from evaluator.core.recipes import METHODS, Recipe, recipe_model_check
from evaluator.data.registry.saes import SaeRegistry, load_saes
from evaluator.data.registry.tasks import SPLIT_NAMES
from evaluator.errors import ArtifactError, EvaluatorError
from evaluator.metrics import metric_table
from evaluator.metrics.in_domain import EXTERNAL
from evaluator.strict_json import JsonRejected, json_loads_strict
from leaderboard.errors import ValidationFailed
from leaderboard.models import BaseModel, Category, License, Probe, ProbeVersion, Task

RECIPE_METHODS = METHODS
KNOWN_FIELDS = {
    "name",
    "category",
    "base_model",
    "layer",
    "position",
    "input",
    "output",
    "license",
    "authors",
    "paper_url",
    "description",
    "training_data",
    "trained_on",
    "declared_metrics",
    "recipe",
    "probe",
}
TRAINING_DATA_FIELDS = ("tasks", "splits", "text_sha256", "external")
MAX_TEXT_HASHES = 50_000  # ~3.3 MB of metadata
#: trained_on: at most this many entries (task ids and "external")
MAX_TRAINED_ON = 100
#: The metadata (or recipe) JSON: at most settings.MAX_METADATA_BYTES and this deep.
MAX_JSON_DEPTH = 8
MAX_AUTHORS = 100
MAX_AUTHOR_LENGTH = 200
MAX_DESCRIPTION_LENGTH = 5000
#: Characters refused in any text: C0/C1 controls (tab and newlines allowed in long texts) and
#: the bidirectional controls that make a name display differently from what it is.
_BIDI = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{1,118}[a-z0-9]$")  # a SlugField: slugify() keeps underscores
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class CleanMetadata:
    name: str
    category: Category
    base_model: BaseModel
    layer: int
    position: str
    input: str
    output: str
    license: License
    authors: list[str]
    paper_url: str
    description: str
    training_data: dict[str, Any]
    declared_metrics: dict[str, float]
    recipe: dict[str, Any] | None
    probe_slug: str | None
    #: the tasks it was trained on ("external": data outside the registry); None: a recipe says it
    trained_on: list[str] | None = None  # a new version of an existing probe of the submitter

    def document(self) -> dict[str, Any]:
        """The metadata as accepted, in the one shape the workers and the reproduce client read
        (``evaluator.core.probes.ProbeMetadata``): what is stored, never the text as it was sent (an
        ``authors`` string, a null description, a name with spaces or in NFD come out normalised).
        """
        document: dict[str, Any] = {
            "name": self.name,
            "category": self.category.slug,
            "base_model": self.base_model.slug,
            "layer": self.layer,
            "position": self.position,
            "input": self.input,
            "output": self.output,
            "license": self.license.spdx_id,
            "authors": list(self.authors),
            "paper_url": self.paper_url,
            "description": self.description,
            "training_data": dict(self.training_data),
            "declared_metrics": dict(self.declared_metrics),
        }
        if self.trained_on is not None:
            document["trained_on"] = list(self.trained_on)
        if self.recipe is not None:
            document["recipe"] = self.recipe
        if self.probe_slug:
            document["probe"] = self.probe_slug
        return document


def _fail(field_name: str, message: str) -> NoReturn:
    raise ValidationFailed(f"{field_name}: {message}", field=field_name)


def parse_json_field(value: Any, field_name: str) -> Any:
    """A JSON form field: a dict already, or a JSON string (multipart), parsed within size and
    depth limits (:func:`evaluator.strict_json.json_loads_strict`: no NaN/Infinity, no NUL)."""
    if value is None or value == "":
        return None
    if isinstance(value, (dict, list)):
        return value
    limit = settings.MAX_METADATA_BYTES
    if hasattr(value, "read"):  # an uploaded probe.json file: never more than the limit + 1 byte
        value = value.read(limit + 1)
    if not isinstance(value, (str, bytes)):
        _fail(field_name, "must be JSON text")
    try:
        return json_loads_strict(value, max_bytes=limit, max_depth=MAX_JSON_DEPTH)
    except JsonRejected as exc:
        _fail(field_name, f"{exc} (a JSON object of at most {limit:,} bytes is accepted)")


def text_clean(value: Any, field_name: str, *, max_length: int | None, multiline: bool = False) -> str:
    """A text field as stored: NFC-normalised and stripped; refused (400 naming the field) when it
    is not text, holds control or bidirectional-override characters, or is over ``max_length``."""
    if not isinstance(value, str):
        _fail(field_name, f"must be text, got {type(value).__name__}")
    text = unicodedata.normalize("NFC", value).strip()
    if max_length is not None and len(text) > max_length:
        _fail(field_name, f"is {len(text)} characters long; at most {max_length} are accepted")
    allowed = "\t\n\r" if multiline else ""
    for ch in text:
        if ch in _BIDI or (unicodedata.category(ch) == "Cc" and ch not in allowed):
            _fail(
                field_name,
                f"contains the control character U+{ord(ch):04X}; accepted: printable text"
                + (" (tabs and line breaks allowed)" if multiline else "")
                + " without control or bidirectional-override characters",
            )
        if unicodedata.category(ch) == "Cs":
            _fail(field_name, f"contains an unpaired surrogate U+{ord(ch):04X}; accepted: valid Unicode text")
    return text


def _max_length(model, field_name: str) -> int:
    """The column's own limit, so that a value the database would refuse is a 400 here."""
    return model._meta.get_field(field_name).max_length


def probe_name_clean(value: Any) -> str:
    """A probe's name as stored, by the text rules (NFC, no control or bidirectional characters)
    and 3 to 160 characters: for a submission and for a rename in the admin alike."""
    name_max = _max_length(Probe, "name")
    name = text_clean(value, "name", max_length=name_max)
    if len(name) < 3:
        _fail("name", f"must be 3 to {name_max} characters")
    return name


def metadata_validate(metadata: Any, *, recipe: Any = None) -> CleanMetadata:
    if not isinstance(metadata, dict):
        _fail("metadata", "expected a JSON object (the probe.json written by `python -m evaluator train`)")
    unknown = sorted(set(metadata) - KNOWN_FIELDS)
    if unknown:
        _fail(
            "metadata", f"unknown field(s) {', '.join(unknown)}; accepted: {', '.join(sorted(KNOWN_FIELDS))}"
        )
    for required in ("name", "category", "base_model", "layer", "position", "input", "output", "license"):
        if metadata.get(required) in (None, ""):
            _fail(required, "this field is required")

    name = probe_name_clean(metadata["name"])

    category = Category.objects.filter(slug=metadata["category"]).first()
    if category is None:
        accepted = ", ".join(Category.objects.values_list("slug", flat=True))
        _fail("category", f"unknown category {metadata['category']!r}; accepted: {accepted}")

    base_model = BaseModel.objects.filter(slug=metadata["base_model"], is_active=True).first()
    if base_model is None:
        accepted = ", ".join(BaseModel.objects.filter(is_active=True).values_list("slug", flat=True))
        _fail("base_model", f"unknown base model {metadata['base_model']!r}; accepted: {accepted}")

    layer = metadata["layer"]
    if isinstance(layer, bool) or not isinstance(layer, int):
        _fail("layer", f"must be an integer, got {layer!r}")
    if not 0 <= layer <= base_model.n_layers:
        _fail("layer", f"{layer} is out of range for {base_model.slug}: accepted 0..{base_model.n_layers}")

    for key, allowed in (("position", POSITIONS), ("input", INPUTS), ("output", OUTPUTS)):
        if metadata[key] not in allowed:
            _fail(key, f"{metadata[key]!r} is not accepted; accepted: {', '.join(allowed)}")

    license_ = License.objects.filter(spdx_id=metadata["license"]).first()
    if license_ is None:
        accepted = ", ".join(License.objects.order_by("spdx_id").values_list("spdx_id", flat=True))
        _fail("license", f"{metadata['license']!r} is not in the license registry; accepted: {accepted}")

    authors = metadata.get("authors") or []
    if isinstance(authors, str):
        authors = [a.strip() for a in authors.split(",") if a.strip()]
    if not isinstance(authors, list) or not all(isinstance(a, str) for a in authors):
        _fail("authors", "must be a list of names")
    if len(authors) > MAX_AUTHORS:
        _fail("authors", f"lists {len(authors)} names; at most {MAX_AUTHORS} are accepted")
    authors = [text_clean(a, "authors", max_length=MAX_AUTHOR_LENGTH) for a in authors]

    paper_url = text_clean(
        metadata.get("paper_url") or "", "paper_url", max_length=_max_length(ProbeVersion, "paper_url")
    )
    if paper_url:
        try:
            URLValidator(schemes=["http", "https"])(paper_url)
        except DjangoValidationError:
            _fail("paper_url", f"{paper_url!r} is not an http(s) URL")

    training_data = _training_data_validate(metadata.get("training_data"))

    declared = metadata.get("declared_metrics") or {}
    if not isinstance(declared, dict):
        _fail("declared_metrics", "must be an object of metric → number")
    declarable = metric_table.declarable_names()
    for key, value in declared.items():
        if key not in declarable:
            _fail("declared_metrics", f"unknown metric {key!r}; accepted: {', '.join(declarable)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            _fail("declared_metrics", f"{key} must be a finite number")

    recipe = recipe if recipe is not None else metadata.get("recipe")
    if recipe is not None:
        recipe = _recipe_validate(recipe, base_model=base_model, metadata=metadata)

    trained_on = _trained_on_validate(metadata.get("trained_on"), recipe=recipe, training_data=training_data)

    probe_slug = metadata.get("probe")
    if probe_slug is not None and (not isinstance(probe_slug, str) or not _SLUG.match(probe_slug)):
        _fail("probe", "must be the slug of one of your probes (to upload a new version)")

    return CleanMetadata(
        name=name,
        category=category,
        base_model=base_model,
        layer=layer,
        position=metadata["position"],
        input=metadata["input"],
        output=metadata["output"],
        license=license_,
        authors=authors,
        paper_url=paper_url,
        description=text_clean(
            metadata.get("description") or "",
            "description",
            max_length=MAX_DESCRIPTION_LENGTH,
            multiline=True,
        ),
        training_data=training_data,
        declared_metrics={k: float(v) for k, v in declared.items()},
        recipe=recipe,
        probe_slug=probe_slug,
        trained_on=trained_on,
    )


def _training_data_validate(training_data: Any) -> dict[str, Any]:
    """The declaration the leakage rule checks against every test split:

    ``tasks``: ProbeBench task ids trained on; ``splits``: which of their splits (default
    ``["train"]``; say ``"test"`` if you trained on it); ``text_sha256``: for external data, the
    SHA-256 of each normalised training text (``python -m evaluator text-hashes FILE``);
    ``external``: a free-text description of the external data.
    """
    example = '{"tasks": ["task-id"], "splits": ["train"], "text_sha256": [], "external": "..."}'
    training_data = training_data or {}
    if not isinstance(training_data, dict):
        _fail("training_data", f"must be an object like {example}")
    unknown = sorted(set(training_data) - set(TRAINING_DATA_FIELDS))
    if unknown:
        _fail(
            "training_data",
            f"unknown field(s) {', '.join(unknown)}; accepted: {', '.join(TRAINING_DATA_FIELDS)}",
        )
    tasks = training_data.get("tasks") or []
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        _fail("training_data", "tasks must be a list of task ids")
    known_tasks = set(Task.objects.filter(slug__in=tasks).values_list("slug", flat=True))
    missing = [t for t in tasks if t not in known_tasks]
    if missing:
        _fail("training_data", f"unknown task id(s) {', '.join(missing)}")
    splits = training_data.get("splits") or ["train"]
    if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits):
        _fail("training_data", f"splits must be a list of split names ({', '.join(SPLIT_NAMES)})")
    bad = [s for s in splits if s not in SPLIT_NAMES]
    if bad:
        _fail("training_data", f"unknown split(s) {', '.join(bad)}; accepted: {', '.join(SPLIT_NAMES)}")
    if "splits" in training_data and not tasks:
        _fail("training_data", "splits name splits of the declared tasks: list the tasks too")
    hashes = training_data.get("text_sha256") or []
    if not isinstance(hashes, list) or not all(isinstance(h, str) and _SHA256.match(h) for h in hashes):
        _fail(
            "training_data",
            "text_sha256 must be a list of 64-character lowercase hex SHA-256 digests of the"
            " normalised training texts (python -m evaluator text-hashes FILE)",
        )
    if len(hashes) > MAX_TEXT_HASHES:
        _fail(
            "training_data", f"text_sha256 holds {len(hashes)} hashes; at most {MAX_TEXT_HASHES} are accepted"
        )
    external = training_data.get("external") or ""
    if not isinstance(external, str):
        _fail("training_data", "external must be a text describing the external data")
    external = text_clean(external, "training_data", max_length=MAX_DESCRIPTION_LENGTH, multiline=True)
    return {
        "tasks": list(dict.fromkeys(tasks)),
        "splits": list(dict.fromkeys(splits)),
        "text_sha256": sorted(set(hashes)),
        "external": external[:5000],
    }


def _trained_on_validate(
    value: Any, *, recipe: dict[str, Any] | None, training_data: dict[str, Any]
) -> list[str] | None:
    """What the probe was trained on, which splits its scores into in-domain and cross-domain
    (``evaluator.metrics.in_domain``): a list of registry task ids, or ``"external"`` (alone or in the
    list) for data outside the registry, declared by its text hashes (``training_data.text_sha256``).
    Required without a recipe; with one, the recipe's task is what it was trained on, and a
    ``trained_on`` sent beside it must name exactly that task."""
    accepted = (
        'a list of registry task ids (GET /api/v1/tasks), e.g. ["cities-truth-v1"], or "external" (alone'
        " or in the list) for data outside the registry, declared by training_data.text_sha256"
    )
    if value is None or value == "" or value == []:
        if recipe is not None:
            return None
        _fail("trained_on", f"this field is required for a probe without a recipe; accepted: {accepted}")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        _fail("trained_on", f"must be {accepted}; got {type(value).__name__}")
    if len(value) > MAX_TRAINED_ON:
        _fail("trained_on", f"lists {len(value)} entries; at most {MAX_TRAINED_ON} are accepted")
    entries = list(dict.fromkeys(text_clean(t, "trained_on", max_length=120) for t in value))
    task_ids = [t for t in entries if t != EXTERNAL]
    known = set(Task.objects.filter(slug__in=task_ids).values_list("slug", flat=True))
    unknown = [t for t in task_ids if t not in known]
    if unknown:
        _fail("trained_on", f"unknown task id(s) {', '.join(map(repr, unknown))}; accepted: {accepted}")
    if EXTERNAL in entries and not training_data.get("text_sha256"):
        _fail(
            "trained_on",
            '"external" needs the training texts declared: training_data.text_sha256, the SHA-256 of each'
            " normalised training text (python -m evaluator text-hashes FILE)",
        )
    if recipe is not None and entries != [recipe["task"]]:
        _fail(
            "trained_on",
            f"the recipe trains on {recipe['task']!r} only; leave trained_on out or set it to"
            f' ["{recipe["task"]}"]',
        )
    return entries


def _recipe_validate(recipe: Any, *, base_model: BaseModel, metadata: dict[str, Any]) -> dict:
    """The worker's own check (:meth:`evaluator.core.recipes.Recipe.from_dict`: fields, method,
    hyperparameter bounds, seed, agreement with the probe), plus what only the database knows
    (the task and its template, the layer range of the base model). A recipe accepted here runs."""
    if not isinstance(recipe, dict):
        _fail("recipe", "must be an object (see docs/ARCHITECTURE.md)")
    probe = _RecipeProbe(
        layer=metadata.get("layer"), position=metadata.get("position"), input=metadata.get("input")
    )
    try:
        parsed = Recipe.from_dict(recipe, probe=probe)
    except (ArtifactError, EvaluatorError) as exc:
        message = str(exc)
        _fail("recipe", message.removeprefix("recipe: "))
    task = Task.objects.filter(slug=parsed.task).first()
    if task is None:
        _fail("recipe", f"task {parsed.task!r} is not a task id")
    if task.templates and parsed.template not in task.templates:
        _fail(
            "recipe",
            f"task {task.slug} has no {parsed.template!r} template; it has {', '.join(task.templates)}",
        )
    if not 0 <= parsed.layer <= base_model.n_layers:
        _fail("recipe", f"layer must be an integer in 0..{base_model.n_layers}")
    try:
        recipe_model_check(parsed, model_id=base_model.slug, d_model=base_model.d_model, saes=sae_registry())
    except (ArtifactError, EvaluatorError) as exc:
        _fail("recipe", str(exc).removeprefix("recipe: "))
    return recipe


def sae_registry() -> SaeRegistry:
    """The registered SAEs (``registry/saes.yaml`` under the registry root; none without it): what
    an SAE-feature artifact and an SAE recipe are checked against."""
    return load_saes(Path(settings.REGISTRY_ROOT), missing_ok=True)


@dataclass(frozen=True)
class _RecipeProbe:
    """The probe fields a recipe must agree with (what Recipe.from_dict reads of a probe)."""

    layer: Any
    position: Any
    input: Any
