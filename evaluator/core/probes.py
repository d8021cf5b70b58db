"""Probe artifacts: parse, validate, apply and save.

An artifact is a safetensors file, never a pickle. Its header is checked here first by a small
strict reader (8-byte little-endian header length, JSON header with depth and size limits), so
that every way a file can be wrong gets its own message: a pickle or zip renamed
``.safetensors``, a truncated file, trailing bytes, a dtype that is not a float name, an absurd
rank or dimension, an unknown tensor name, a wrong shape, NaN/inf, a file over the size limit;
then the official ``safetensors`` library reads it, so what it refuses (overlapping or gapped
offsets) is refused too. Nothing in an artifact is ever executed.

Tensors (x is one activation vector, "d_model"):

- linear: ``weight`` [d] or [k, d], ``bias`` [] / [1] or [k] (optional, default 0)
- MLP: ``w1`` [h, d], ``b1`` [h], ``w2`` [1, h] or [h], ``b2`` [1] or [] (ReLU between)
- optional ``mean``, ``scale`` [d]: x is replaced by (x − mean) / scale first.
- SAE features (``evaluator.core.sae_probe``): ``latents`` [k] (I64/I32, the one integer tensor),
  ``weight`` [k], ``bias``, optional ``mean``, ``scale`` [k], read from the TopK latents of the
  registered SAE that the header's ``__metadata__`` names by hash (``sae_weights_sha256``).

The score s(x) is the logit of the positive class (label 1): for k = 1 (or [d]) the linear
output; for k ≥ 2 classes, z₁ − logsumexp_{j≠1} z_j (class 1 = positive), which is z₁ − z₀ for
k = 2. p(x) = sigmoid(s) when ``output`` is ``logit``; for ``probability`` the probe's output is
the probability itself, clipped to [0, 1].
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.core.applicability import INPUTS, OUTPUTS, POSITIONS
from evaluator.core.probe_function import NUMPY_BACKEND, ProbeFunction, torch_backend
from evaluator.core.recipes import Recipe, recipe_model_check
from evaluator.core.sae_probe import (
    ENCODE_CHUNK,
    INTEGER_DTYPES,
    INTEGER_TENSOR,
    SAE_KIND,
    SAE_TENSORS,
    ProbeSite,
    SaeEncoder,
    sae_encoder,
    sae_probe_check,
    sae_tensors_check,
)
from evaluator.data.registry.tasks import CATEGORIES
from evaluator.errors import ArtifactError
from evaluator.metrics.metrics import sigmoid
from evaluator.strict_json import JsonRejected, json_loads_strict

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.data.registry.load import Registry
    from evaluator.data.registry.saes import SaeRegistry

log = logging.getLogger(__name__)

MAX_ARTIFACT_BYTES = 50 * 1024 * 1024  # the size limit of an artifact
MAX_HEADER_BYTES = 1024 * 1024
#: A probe holds a handful of tensors of rank ≤ 2; the bounds refuse absurd headers early.
MAX_TENSORS = 16
MAX_RANK = 4
MAX_DIM = 1 << 31
MAX_HEADER_DEPTH = 3  # {"name": {"shape": [...]}}
ARTIFACT_NAME = "probe.safetensors"
METADATA_NAME = "probe.json"

LINEAR_TENSORS = ("weight", "bias", "mean", "scale")
MLP_TENSORS = ("w1", "b1", "w2", "b2", "mean", "scale")

_DTYPES = {"F64": (np.float64, 8), "F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (None, 2)}
#: accepted for tensor ``latents`` only (an SAE-feature probe's latent indices)
_INT_DTYPES = {"I64": (np.int64, 8), "I32": (np.int32, 4)}
_MAGIC = [
    (b"\x80", "a Python pickle (torch.save / joblib / pickle.dump)"),
    (b"PK\x03\x04", "a zip archive (torch.save's default .pt format, which contains a pickle)"),
    (b"\x93NUMPY", "a NumPy .npy file"),
    (b"\x89HDF", "an HDF5 file"),
]


# --------------------------------------------------------------------------- the strict reader


def _not_safetensors(what: str) -> ArtifactError:
    return ArtifactError(
        f"artifact is not a safetensors file: it looks like {what}. Only safetensors is accepted"
        " (pickle-based formats run code when loaded); export with safetensors.torch.save_file"
        " or safetensors.numpy.save_file"
    )


def read_safetensors(data: bytes, *, max_bytes: int = MAX_ARTIFACT_BYTES) -> dict[str, np.ndarray]:
    """The tensors of :func:`read_artifact` (without the header's ``__metadata__``)."""
    return read_artifact(data, max_bytes=max_bytes)[0]


def read_artifact(
    data: bytes, *, max_bytes: int = MAX_ARTIFACT_BYTES
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Parse safetensors bytes into ({name: float64 array; ``latents`` int64}, the header's
    ``__metadata__``), or raise ArtifactError saying why not.

    Two layers: our own checks first (the format's magic bytes, the header parsed as strict JSON
    with depth and size limits, every dtype a string we accept, ranks and dimensions bounded),
    each with its own message; then the official ``safetensors`` library deserializes the file,
    so whatever it refuses (overlapping or gapped offsets, data past the end) is refused here too.
    """
    size = len(data)
    if size > max_bytes:
        raise ArtifactError(f"artifact is {size:,} bytes; the size limit is {max_bytes:,} bytes")
    # A safetensors file is an 8-byte little-endian header length, then a JSON object.
    if data[8:9] != b"{":
        for magic, what in _MAGIC:
            if data.startswith(magic):
                raise _not_safetensors(what)
        if size <= 8:
            raise ArtifactError(f"artifact is truncated or empty: {size} bytes, no header")
        raise _not_safetensors("something else (no JSON header after the 8-byte length)")
    header_len = int.from_bytes(data[:8], "little")
    if header_len > size - 8:
        raise ArtifactError(
            f"artifact is truncated: its header alone is {header_len:,} bytes but the file has {size:,} bytes"
        )
    header = _header_parse(data[8 : 8 + header_len])
    base = 8 + header_len
    data_end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        data_end = max(data_end, _tensor_entry_check(name, info))
    if base + data_end > size:
        raise ArtifactError(
            f"artifact is truncated: its header says the tensor data ends at byte {base + data_end:,},"
            f" but the file has {size:,} bytes"
        )
    if base + data_end < size:
        raise ArtifactError(
            f"artifact has {size - base - data_end:,} unexpected trailing bytes after the tensor data"
        )
    tensors: dict[str, np.ndarray] = {}
    for name, entry in _safetensors_deserialize(data):
        dtype, shape, raw = entry["dtype"], entry["shape"], entry["data"]
        if dtype in _INT_DTYPES:  # the latent indices (only that name gets past the header check)
            ints = np.frombuffer(raw, dtype=np.dtype(_INT_DTYPES[dtype][0]).newbyteorder("<"))
            tensors[name] = ints.astype(np.int64).reshape(shape)
            continue
        if dtype == "BF16":
            array = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=np.dtype(_DTYPES[dtype][0]).newbyteorder("<"))
        tensors[name] = array.astype(np.float64).reshape(shape)
    return tensors, dict(header.get("__metadata__", {}))


def _header_parse(raw: bytes) -> dict[str, Any]:
    """The header as a JSON object of tensor entries, within size and depth limits."""

    try:
        header = json_loads_strict(raw, max_bytes=MAX_HEADER_BYTES, max_depth=MAX_HEADER_DEPTH)
    except JsonRejected as exc:
        raise ArtifactError(f"artifact header is refused: {exc}") from None
    if not isinstance(header, dict):
        raise _not_safetensors("something else (its header is not a JSON object)")
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ArtifactError('artifact header: "__metadata__" must be an object of text values (str → str)')
    if len(header) - ("__metadata__" in header) > MAX_TENSORS:
        raise ArtifactError(f"artifact holds {len(header):,} tensors; a probe has at most {MAX_TENSORS}")
    return header


def _tensor_entry_check(name: str, info: Any) -> int:
    """Check one header entry (dtype, shape, offsets); return where its data ends."""
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
        raise ArtifactError(f"artifact header: tensor {name!r} lacks dtype/shape/data_offsets")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if name == INTEGER_TENSOR:
        if not isinstance(dtype, str) or dtype not in _INT_DTYPES:
            raise ArtifactError(
                f"tensor {name!r} has dtype {str(dtype)[:40]!r}; accepted: {' or '.join(INTEGER_DTYPES)}"
                " (an SAE-feature probe's integer latent indices)"
            )
    elif not isinstance(dtype, str) or dtype not in _DTYPES:
        only = (
            f"; only tensor {INTEGER_TENSOR!r} (an SAE-feature probe's latent indices) may be"
            f" {' or '.join(INTEGER_DTYPES)}"
            if isinstance(dtype, str) and dtype in _INT_DTYPES
            else ""
        )
        raise ArtifactError(
            f"tensor {name!r} has dtype {str(dtype)[:40]!r}; accepted: {', '.join(_DTYPES)} (floating"
            f" point){only}"
        )
    if not (
        isinstance(shape, list)
        and len(shape) <= MAX_RANK
        and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_DIM for s in shape)
    ):
        raise ArtifactError(
            f"tensor {name!r}: invalid shape {str(shape)[:80]}; accepted: a list of at most {MAX_RANK}"
            f" dimensions, each an integer in 0..{MAX_DIM:,}"
        )
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)
    ):
        raise ArtifactError(f"tensor {name!r}: invalid data_offsets {str(offsets)[:80]}")
    begin, end = offsets
    expected = math.prod(shape) * {**_DTYPES, **_INT_DTYPES}[dtype][1]
    if end - begin != expected:
        raise ArtifactError(
            f"tensor {name!r}: data_offsets {offsets} hold {end - begin} bytes, shape {shape} of"
            f" {dtype} needs {expected}"
        )
    return end


def _safetensors_deserialize(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The official library's reading of the file; what it refuses becomes an ArtifactError."""
    import safetensors

    try:
        return safetensors.deserialize(data)
    except BaseException as exc:  # the Rust core reports panics as a BaseException (PanicException)
        if not isinstance(exc, safetensors.SafetensorError) and type(exc).__name__ != "PanicException":
            raise
        raise ArtifactError(f"artifact is refused by the safetensors library: {exc}") from None


# --------------------------------------------------------------------------- tensor validation


def _shape(a: np.ndarray) -> str:
    return "[" + ", ".join(str(s) for s in a.shape) + "]"


def tensors_kind(tensors: Mapping[str, Any]) -> str:
    """The probe kind its tensor names say: "sae_features" (``latents``), "mlp" (``w1``…) or
    "linear"."""
    if INTEGER_TENSOR in tensors:
        return SAE_KIND
    return "mlp" if set(tensors) & {"w1", "b1", "w2", "b2"} else "linear"


def validate_tensors(
    tensors: dict[str, np.ndarray], *, d_model: int, model_id: str = "the base model"
) -> str:
    """Check names, shapes and values; return the probe kind, "linear", "mlp" or "sae_features"
    (whose SAE is checked by :func:`evaluator.core.sae_probe.sae_probe_check`)."""
    names = set(tensors)
    if not names:
        raise ArtifactError("artifact holds no tensors")
    kind = tensors_kind(tensors)
    if kind == SAE_KIND:
        sae_tensors_check(tensors)
        return kind
    is_mlp = kind == "mlp"
    accepted = MLP_TENSORS if is_mlp else LINEAR_TENSORS
    unknown = sorted(names - set(accepted))
    if unknown:
        raise ArtifactError(
            f"unknown tensor name(s) {', '.join(repr(u) for u in unknown)}; accepted: linear probe"
            f" {', '.join(LINEAR_TENSORS)}; MLP probe {', '.join(MLP_TENSORS)}; SAE-feature probe"
            f" {', '.join(SAE_TENSORS)} (do not mix them)"
        )
    required = ("w1", "b1", "w2", "b2") if is_mlp else ("weight",)
    missing = [r for r in required if r not in names]
    if missing:
        raise ArtifactError(f"{'MLP' if is_mlp else 'linear'} probe lacks tensor(s) {', '.join(missing)}")

    def expect(name: str, ok: bool, wanted: str) -> None:
        if not ok:
            raise ArtifactError(
                f"tensor {name!r} has shape {_shape(tensors[name])}; expected {wanted}"
                f" (d_model = {d_model} for {model_id})"
            )

    for name in ("mean", "scale"):
        if name in tensors:
            expect(name, tensors[name].shape == (d_model,), f"[{d_model}]")
    if is_mlp:
        w1, b1, w2, b2 = (tensors[k] for k in ("w1", "b1", "w2", "b2"))
        expect("w1", w1.ndim == 2 and w1.shape[1] == d_model and w1.shape[0] >= 1, f"[h, {d_model}]")
        h = w1.shape[0]
        expect("b1", b1.shape == (h,), f"[{h}]")
        expect("w2", w2.shape in ((1, h), (h,)), f"[1, {h}] or [{h}]")
        expect("b2", b2.shape in ((1,), ()), "[1] or []")
    else:
        w = tensors["weight"]
        expect(
            "weight",
            (w.ndim == 1 and w.shape[0] == d_model)
            or (w.ndim == 2 and w.shape[1] == d_model and w.shape[0] >= 1),
            f"[{d_model}] or [k, {d_model}]",
        )
        if "bias" in tensors:
            b = tensors["bias"]
            k = 1 if w.ndim == 1 else w.shape[0]
            expect(
                "bias", b.shape in (((), (1,)) if k == 1 else ((k,),)), "[] or [1]" if k == 1 else f"[{k}]"
            )
    for name, array in tensors.items():
        bad = int((~np.isfinite(array)).sum())
        if bad:
            raise ArtifactError(f"tensor {name!r} contains {bad} non-finite value(s) (NaN or ±inf)")
    if "scale" in tensors and (tensors["scale"] == 0).any():
        raise ArtifactError(f"tensor 'scale' has {int((tensors['scale'] == 0).sum())} zero entries")
    return "mlp" if is_mlp else "linear"


# --------------------------------------------------------------------------- metadata


@dataclass(frozen=True)
class ProbeMetadata:
    """probe.json: exactly the metadata JSON the submission API accepts (docs/ARCHITECTURE.md)."""

    name: str
    category: str
    base_model: str
    layer: int
    position: str
    input: str
    output: str
    license: str
    authors: list[str] = field(default_factory=list)
    paper_url: str = ""
    description: str = ""
    training_data: dict[str, Any] = field(default_factory=dict)
    declared_metrics: dict[str, float] = field(default_factory=dict)
    recipe: dict[str, Any] | None = None
    #: the registry task ids it was trained on, "external" for other data (required by the server
    #: without a recipe; evaluator.metrics.in_domain); None: not given (a recipe names its task)
    trained_on: list[str] | None = None

    REQUIRED = ("name", "category", "base_model", "layer", "position", "input", "output", "license")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["trained_on"] is None:  # not given: probe.json leaves it out
            del out["trained_on"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, registry: Registry | None = None) -> ProbeMetadata:
        """Validate metadata; with ``registry``, also the base model, layer range, license and recipe."""
        if not isinstance(data, dict):
            raise ArtifactError("metadata must be a JSON object")
        known = list(cls.__dataclass_fields__)
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ArtifactError(
                f"metadata: unknown field(s) {', '.join(unknown)}; accepted: {', '.join(known)}"
            )
        missing = [k for k in cls.REQUIRED if data.get(k) in (None, "")]
        if missing:
            raise ArtifactError(f"metadata: missing required field(s) {', '.join(missing)}")
        for key, accepted in (
            ("category", CATEGORIES),
            ("position", POSITIONS),
            ("input", INPUTS),
            ("output", OUTPUTS),
        ):
            if data[key] not in accepted:
                raise ArtifactError(f"metadata: {key} {data[key]!r} is not one of {', '.join(accepted)}")
        layer = data["layer"]
        if not isinstance(layer, int) or isinstance(layer, bool):
            raise ArtifactError(f"metadata: layer must be an integer, got {layer!r}")
        authors = data.get("authors") or []
        if not isinstance(authors, list) or not all(isinstance(a, str) for a in authors):
            raise ArtifactError("metadata: authors must be a list of names")
        declared = data.get("declared_metrics") or {}
        if not isinstance(declared, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in declared.values()
        ):
            raise ArtifactError("metadata: declared_metrics must map metric names to finite numbers")
        recipe = data.get("recipe")
        if recipe is not None and not isinstance(recipe, dict):
            raise ArtifactError("metadata: recipe must be a JSON object or absent")
        training = data.get("training_data") or {}
        if not isinstance(training, dict):
            raise ArtifactError("metadata: training_data must be a JSON object")
        trained_on = data.get("trained_on")
        if isinstance(trained_on, str):
            trained_on = [trained_on]
        if trained_on is not None and (
            not isinstance(trained_on, list) or not all(isinstance(t, str) for t in trained_on)
        ):
            raise ArtifactError('metadata: trained_on must be a list of task ids or "external"')
        meta = cls(
            name=str(data["name"]),
            category=data["category"],
            base_model=str(data["base_model"]),
            layer=layer,
            position=data["position"],
            input=data["input"],
            output=data["output"],
            license=str(data["license"]),
            authors=list(authors),
            paper_url=str(data.get("paper_url") or ""),
            description=str(data.get("description") or ""),
            training_data=dict(training),
            declared_metrics={k: float(v) for k, v in declared.items()},
            recipe=recipe,
            trained_on=None if trained_on is None else list(trained_on),
        )
        if registry is not None:
            meta.check_against(registry)
        return meta

    def check_against(self, registry: Registry) -> None:
        """Base model known, layer in 0..n_layers, license registered, recipe valid (on this base
        model: an SAE recipe's SAE is this model's, a top-k recipe's k fits its width)."""
        model = registry.model(self.base_model)
        if not 0 <= self.layer <= model.n_layers:
            raise ArtifactError(
                f"layer {self.layer} is out of range for {model.id}: 0..{model.n_layers}"
                " (0 = embeddings, L = residual after block L)"
            )
        registry.license(self.license)
        if self.recipe is not None:
            recipe = Recipe.from_dict(self.recipe, probe=self, registry=registry)
            recipe_model_check(recipe, model_id=model.id, d_model=model.d_model, saes=registry.saes)


# --------------------------------------------------------------------------- the probe


@dataclass
class Probe:
    """A validated probe: its metadata and its tensors (float64; an SAE probe's ``latents`` int64)."""

    metadata: ProbeMetadata
    tensors: dict[str, np.ndarray]
    kind: str  # "linear" | "mlp" | "sae_features"
    sha256: str = ""  # of the artifact bytes; "" for a probe built in memory
    path: str = ""
    #: the safetensors header's ``__metadata__`` (an SAE probe's ``sae_weights_sha256``)
    artifact_metadata: dict[str, str] = field(default_factory=dict)
    sae: SaeEncoder | None = None  # the SAE an SAE-feature probe reads (resolved by the registry)

    @property
    def base_model(self) -> str:
        return self.metadata.base_model

    @property
    def layer(self) -> int:
        return self.metadata.layer

    @property
    def d_model(self) -> int:
        if self.kind == SAE_KIND:
            return self._sae().d_model
        return int(self.tensors["w1" if self.kind == "mlp" else "weight"].shape[-1])

    @property
    def sae_latents(self) -> list[int]:
        """An SAE-feature probe's latent indices, in the artifact's order."""
        return [int(i) for i in self.tensors[INTEGER_TENSOR]]

    @property
    def sae_k(self) -> int:
        """How many latents an SAE-feature probe reads."""
        return len(self.sae_latents)

    @property
    def sae_latent_weights(self) -> list[float]:
        """Each latent's coefficient on its raw value z_i (``weight / scale``), in that order."""
        w = self.tensors["weight"]
        return [float(v) for v in (w / self.tensors["scale"] if "scale" in self.tensors else w)]

    def _sae(self) -> SaeEncoder:
        if self.sae is None:
            raise ArtifactError("an SAE-feature probe is applied through its SAE: load it with a registry")
        return self.sae

    def score(self, X: np.ndarray) -> np.ndarray:
        """s(x) for activations X "n d_model" → "n" (float64): the positive-class logit."""
        X = np.asarray(X, dtype=np.float64)
        f = ProbeFunction(self.kind, self.tensors, NUMPY_BACKEND, sae=self.sae)
        if self.kind != SAE_KIND or X.shape[0] <= ENCODE_CHUNK:
            return f(X)
        # the SAE's pre-activations are "n width": a chunk of rows at a time
        return np.concatenate([f(X[i : i + ENCODE_CHUNK]) for i in range(0, X.shape[0], ENCODE_CHUNK)])

    def probability(self, scores: np.ndarray) -> np.ndarray:
        """p(x) from s(x): sigmoid for ``logit`` probes, clipped identity for ``probability``."""

        s = np.asarray(scores, dtype=np.float64)
        return sigmoid(s) if self.metadata.output == "logit" else np.clip(s, 0.0, 1.0)

    def direction(self) -> np.ndarray | None:
        """The linear probe's direction in raw activation space, "d_model" (w / scale);
        None for MLP probes, k > 2 classes and SAE-feature probes (a read-out of TopK latents has
        no single direction in the residual stream: steering does not apply)."""
        if self.kind != "linear":
            return None
        w = self.tensors["weight"]
        if w.ndim == 2:
            if w.shape[0] == 1:
                w = w[0]
            elif w.shape[0] == 2:
                w = w[1] - w[0]
            else:
                return None
        return w / self.tensors["scale"] if "scale" in self.tensors else w.copy()

    def torch_forward(self, device: Any = "cpu", dtype: Any = None) -> ProbeFunction:
        """s(x) in torch: a callable x "b d_model" (on ``device``, in ``dtype``, float32 by default)
        → s "b", differentiable in x; the formula of :meth:`score` (tested to agree). It runs
        beside a model: the latency measurement and the attack's loss."""
        return ProbeFunction(self.kind, self.tensors, torch_backend(device, dtype), sae=self.sae)


@dataclass(frozen=True)
class ValidatedArtifact:
    """An artifact checked against a base model, before any metadata is attached."""

    tensors: dict[str, np.ndarray]  # float64 (``latents`` int64)
    kind: str  # "linear" | "mlp" | "sae_features"
    sha256: str  # of the artifact bytes
    size: int
    artifact_metadata: dict[str, str] = field(default_factory=dict)  # the header's __metadata__
    sae: str | None = None  # the id of the registered SAE an SAE-feature probe reads


def probe_from_bytes(
    data: bytes,
    *,
    d_model: int,
    n_layers: int | None = None,
    layer: int | None = None,
    max_bytes: int = MAX_ARTIFACT_BYTES,
    model_id: str = "the base model",
    saes: SaeRegistry | None = None,
    site: ProbeSite | None = None,
) -> ValidatedArtifact:
    """Validate uploaded artifact bytes without a registry (the submission form/API path).

    Checks, each with its own ArtifactError message: size limit, safetensors format (pickle,
    zip, truncation, trailing bytes), tensor names, shapes against ``d_model``, finite values,
    and ``layer`` in 0..``n_layers`` when both are given. An SAE-feature artifact is checked
    against the registered SAEs ``saes`` and where the probe reads (``site``: base model, layer,
    position, input); its refusals are ``SaeProbeRefused``, naming the field at fault.
    """
    if layer is not None and n_layers is not None and not 0 <= layer <= n_layers:
        raise ArtifactError(
            f"layer {layer} is out of range for {model_id}: 0..{n_layers} (0 = embeddings, L = residual after block L)"
        )
    tensors, header = read_artifact(data, max_bytes=max_bytes)
    kind = validate_tensors(tensors, d_model=d_model, model_id=model_id)
    sae = None
    if kind == SAE_KIND:
        if saes is None or site is None:
            raise ArtifactError("an SAE-feature probe is checked against the registered SAEs; none given")
        sae = sae_probe_check(tensors, header, saes=saes, site=site).id
    return ValidatedArtifact(
        tensors=tensors,
        kind=kind,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        artifact_metadata=header,
        sae=sae,
    )


def probe_from_tensors(
    tensors: dict[str, np.ndarray],
    metadata: dict[str, Any] | ProbeMetadata,
    *,
    registry: Registry,
    sha256: str = "",
    path: str = "",
    artifact_metadata: Mapping[str, str] | None = None,
) -> Probe:
    """Validate in-memory tensors + metadata (already parsed) into a Probe. ``artifact_metadata``:
    the safetensors header's ``__metadata__`` (an SAE-feature probe's SAE is resolved from it
    among the registry's SAEs, and its weights read once per process)."""
    meta = (
        metadata
        if isinstance(metadata, ProbeMetadata)
        else ProbeMetadata.from_dict(metadata, registry=registry)
    )
    if isinstance(metadata, ProbeMetadata):
        meta.check_against(registry)
    model = registry.model(meta.base_model)
    arrays = {
        k: np.asarray(v, dtype=np.int64 if k == INTEGER_TENSOR and _integral(v) else np.float64)
        for k, v in tensors.items()
    }
    kind = validate_tensors(arrays, d_model=model.d_model, model_id=model.id)
    header = dict(artifact_metadata or {})
    sae = None
    if kind == SAE_KIND:
        spec = sae_probe_check(arrays, header, saes=registry.saes, site=meta)
        sae = sae_encoder(registry.root, spec)
    return Probe(
        metadata=meta,
        tensors=arrays,
        kind=kind,
        sha256=sha256,
        path=path,
        artifact_metadata=header,
        sae=sae,
    )


def _integral(v: Any) -> bool:
    return np.issubdtype(np.asarray(v).dtype, np.integer)


def load_probe(
    path: str | Path,
    *,
    registry: Registry,
    metadata: dict[str, Any] | None = None,
    max_bytes: int = MAX_ARTIFACT_BYTES,
) -> Probe:
    """Load a probe from a directory (probe.safetensors + probe.json) or an artifact file
    (then ``metadata`` must be given). Raises ArtifactError with the specific reason."""
    path = Path(path)
    artifact = path / ARTIFACT_NAME if path.is_dir() else path
    if metadata is None:
        meta_path = path / METADATA_NAME if path.is_dir() else path.with_name(METADATA_NAME)
        try:
            metadata = json.loads(meta_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ArtifactError(f"{meta_path}: metadata file not found") from None
        except json.JSONDecodeError as exc:
            raise ArtifactError(f"{meta_path}: not valid JSON: {exc}") from None
    try:
        size = artifact.stat().st_size
    except FileNotFoundError:
        raise ArtifactError(f"{artifact}: artifact file not found") from None
    if size > max_bytes:  # before reading it into memory
        raise ArtifactError(f"artifact is {size:,} bytes; the size limit is {max_bytes:,} bytes")
    data = artifact.read_bytes()
    tensors, header = read_artifact(data, max_bytes=max_bytes)
    return probe_from_tensors(
        tensors,
        metadata,
        registry=registry,
        sha256=hashlib.sha256(data).hexdigest(),
        path=str(artifact),
        artifact_metadata=header,
    )


def save_probe(
    directory: str | Path,
    tensors: dict[str, np.ndarray],
    metadata: ProbeMetadata | dict,
    *,
    artifact_metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write probe.safetensors (float32; ``latents`` int64) and probe.json into ``directory``,
    atomically each. ``artifact_metadata``: the header's ``__metadata__`` (str → str; an SAE
    probe's ``sae_weights_sha256``)."""
    from safetensors.numpy import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    meta = metadata.to_dict() if isinstance(metadata, ProbeMetadata) else dict(metadata)
    tag = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
    tmp_art = directory / f".{ARTIFACT_NAME}.{tag}.tmp"
    arrays = {
        k: np.ascontiguousarray(v, dtype=np.int64 if k == INTEGER_TENSOR else np.float32)
        for k, v in tensors.items()
    }
    save_file(arrays, str(tmp_art), metadata=dict(artifact_metadata) if artifact_metadata else None)
    os.replace(tmp_art, directory / ARTIFACT_NAME)
    tmp_meta = directory / f".{METADATA_NAME}.{tag}.tmp"
    tmp_meta.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp_meta, directory / METADATA_NAME)
    return directory
