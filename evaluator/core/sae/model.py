"""A TopK sparse autoencoder (SAE) on one layer's residual stream, in plain torch, and its files.

The SAE (x is one residual vector "d_model", the latents are "width"):

    pre(x)  = (x − b_dec) W_enc + b_enc
    z(x)    = ReLU of the k largest entries of pre(x), every other latent 0
    x̂(x)    = z(x) W_dec + b_dec

``W_dec``'s rows (one per latent) have unit norm. The trainer works on scaled activations and
folds the scale into the biases before saving (:meth:`TopKSae.folded`), so a saved SAE reads the
raw residual stream as the evaluator harvests it.

Files, in the SAELens layout: a directory with ``cfg.json`` and ``sae_weights.safetensors`` holding
``W_enc`` [d_model, width], ``b_enc`` [width], ``W_dec`` [width, d_model], ``b_dec`` [d_model]
(float32). ``cfg.json`` carries SAELens' fields and, under ``probebench``, where the SAE reads,
how it was trained and the SHA-256 of the weights file. :func:`load_sae` checks that hash (or the
registry's, :func:`sae_from_registry`) before it reads a byte of the weights, then the tensors'
names, shapes and values.

torch and safetensors are imported inside the functions that need them, so importing this module
(the command line does) stays cheap.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.data.registry.files import default_root, sha256_file
from evaluator.data.registry.saes import SaeRegistry, SaeSpec, load_saes
from evaluator.errors import ArtifactError, InfrastructureError

WEIGHTS_NAME = "sae_weights.safetensors"
CFG_NAME = "cfg.json"
CARD_NAME = "card.json"
#: the tensors of a TopK SAE file, in SAELens' names
TENSORS = ("W_enc", "b_enc", "W_dec", "b_dec")
# How the weights may be stored (``cfg.json``'s "dtype"); they are read back as float32 either way.
STORAGE_DTYPES = {"float32": "float32", "float16": "float16"}


class SaeHashMismatch(InfrastructureError):
    """An SAE's weights file does not hash to the SHA-256 it is pinned to: refused, never read."""

    def __init__(self, path: Path, expected: str, actual: str, pinned_by: str):
        self.path, self.expected, self.actual = path, expected, actual
        super().__init__(
            f"SAE weights {path} have SHA-256 {actual}, but {pinned_by} pins {expected}: the file was"
            " changed or replaced; retrain it (python -m evaluator train-sae) or restore the pinned file"
        )


class SaeFilesError(ArtifactError):
    """An SAE directory is incomplete or its tensors do not make a TopK SAE."""


@dataclass
class TopKSae:
    """The four tensors and k. Tensors may require grad (training) or not (reading)."""

    W_enc: Any  # "d_model width"
    b_enc: Any  # "width"
    W_dec: Any  # "width d_model", unit-norm rows
    b_dec: Any  # "d_model"
    k: int

    @property
    def d_model(self) -> int:
        return int(self.W_enc.shape[0])

    @property
    def width(self) -> int:
        return int(self.W_enc.shape[1])

    @classmethod
    def initial(
        cls, d_model: int, width: int, k: int, *, generator: Any, b_dec: Any | None = None
    ) -> TopKSae:
        """Random unit-norm decoder rows, the encoder their transpose, ``b_enc`` 0 and ``b_dec`` as
        given (the trainer passes the geometric median of a sample) or 0."""
        import torch

        if not 1 <= k <= width:
            raise ValueError(f"k must be in 1..width ({width}), got {k}")
        w_dec = torch.randn(width, d_model, generator=generator, dtype=torch.float32)
        w_dec /= w_dec.norm(dim=1, keepdim=True)
        bias = torch.zeros(d_model) if b_dec is None else b_dec.detach().to(torch.float32).clone()
        return cls(W_enc=w_dec.T.clone(), b_enc=torch.zeros(width), W_dec=w_dec, b_dec=bias, k=k)

    def parameters(self) -> list[Any]:
        return [self.W_enc, self.b_enc, self.W_dec, self.b_dec]

    def requires_grad_(self, flag: bool = True) -> TopKSae:
        for tensor in self.parameters():
            tensor.requires_grad_(flag)
        return self

    def pre_activations(self, x: Any) -> Any:
        """pre(x) "n width" of activations ``x`` "n d_model"."""
        return (x - self.b_dec) @ self.W_enc + self.b_enc

    def encode_topk(self, x: Any) -> tuple[Any, Any]:
        """The k selected latents of each row: (values "n k" after the ReLU, indices "n k")."""
        import torch

        values, indices = self.pre_activations(x).topk(self.k, dim=-1)
        return torch.relu(values), indices

    def encode(self, x: Any) -> Any:
        """z(x) "n width": at most k non-zero latents per row (exactly k where they are positive)."""
        import torch

        values, indices = self.encode_topk(x)
        return torch.zeros(x.shape[0], self.width, dtype=values.dtype, device=values.device).scatter(
            1, indices, values
        )

    def decode_topk(self, values: Any, indices: Any) -> Any:
        """x̂ "n d_model" from the selected latents, reading only their k decoder rows."""
        import torch.nn.functional as F

        return F.embedding_bag(indices, self.W_dec, per_sample_weights=values, mode="sum") + self.b_dec

    def decode(self, z: Any) -> Any:
        """x̂ "n d_model" from dense latents z "n width"."""
        return z @ self.W_dec + self.b_dec

    def reconstruct(self, x: Any) -> Any:
        """x̂(x) "n d_model"."""
        return self.decode_topk(*self.encode_topk(x))

    def normalize_decoder_(self) -> None:
        """Scale every decoder row back to unit norm (after each optimiser step)."""
        import torch

        with torch.no_grad():
            self.W_dec /= self.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)

    def remove_parallel_grad_(self) -> None:
        """Drop the part of each decoder row's gradient along the row: a step then turns the row
        instead of growing it (the renormalisation after the step would undo the growth anyway)."""
        import torch

        grad = self.W_dec.grad
        if grad is None:
            return
        with torch.no_grad():
            grad -= (grad * self.W_dec).sum(dim=1, keepdim=True) * self.W_dec

    def folded(self, scale: float) -> TopKSae:
        """The SAE of the raw activations x, for one trained on ``scale``·x: the biases are divided
        by ``scale`` (latents come out divided by it too; the selected latents and x̂ are the same)."""
        return TopKSae(
            W_enc=self.W_enc.detach().clone(),
            b_enc=self.b_enc.detach() / scale,
            W_dec=self.W_dec.detach().clone(),
            b_dec=self.b_dec.detach() / scale,
            k=self.k,
        )

    def tensors(self, dtype: str = "float32") -> dict[str, Any]:
        """The four tensors as contiguous CPU tensors of ``dtype`` (float32 or float16), in
        SAELens' names."""
        import torch

        kind = STORAGE_DTYPES[dtype]
        return {
            name: getattr(self, name).detach().to("cpu", getattr(torch, kind)).contiguous()
            for name in TENSORS
        }

    def rounded(self, dtype: str) -> TopKSae:
        """This SAE as it reads back from weights stored in ``dtype``: each tensor rounded to it and
        returned to float32. The trainer measures the card on this, so the card is the shipped
        file's."""
        import torch

        return TopKSae(k=self.k, **{name: t.to(torch.float32) for name, t in self.tensors(dtype).items()})


def sae_cfg(
    sae: TopKSae,
    *,
    model_id: str,
    layer: int,
    context: int,
    prepend_bos: bool,
    dataset: str,
    provenance: dict[str, Any],
    dtype: str = "float32",
) -> dict[str, Any]:
    """``cfg.json``: SAELens' fields (a TopK SAE on ``blocks.{layer-1}.hook_resid_post``) and ours
    under ``probebench`` (the evaluator's layer, the training record, later the weights' hash)."""
    return {
        "architecture": "topk",
        "d_in": sae.d_model,
        "d_sae": sae.width,
        "k": sae.k,
        "activation_fn": "topk",
        "activation_fn_kwargs": {"k": sae.k},
        "apply_b_dec_to_input": True,
        "normalize_activations": "none",
        "dtype": dtype,
        "device": "cpu",
        "model_name": model_id,
        "hook_name": f"blocks.{layer - 1}.hook_resid_post",
        "hook_layer": layer - 1,
        "hook_head_index": None,
        "context_size": context,
        "prepend_bos": prepend_bos,
        "dataset_path": dataset,
        "probebench": {"layer": layer, **provenance},
    }


def _write_atomic(path: Path, write: Any) -> None:
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def save_sae(sae: TopKSae, cfg: dict[str, Any], directory: str | Path) -> str:
    """Write ``sae_weights.safetensors`` (in the dtype ``cfg.json`` names) and ``cfg.json`` (with
    the weights' SHA-256 under ``probebench.weights_sha256``) into ``directory``, each atomically;
    return the SHA-256."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights = directory / WEIGHTS_NAME
    dtype = cfg.get("dtype", "float32")
    _write_atomic(weights, lambda tmp: save_file(sae.tensors(dtype), str(tmp)))
    digest = sha256_file(weights)
    cfg = {**cfg, "probebench": {**cfg.get("probebench", {}), "weights_sha256": digest}}
    text = json.dumps(cfg, indent=2, sort_keys=False) + "\n"
    _write_atomic(directory / CFG_NAME, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return digest


def read_cfg(directory: str | Path) -> dict[str, Any]:
    """``cfg.json`` of an SAE directory (refused with what is expected when absent or not JSON)."""
    path = Path(directory) / CFG_NAME
    if not path.is_file():
        raise SaeFilesError(
            f"{directory}: no {CFG_NAME}; an SAE directory holds {CFG_NAME} and {WEIGHTS_NAME}"
        )
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SaeFilesError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(cfg, dict):
        raise SaeFilesError(f"{path}: expected a JSON object")
    return cfg


def _check_tensors(tensors: dict[str, Any], cfg: dict[str, Any], where: Path) -> int:
    import torch

    if set(tensors) != set(TENSORS):
        raise SaeFilesError(f"{where}: tensors {sorted(tensors)}; a TopK SAE holds {', '.join(TENSORS)}")
    if tensors["W_enc"].dim() != 2 or 0 in tensors["W_enc"].shape:
        raise SaeFilesError(
            f"{where}: W_enc has shape {tuple(tensors['W_enc'].shape)}, expected [d_model, width]"
        )
    d, w = (int(n) for n in tensors["W_enc"].shape)
    shapes = {"W_enc": (d, w), "b_enc": (w,), "W_dec": (w, d), "b_dec": (d,)}
    for name, shape in shapes.items():
        if tuple(tensors[name].shape) != shape:
            raise SaeFilesError(f"{where}: {name} has shape {tuple(tensors[name].shape)}, expected {shape}")
        if not bool(torch.isfinite(tensors[name]).all()):
            raise SaeFilesError(f"{where}: {name} holds NaN or infinite values")
    k = cfg.get("k")
    if (cfg.get("d_in"), cfg.get("d_sae")) != (d, w) or not isinstance(k, int) or not 1 <= k <= w:
        raise SaeFilesError(
            f"{where}: {CFG_NAME} says d_in {cfg.get('d_in')}, d_sae {cfg.get('d_sae')}, k {k};"
            f" the weights are {d} × {w} (k must be in 1..{w})"
        )
    return k


def load_sae(
    directory: str | Path, *, expected_sha256: str | None = None, device: str = "cpu"
) -> tuple[TopKSae, dict[str, Any]]:
    """Read an SAE directory after checking its weights file against ``expected_sha256`` (default:
    the hash its ``cfg.json`` records). A file that differs by one byte is refused unread."""
    import torch
    from safetensors.torch import load_file

    directory = Path(directory)
    cfg = read_cfg(directory)
    weights = directory / WEIGHTS_NAME
    if not weights.is_file():
        raise SaeFilesError(f"{directory}: no {WEIGHTS_NAME}")
    pinned_by = "the registry (registry/saes.yaml)" if expected_sha256 else f"{directory / CFG_NAME}"
    expected = expected_sha256 or (cfg.get("probebench") or {}).get("weights_sha256")
    if not isinstance(expected, str) or len(expected) != 64:
        raise SaeFilesError(f"{directory}: {CFG_NAME} records no probebench.weights_sha256 to check against")
    actual = sha256_file(weights)
    if actual != expected:
        raise SaeHashMismatch(weights, expected, actual, pinned_by)
    tensors = load_file(str(weights))
    k = _check_tensors(tensors, cfg, weights)
    moved = {name: t.to(device=device, dtype=torch.float32) for name, t in tensors.items()}
    return TopKSae(k=k, **moved), cfg


def sae_from_registry(
    sae_id: str, *, root: Path | None = None, saes: SaeRegistry | None = None, device: str = "cpu"
) -> tuple[TopKSae, dict[str, Any], SaeSpec]:
    """A registered SAE, its weights checked against ``weights_sha256`` of ``registry/saes.yaml``
    and its ``cfg.json`` against the entry (model, layer, width, k)."""
    root = Path(root) if root is not None else default_root()
    spec = (saes or load_saes(root)).sae(sae_id)
    sae, cfg = load_sae(spec.directory(root), expected_sha256=spec.weights_sha256, device=device)
    found = (cfg.get("model_name"), cfg.get("hook_name"), sae.d_model, sae.width, sae.k)
    wanted = (spec.model, spec.hook, spec.d_model, spec.width, spec.k)
    if found != wanted:
        raise SaeFilesError(f"SAE {sae_id}: {CFG_NAME} and weights say {found}, registry/saes.yaml {wanted}")
    return sae, cfg, spec


def default_lr(width: int) -> float:
    """Adam's learning rate for a width: 2e-4 at 16,384 latents, scaled by 1/sqrt(width) (the
    scaling law reported for TopK SAEs)."""
    return 2e-4 * math.sqrt(16384 / width)
