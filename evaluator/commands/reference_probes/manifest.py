"""The reference-probe manifest (``registry/reference_probes/manifest.yaml``): each probe's slug,
directory, role and recipe, read and validated against the registry; the eval-awareness reference
of a base model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluator.axes.ea_selection import parse_selection
from evaluator.commands.reference_probes.sweep import SWEEP_FOLDS
from evaluator.core.recipes import Recipe
from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.errors import RegistryError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.axes.ea_selection import Candidate
    from evaluator.data.registry.load import Registry

MANIFEST = Path("registry") / "reference_probes" / "manifest.yaml"
ROLES = (EVAL_AWARENESS, "")


@dataclass(frozen=True)
class ReferenceEntry:
    """One manifest entry: what the probe is and how it is trained (the layer comes from the sweep)."""

    slug: str
    path: str  # relative to the registry root
    role: str  # "eval_awareness" | ""
    why: str
    name: str
    description: str
    base_model: str
    recipe: dict[str, Any]  # method, task, position, input, hyperparameters, seed (no layer)
    layers: tuple[int, ...] | None = None  # sweep candidates; None = every layer 0..n_layers
    folds: int = SWEEP_FOLDS
    #: the slug of the eval-awareness reference probe this one replaces (kept as a record)
    replaces: str = ""
    #: held-out-format selection (evaluator.axes.ea_selection): the method/position candidates; the
    #: recipe then names only task, input and seed
    candidates: tuple[Candidate, ...] | None = None

    @property
    def task(self) -> str:
        return str(self.recipe["task"])

    @property
    def method(self) -> str:
        return str(self.recipe.get("method") or "selected")

    def directory(self, root: Path) -> Path:
        return root / self.path

    def candidate_layers(self, n_layers: int) -> list[int]:
        return list(self.layers) if self.layers is not None else list(range(n_layers + 1))

    def recipe_at(self, layer: int, registry: Registry, candidate: Candidate | None = None) -> Recipe:
        """The validated recipe at ``layer`` (with a selection candidate's method, hyperparameters
        and position)."""

        chosen = candidate.to_dict() if candidate is not None else {}
        return Recipe.from_dict({**self.recipe, **chosen, "layer": layer}, registry=registry)

    def candidate_of(self, recipe: dict[str, Any]) -> Candidate | None:
        """The selection candidate a recorded recipe is (None for a layer-sweep entry)."""
        for c in self.candidates or ():
            if (c.method, c.position) == (recipe.get("method"), recipe.get("position")) and all(
                recipe.get("hyperparameters", {}).get(k) == v for k, v in c.hyperparameters.items()
            ):
                return c
        return None


_ENTRY_KEYS = {
    "slug",
    "path",
    "role",
    "why",
    "name",
    "description",
    "base_model",
    "recipe",
    "layers",
    "folds",
    "replaces",
    "selection",
}
_RECIPE_KEYS = {"method", "task", "position", "input", "hyperparameters", "seed"}


def manifest_path(root: Path) -> Path:
    """Where the manifest lives under a registry root."""
    return Path(root) / MANIFEST


def load_manifest(registry: Registry, path: str | Path | None = None) -> list[ReferenceEntry]:
    """Read and validate the manifest against the registry.

    Checks: known keys, unique slugs, roles, base models and tasks known, recipe valid at every
    candidate layer's range, each eval_awareness entry trains on an eval_awareness task, and the
    eval-awareness entries come first with exactly one per base model that has any entry.
    """
    import yaml

    path = Path(path) if path is not None else manifest_path(registry.root)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RegistryError(f"{path}: reference-probe manifest not found") from None
    if not isinstance(data, dict) or not isinstance(data.get("probes"), list):
        raise RegistryError(f"{path}: expected a mapping with a 'probes' list")
    entries: list[ReferenceEntry] = []
    seen: set[str] = set()
    for k, raw in enumerate(data["probes"]):
        where = f"{path}: probes[{k}]"
        if not isinstance(raw, dict):
            raise RegistryError(f"{where}: expected a mapping")
        unknown = sorted(set(raw) - _ENTRY_KEYS)
        if unknown:
            raise RegistryError(f"{where}: unknown key(s) {', '.join(unknown)}")
        missing = [key for key in ("slug", "path", "why", "name", "base_model", "recipe") if not raw.get(key)]
        if missing:
            raise RegistryError(f"{where}: missing {', '.join(missing)}")
        slug = str(raw["slug"])
        if slug in seen:
            raise RegistryError(f"{where}: duplicate slug {slug}")
        seen.add(slug)
        role = str(raw.get("role") or "")
        if role not in ROLES:
            raise RegistryError(f"{where}: role {role!r} is not one of {ROLES}")
        recipe = dict(raw["recipe"])
        bad = sorted(set(recipe) - _RECIPE_KEYS)
        if bad:
            raise RegistryError(
                f"{where}: recipe key(s) {', '.join(bad)} not allowed (the sweep sets the layer)"
            )
        candidates = None
        if raw.get("selection") is not None:
            candidates = parse_selection(raw["selection"], where)
            chosen_by_rule = sorted(set(recipe) & {"method", "position", "hyperparameters"})
            if chosen_by_rule:
                raise RegistryError(
                    f"{where}: recipe key(s) {', '.join(chosen_by_rule)} are set by the selection"
                )
        model = registry.model(str(raw["base_model"]))
        layers = raw.get("layers")
        if layers in (None, "all"):
            layer_tuple = None
        elif isinstance(layers, list) and layers and all(isinstance(x, int) for x in layers):
            layer_tuple = tuple(sorted(set(layers)))
            if not all(0 <= x <= model.n_layers for x in layer_tuple):
                raise RegistryError(f"{where}: layers out of range 0..{model.n_layers}")
        else:
            raise RegistryError(f"{where}: layers must be 'all' or a list of integers")
        entry = ReferenceEntry(
            slug=slug,
            path=str(raw["path"]),
            role=role,
            why=str(raw["why"]).strip(),
            name=str(raw["name"]).strip(),
            description=str(raw.get("description") or "").strip(),
            base_model=model.id,
            recipe=recipe,
            layers=layer_tuple,
            folds=int(raw.get("folds") or SWEEP_FOLDS),
            replaces=str(raw.get("replaces") or ""),
            candidates=candidates,
        )
        first_layer = entry.candidate_layers(model.n_layers)[0]  # an SAE recipe's: its SAE's layer
        for candidate in candidates or (None,):
            entry.recipe_at(first_layer, registry, candidate)  # method, task, template, hyperparameters valid
        if entry.replaces:
            old = next((e for e in entries if e.slug == entry.replaces), None)
            if old is None or old.role != EVAL_AWARENESS or role != EVAL_AWARENESS:
                raise RegistryError(f"{where}: replaces {entry.replaces}, no earlier eval_awareness entry")
            if old.base_model != entry.base_model:
                raise RegistryError(f"{where}: replaces {entry.replaces} of another base model")
        category = registry.task(entry.task).category
        if (role == EVAL_AWARENESS) != (category == EVAL_AWARENESS):
            raise RegistryError(f"{where}: role {role!r} but task {entry.task} is in category {category}")
        entries.append(entry)
    ea = [e for e in entries if e.role == EVAL_AWARENESS]
    if entries[: len(ea)] != ea:
        raise RegistryError(f"{path}: the eval_awareness reference probes must come first")
    replaced = [e.replaces for e in ea if e.replaces]
    if len(set(replaced)) != len(replaced):
        raise RegistryError(f"{path}: an eval_awareness reference probe is replaced twice")
    ea_models = [e.base_model for e in ea if e.slug not in replaced]
    if len(set(ea_models)) != len(ea_models):
        raise RegistryError(f"{path}: more than one current eval_awareness reference probe for a base model")
    lacking = sorted({e.base_model for e in entries} - set(ea_models))
    if lacking:
        raise RegistryError(f"{path}: no eval_awareness reference probe for {', '.join(lacking)}")
    return entries


def ea_reference_for(entries: Sequence[ReferenceEntry], base_model: str) -> ReferenceEntry | None:
    """The current eval-awareness reference entry of ``base_model``: the one no later entry
    ``replaces`` (a replaced one stays in the manifest as a record)."""
    replaced = {e.replaces for e in entries if e.replaces}
    return next(
        (
            e
            for e in entries
            if e.role == EVAL_AWARENESS and e.base_model == base_model and e.slug not in replaced
        ),
        None,
    )


def ea_reference_probe_dir(registry: Registry, base_model: str) -> Path | None:
    """The registry's eval-awareness reference probe for ``base_model`` (the one the board uses
    for auroc_ea: registry/reference_probes/ea-<model>, from the manifest), or None when the
    registry ships none (then auroc_ea is imputed, flagged)."""
    if not manifest_path(registry.root).is_file():
        return None
    entry = ea_reference_for(load_manifest(registry), base_model)
    if entry is None:
        return None
    directory = entry.directory(registry.root)
    return directory if directory.is_dir() else None
