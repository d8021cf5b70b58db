"""The sparse autoencoders of our base models (``registry/saes.yaml``): the generic-text corpora they
are trained on and, per SAE, where it reads, its shape, its training and the SHA-256 of its weights.

Two lists, read and validated here (every problem a :class:`RegistryError` naming the entry):

- ``corpora``: a generic English corpus inside a pinned package archive (package, version, file
  name and SHA-256, the member file and the JSON field holding each document), its license, and the
  rule that holds documents out of training (one in ``heldout_every``, chosen by the SHA-256 of the
  document's text, so the held-out set does not depend on a seed). The archive is fetched by the
  task builders' own mechanism (``evaluator.data.builders.sources``), which pins it a second time in
  ``registry/sources.yaml``; ``evaluator.data.corpus`` refuses an archive whose two pins differ.
- ``saes``: one trained SAE each. ``layer`` counts as the evaluator does (layer ``L`` is the
  residual stream after block ``L``, the raw output of ``blocks[L - 1]``); ``hook`` names the same
  place as SAELens does, ``blocks.{L-1}.hook_resid_post``. ``path`` is the SAELens-layout directory
  under the registry root; ``weights_sha256`` is checked before the weights are read
  (``evaluator.core.sae.model.sae_from_registry``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.data.registry.files import SHA256, read_yaml, require
from evaluator.errors import RegistryError, UnknownNameError

SAES_FILE = Path("registry") / "saes.yaml"
#: the SAE architectures the evaluator can load
ARCHITECTURES = ("topk",)


def hook_name(layer: int) -> str:
    """SAELens' (TransformerLens') name of the evaluator's layer ``layer`` (1..n_layers)."""
    return f"blocks.{layer - 1}.hook_resid_post"


@dataclass(frozen=True)
class CorpusSpec:
    """A generic-text corpus: JSON lines ``member`` inside a pinned archive, one document per line
    in ``field``; documents whose SHA-256 is 0 modulo ``heldout_every`` are never trained on."""

    id: str
    name: str
    package: str
    version: str
    filename: str
    sha256: str
    member: str
    field: str
    license: str
    heldout_every: int
    description: str = ""

    def pin(self) -> dict[str, str]:
        """What an SAE entry repeats of its corpus: package, version and the archive's SHA-256."""
        return {"id": self.id, "package": self.package, "version": self.version, "sha256": self.sha256}


@dataclass(frozen=True)
class SaeSpec:
    """One trained SAE: what it reads, its shape, how it was trained and its weights' hash."""

    id: str
    model: str
    layer: int
    hook: str
    architecture: str
    d_model: int
    width: int
    k: int
    corpus: dict[str, str]  # id, package, version, sha256 (checked against the corpus entry)
    tokens: int  # training tokens
    context: int  # tokens per context (the first position and the tokenizer's specials are not read)
    seed: int
    license: str
    path: str  # the SAELens-layout directory, relative to the registry root
    weights_sha256: str

    def directory(self, root: Path) -> Path:
        return Path(root) / self.path


@dataclass(frozen=True)
class SaeRegistry:
    corpora: dict[str, CorpusSpec]
    saes: dict[str, SaeSpec]

    def corpus(self, corpus_id: str) -> CorpusSpec:
        if corpus_id not in self.corpora:
            raise UnknownNameError("SAE corpus", corpus_id, sorted(self.corpora))
        return self.corpora[corpus_id]

    def sae(self, sae_id: str) -> SaeSpec:
        if sae_id not in self.saes:
            raise UnknownNameError("SAE", sae_id, sorted(self.saes))
        return self.saes[sae_id]

    def by_weights_sha256(self, sha256: str) -> SaeSpec | None:
        """The registered SAE whose weights hash to ``sha256``, or None."""
        return next((s for s in self.saes.values() if s.weights_sha256 == sha256), None)

    @property
    def default_corpus(self) -> CorpusSpec:
        """The first corpus listed: what ``train-sae`` reads unless told otherwise."""
        if not self.corpora:
            raise RegistryError(f"{SAES_FILE}: no corpus listed")
        return next(iter(self.corpora.values()))


def _positive_int(entry: dict, key: str, where: str) -> int:
    value = entry.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RegistryError(f"{where}: {key} must be a positive integer, got {value!r}")
    return value


def _corpus(entry: Any, where: str) -> CorpusSpec:
    keys = ("id", "package", "version", "filename", "sha256", "member", "field", "license")
    require(entry, keys, where)
    if not SHA256.match(str(entry["sha256"])):
        raise RegistryError(f"{where}: sha256 must be 64 lowercase hex")
    every = _positive_int(entry, "heldout_every", where)
    if every < 2:
        raise RegistryError(f"{where}: heldout_every must be at least 2 (one document in N held out)")
    return CorpusSpec(
        id=str(entry["id"]),
        name=str(entry.get("name") or entry["id"]),
        package=str(entry["package"]),
        version=str(entry["version"]),
        filename=str(entry["filename"]),
        sha256=str(entry["sha256"]),
        member=str(entry["member"]),
        field=str(entry["field"]),
        license=str(entry["license"]),
        heldout_every=every,
        description=str(entry.get("description") or ""),
    )


def _sae(entry: Any, where: str, corpora: dict[str, CorpusSpec]) -> SaeSpec:
    keys = (
        "id",
        "model",
        "layer",
        "hook",
        "architecture",
        "d_model",
        "width",
        "k",
        "corpus",
        "tokens",
        "context",
        "license",
        "path",
        "weights_sha256",
    )
    require(entry, keys, where)
    ints = {key: _positive_int(entry, key, where) for key in ("layer", "d_model", "width", "k", "tokens")}
    context = _positive_int(entry, "context", where)
    seed = entry.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise RegistryError(f"{where}: seed must be a non-negative integer, got {seed!r}")
    if entry["architecture"] not in ARCHITECTURES:
        raise RegistryError(
            f"{where}: architecture {entry['architecture']!r}; accepted: {', '.join(ARCHITECTURES)}"
        )
    if ints["k"] > ints["width"]:
        raise RegistryError(f"{where}: k {ints['k']} exceeds the width {ints['width']}")
    if entry["hook"] != hook_name(ints["layer"]):
        raise RegistryError(
            f"{where}: hook {entry['hook']!r} is not layer {ints['layer']}'s, {hook_name(ints['layer'])!r}"
            " (layer L is the residual stream after block L)"
        )
    if not SHA256.match(str(entry["weights_sha256"])):
        raise RegistryError(f"{where}: weights_sha256 must be 64 lowercase hex")
    pin = entry["corpus"]
    if not isinstance(pin, dict) or pin.get("id") not in corpora:
        raise RegistryError(
            f"{where}: corpus must name a listed corpus by id; listed: {', '.join(sorted(corpora))}"
        )
    expected = corpora[pin["id"]].pin()
    if {k: str(v) for k, v in pin.items()} != expected:
        raise RegistryError(f"{where}: corpus pin {pin} differs from the corpus entry's {expected}")
    path = str(entry["path"])
    if Path(path).is_absolute() or ".." in Path(path).parts:
        raise RegistryError(f"{where}: path must be relative to the registry root, without '..'")
    return SaeSpec(
        id=str(entry["id"]),
        model=str(entry["model"]),
        hook=str(entry["hook"]),
        architecture=str(entry["architecture"]),
        corpus=expected,
        context=context,
        seed=seed,
        license=str(entry["license"]),
        path=path,
        weights_sha256=str(entry["weights_sha256"]),
        **ints,
    )


def load_saes(root: Path, models: dict[str, Any] | None = None, *, missing_ok: bool = False) -> SaeRegistry:
    """Read ``registry/saes.yaml`` under ``root``. With ``models`` (``Registry.models``), each SAE's
    base model must be listed there, with that ``d_model`` and a layer in 1..n_layers.
    ``missing_ok``: a root without the file has no SAE (a registry built for a test)."""
    path = Path(root) / SAES_FILE
    if missing_ok and not path.is_file():
        return SaeRegistry(corpora={}, saes={})
    data = read_yaml(path) or {}
    corpora: dict[str, CorpusSpec] = {}
    for i, entry in enumerate(data.get("corpora") or []):
        corpus = _corpus(entry, f"{path}: corpora[{i}]")
        if corpus.id in corpora:
            raise RegistryError(f"{path}: corpus {corpus.id} is listed twice")
        corpora[corpus.id] = corpus
    saes: dict[str, SaeSpec] = {}
    for i, entry in enumerate(data.get("saes") or []):
        sae = _sae(entry, f"{path}: saes[{i}]", corpora)
        if sae.id in saes:
            raise RegistryError(f"{path}: SAE {sae.id} is listed twice")
        if models is not None:
            if sae.model not in models:
                raise UnknownNameError("base model", sae.model, sorted(models))
            spec = models[sae.model]
            if not 1 <= sae.layer <= spec.n_layers or sae.d_model != spec.d_model:
                raise RegistryError(
                    f"{path}: SAE {sae.id}: layer {sae.layer} × d_model {sae.d_model} does not fit"
                    f" {sae.model} (layers 1..{spec.n_layers}, d_model {spec.d_model})"
                )
        saes[sae.id] = sae
    return SaeRegistry(corpora=corpora, saes=saes)
