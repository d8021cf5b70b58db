"""The SAE-feature probe kind (``sae_features``): a linear read-out of a few latents of one of our
registered TopK SAEs (``registry/saes.yaml``, ``evaluator.core.sae``).

Artifact tensors (x is one residual vector "d_model"; the SAE has ``width`` latents and keeps its
own ``k_sae`` largest pre-activations per row):

- ``latents`` [k]: the latent indices it reads, distinct, in 0..width−1, 1 ≤ k ≤ 64, stored as I64
  or I32 (the one integer tensor an artifact may hold);
- ``weight`` [k], ``bias`` [] or [1] (optional, default 0), optional ``mean``, ``scale`` [k].

The artifact names its SAE by the SHA-256 of its weights in the safetensors header,
``__metadata__ = {"sae_weights_sha256": "<64 lowercase hex>"}``, so the artifact's own SHA-256 pins
the SAE too. The score:

    pre(x) = (x − b_dec) W_enc + b_enc                       "width"
    z_i(x) = ReLU(pre_i(x)) when pre_i(x) is among the k_sae largest of pre(x), else 0
    u(x)   = z(x)[latents]                                   "k"
    s(x)   = ((u − mean) / scale) · weight + bias

(``evaluator.core.probe_function.ProbeFunction`` applies it in numpy and torch.) The SAE is resolved
among the registered ones by that hash and must read the probe's base model at the probe's layer,
at ``last_token`` of a ``single`` input: an SAE is trained to encode one token's residual, and
neither a mean or maximum over a prompt's residuals nor a contrast pair's difference is one. Its
weights are read through :func:`evaluator.core.sae.model.sae_from_registry` (hash checked) once per
process (:func:`sae_encoder`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from evaluator.core.sae.model import TopKSae
from evaluator.data.registry.saes import SaeRegistry, SaeSpec
from evaluator.errors import ArtifactError

SAE_KIND = "sae_features"
SAE_TENSORS = ("latents", "weight", "bias", "mean", "scale")
#: the safetensors ``__metadata__`` key naming the SAE by its weights' SHA-256
SAE_HASH_KEY = "sae_weights_sha256"
#: the one tensor name an artifact may store as integers, and the dtypes it accepts
INTEGER_TENSOR = "latents"
INTEGER_DTYPES = ("I64", "I32")
MAX_LATENTS = 64
#: rows encoded at once by the numpy path (a row of pre-activations is "width" floats)
ENCODE_CHUNK = 2048
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MODEL_STREAM = (
    "an SAE is trained on single-token residuals of its layer: a mean or max over a prompt's"
    " residuals is not a residual it was trained to encode"
)


class SaeProbeRefused(ArtifactError):
    """An SAE-feature probe that does not fit its SAE or its metadata; ``field`` names the
    submission field at fault (``artifact`` when it is the file itself)."""

    def __init__(self, message: str, *, field: str = "artifact"):
        super().__init__(message)
        self.field = field


class ProbeSite(Protocol):
    """Where a probe reads: ``evaluator.core.probes.ProbeMetadata`` or :class:`Site`."""

    @property
    def base_model(self) -> str: ...
    @property
    def layer(self) -> int: ...
    @property
    def position(self) -> str: ...
    @property
    def input(self) -> str: ...


@dataclass(frozen=True)
class Site:
    """A probe's base model, layer, position and input (the upload check builds one)."""

    base_model: str
    layer: int
    position: str
    input: str


@dataclass(frozen=True, eq=False)
class SaeEncoder:
    """What the probe reads of a registered SAE: its encoder in float64 numpy arrays (and the SAE
    itself, float32 torch on the CPU, with the context length it was trained on)."""

    id: str
    sha256: str
    model: str
    layer: int
    k: int  # the SAE's own k: latents kept per row
    W_enc: np.ndarray  # "d_model width"
    b_enc: np.ndarray  # "width"
    b_dec: np.ndarray  # "d_model"
    sae: TopKSae
    context: int  # tokens per training context (registry/saes.yaml)

    @property
    def d_model(self) -> int:
        return int(self.W_enc.shape[0])

    @property
    def width(self) -> int:
        return int(self.W_enc.shape[1])

    def encode(self, X: np.ndarray) -> np.ndarray:
        """z(X) "n width" (float64), in chunks of rows: the TopK encoding the probe's score reads
        (the same arithmetic as ``ProbeFunction``'s, on every latent)."""
        X = np.asarray(X, dtype=np.float64)
        out = np.empty((X.shape[0], self.width))
        for start in range(0, X.shape[0], ENCODE_CHUNK):
            pre = (X[start : start + ENCODE_CHUNK] - self.b_dec) @ self.W_enc + self.b_enc
            kth = kth_largest_numpy(pre, self.k)
            out[start : start + ENCODE_CHUNK] = np.maximum(pre, 0.0) * (pre >= kth)
        return out


def kth_largest_numpy(pre: np.ndarray, k: int) -> np.ndarray:
    """The k-th largest entry of each row, "n 1"."""
    width = pre.shape[1]
    return np.partition(pre, width - k, axis=1)[:, width - k : width - k + 1]


# --------------------------------------------------------------------------- the tensors


def sae_tensors_check(tensors: Mapping[str, np.ndarray]) -> int:
    """Names, dtypes, shapes and values of an SAE-feature artifact, without its SAE; return k."""
    unknown = sorted(set(tensors) - set(SAE_TENSORS))
    if unknown:
        raise ArtifactError(
            f"unknown tensor name(s) {', '.join(repr(u) for u in unknown)} in an SAE-feature probe"
            f" (it holds 'latents'); accepted: {', '.join(SAE_TENSORS)}"
        )
    if "weight" not in tensors:
        raise ArtifactError("SAE-feature probe lacks tensor(s) weight")
    latents = tensors["latents"]
    if not np.issubdtype(latents.dtype, np.integer):
        raise ArtifactError(
            f"tensor 'latents' has dtype {latents.dtype}; accepted: {' or '.join(INTEGER_DTYPES)}"
            " (the SAE latents' integer indices)"
        )
    k = int(latents.size)
    if latents.ndim != 1 or not 1 <= k <= MAX_LATENTS:
        raise ArtifactError(
            f"tensor 'latents' has shape {list(latents.shape)}; accepted: [k] with 1 ≤ k ≤ {MAX_LATENTS}"
            " latent indices"
        )
    values, counts = np.unique(latents, return_counts=True)
    if (counts > 1).any():
        raise ArtifactError(
            f"tensor 'latents' repeats latent(s) {', '.join(str(v) for v in values[counts > 1][:10])};"
            " accepted: distinct indices"
        )
    if (latents < 0).any():
        raise ArtifactError(
            f"tensor 'latents' holds negative indices ({int(latents.min())}); accepted: 0..width−1"
        )
    wanted = {"weight": ((k,),), "bias": ((), (1,)), "mean": ((k,),), "scale": ((k,),)}
    for name, shapes in wanted.items():
        if name in tensors and tensors[name].shape not in shapes:
            accepted = " or ".join(str(list(s)) for s in shapes)
            raise ArtifactError(
                f"tensor {name!r} has shape {list(tensors[name].shape)}; expected {accepted}"
                f" (k = {k} latents)"
            )
    for name in ("weight", "bias", "mean", "scale"):
        if name in tensors and not np.isfinite(tensors[name]).all():
            bad = int((~np.isfinite(tensors[name])).sum())
            raise ArtifactError(f"tensor {name!r} contains {bad} non-finite value(s) (NaN or ±inf)")
    if "scale" in tensors and (tensors["scale"] == 0).any():
        raise ArtifactError(f"tensor 'scale' has {int((tensors['scale'] == 0).sum())} zero entries")
    return k


# --------------------------------------------------------------------------- the SAE it reads


def sae_hash(artifact_metadata: Mapping[str, str] | None) -> str:
    """The SAE weights' SHA-256 the artifact's ``__metadata__`` names, or a refusal saying how."""
    how = (
        f"an SAE-feature probe (tensor 'latents') names its SAE in the safetensors header: __metadata__"
        f' {{"{SAE_HASH_KEY}": "<64 lowercase hex>"}}, the SHA-256 of a registered SAE\'s weights'
        " (registry/saes.yaml)"
    )
    if not artifact_metadata:
        raise SaeProbeRefused(f"{how}; this artifact's header has no __metadata__")
    sha = artifact_metadata.get(SAE_HASH_KEY)
    if sha is None:
        raise SaeProbeRefused(f"{how}; its __metadata__ has no {SAE_HASH_KEY}")
    if not _SHA256.match(sha):
        raise SaeProbeRefused(f"{how}; {SAE_HASH_KEY} is {sha[:80]!r}")
    return sha


def sae_spec_for(sha: str, saes: SaeRegistry) -> SaeSpec:
    """The registered SAE whose weights hash to ``sha``, or a refusal listing the registered ones."""
    spec = saes.by_weights_sha256(sha)
    if spec is None:
        listed = ", ".join(f"{s.id} ({s.weights_sha256[:12]}…)" for s in saes.saes.values())
        raise SaeProbeRefused(
            f"no registered SAE has weights SHA-256 {sha[:12]}… ({SAE_HASH_KEY} of the artifact's"
            f" __metadata__); registered (registry/saes.yaml): {listed or 'none yet'}"
        )
    return spec


def sae_site_check(spec: SaeSpec, site: ProbeSite) -> None:
    """The SAE reads the probe's base model at the probe's layer; the probe reads ``last_token``
    of a ``single`` input. Each refusal names the metadata field at fault."""
    if spec.model != site.base_model:
        raise SaeProbeRefused(
            f"SAE {spec.id} encodes {spec.model}'s residual stream, but the probe's base_model is"
            f" {site.base_model}; accepted: an SAE of the probe's own base model",
            field="base_model",
        )
    if spec.layer != site.layer:
        raise SaeProbeRefused(
            f"SAE {spec.id} encodes layer {spec.layer}, but the probe's layer is {site.layer};"
            f" accepted: layer {spec.layer}",
            field="layer",
        )
    if site.position != "last_token":
        raise SaeProbeRefused(
            f"position {site.position!r}: an SAE-feature probe reads last_token only; {_MODEL_STREAM}",
            field="position",
        )
    if site.input != "single":
        raise SaeProbeRefused(
            f"input {site.input!r}: an SAE-feature probe reads a single input only; a contrast pair's"
            " φ(x⁺) − φ(x⁻) is a difference of residuals, not a residual the SAE was trained to encode",
            field="input",
        )


def sae_latents_check(latents: np.ndarray, spec: SaeSpec) -> None:
    """Every index within the SAE's width."""
    over = latents[latents >= spec.width]
    if over.size:
        raise SaeProbeRefused(
            f"tensor 'latents' holds index {int(over.max())}; accepted: 0..{spec.width - 1}"
            f" (SAE {spec.id} has {spec.width} latents)"
        )


def sae_probe_check(
    tensors: Mapping[str, np.ndarray],
    artifact_metadata: Mapping[str, str] | None,
    *,
    saes: SaeRegistry,
    site: ProbeSite,
) -> SaeSpec:
    """An SAE-feature artifact against the registered SAEs and the probe's metadata; return the
    SAE's entry, or raise :class:`SaeProbeRefused`."""
    spec = sae_spec_for(sae_hash(artifact_metadata), saes)
    sae_site_check(spec, site)
    sae_latents_check(tensors["latents"], spec)
    return spec


def sae_encoder(root: str | Path, spec: SaeSpec) -> SaeEncoder:
    """The registered SAE ``spec`` under ``root``, read once per process (the weights' hash is
    checked against ``registry/saes.yaml`` on that first read)."""
    return _encoder_cached(str(Path(root).resolve()), spec.id, spec.weights_sha256)


@functools.lru_cache(maxsize=8)
def _encoder_cached(root: str, sae_id: str, sha256: str) -> SaeEncoder:
    from evaluator.core.sae.model import sae_from_registry

    sae, _, spec = sae_from_registry(sae_id, root=Path(root))
    if spec.weights_sha256 != sha256:  # registry/saes.yaml changed since the caller read it
        raise SaeProbeRefused(
            f"SAE {sae_id}: registry/saes.yaml now pins {spec.weights_sha256[:12]}…, not {sha256[:12]}…"
        )

    def array(t: Any) -> np.ndarray:
        return t.detach().to("cpu").double().numpy()

    return SaeEncoder(
        id=spec.id,
        sha256=sha256,
        model=spec.model,
        layer=spec.layer,
        k=sae.k,
        W_enc=array(sae.W_enc),
        b_enc=array(sae.b_enc),
        b_dec=array(sae.b_dec),
        sae=sae,
        context=spec.context,
    )
