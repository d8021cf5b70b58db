"""s(x) of a probe, written once (``evaluator.core.probes``'s module docstring gives the formula
of each kind): :class:`ProbeFunction` reads a probe's parameters once into one backend's arrays,
numpy (:data:`NUMPY_BACKEND`, ``Probe.score``) or torch (:func:`torch_backend`,
``Probe.torch_forward``: differentiable in x), and applies them to "b d_model" activations → "b"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluator.core.sae_probe import SAE_KIND, SaeEncoder, kth_largest_numpy
from evaluator.errors import ArtifactError


@dataclass(frozen=True)
class _Backend:
    """The array operations s(x) needs, in one library."""

    array: Callable[[np.ndarray], Any]  # a float64 parameter → the backend's array
    relu: Callable[[Any], Any]
    concat: Callable[[list[Any]], Any]  # along the columns
    logsumexp: Callable[[Any], Any]  # of each row
    index: Callable[[np.ndarray], Any]  # integer indices → the backend's
    kth_largest: Callable[[Any, int], Any]  # of each row, "b 1"


def _numpy_logsumexp(z: np.ndarray) -> np.ndarray:
    top = z.max(axis=1, keepdims=True)
    return top[:, 0] + np.log(np.exp(z - top).sum(axis=1))


NUMPY_BACKEND = _Backend(
    array=lambda v: v,
    relu=lambda z: np.maximum(z, 0.0),
    concat=lambda parts: np.concatenate(parts, axis=1),
    logsumexp=_numpy_logsumexp,
    index=lambda v: v,
    kth_largest=kth_largest_numpy,
)


class ProbeFunction:
    """s(x) of a probe (``evaluator.core.probes``' formula, written once): its parameters read once
    into one backend's arrays (numpy for ``Probe.score``, torch for ``Probe.torch_forward``), then
    applied to "b d_model" activations → "b".

    An SAE-feature probe first encodes x with its SAE (``sae``): the selected latents' ReLU'd
    pre-activations, each kept where it is at least its row's k-th largest pre-activation (so the
    torch path is differentiable in x through the kept values), then reads them linearly."""

    def __init__(
        self, kind: str, tensors: dict[str, np.ndarray], backend: _Backend, *, sae: SaeEncoder | None = None
    ):
        a = backend.array
        self.backend = backend
        self.kind = kind
        self.encoder: tuple[Any, ...] | None = None
        if kind == SAE_KIND:
            if sae is None:
                raise ArtifactError(
                    "an SAE-feature probe is applied through its SAE: load it with a registry"
                )
            enc = (a(sae.W_enc), a(sae.b_enc), a(sae.b_dec), sae.k)
            self.encoder = (*enc, backend.index(np.asarray(tensors["latents"], dtype=np.int64)))
        self.mean = a(tensors["mean"]) if "mean" in tensors else None
        self.scale = a(tensors["scale"]) if "scale" in tensors else None
        if kind == "mlp":
            self.w1, self.b1 = a(tensors["w1"]), a(tensors["b1"])
            self.w = a(tensors["w2"].reshape(-1))
            self.b = a(tensors["b2"].reshape(-1)[0])
            self.binary = True
            return
        w = tensors["weight"]
        b = tensors.get("bias", np.zeros(1 if w.ndim == 1 else w.shape[0]))
        self.binary = w.ndim == 1 or w.shape[0] == 1
        if self.binary:  # one logit: w·x + b
            self.w, self.b = a(w.reshape(-1)), a(np.reshape(b, -1)[0])
        else:  # k ≥ 2 class logits: z₁ − logsumexp of the others
            self.w, self.b = a(w), a(b)

    def __call__(self, X: Any) -> Any:
        if self.encoder is not None:
            W_enc, b_enc, b_dec, k, latents = self.encoder
            pre = (X - b_dec) @ W_enc + b_enc  # "b width"
            kept = pre[:, latents]  # "b k"
            X = self.backend.relu(kept) * (kept >= self.backend.kth_largest(pre, k))
        if self.mean is not None:
            X = X - self.mean
        if self.scale is not None:
            X = X / self.scale
        if self.kind == "mlp":
            X = self.backend.relu(X @ self.w1.T + self.b1)
        if self.binary:
            return X @ self.w + self.b
        logits = X @ self.w.T + self.b  # "b k"
        others = self.backend.concat([logits[:, :1], logits[:, 2:]])
        return logits[:, 1] - self.backend.logsumexp(others)


def torch_backend(device: Any = "cpu", dtype: Any = None) -> _Backend:
    """The torch operations, parameters on ``device`` in ``dtype`` (float32 by default)."""
    import torch

    dt = torch.float32 if dtype is None else dtype
    return _Backend(
        array=lambda v: torch.as_tensor(v, dtype=dt, device=device),
        relu=torch.relu,
        concat=lambda parts: torch.cat(parts, dim=1),
        logsumexp=lambda z: torch.logsumexp(z, dim=1),
        index=lambda v: torch.as_tensor(v, dtype=torch.long, device=device),
        kth_largest=lambda z, k: z.topk(k, dim=1).values[:, -1:],
    )
