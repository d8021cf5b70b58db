"""Latency: the probe-only forward, and the model forward up to the probe's layer.

The probe latency is scored: the probe applied to one example's activation vector (batch 1) on
the worker's device, median over ≥ 100 repetitions, in ms, reported with the device. The model
forward up to the layer is reported beside it, not scored.
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from evaluator.core.harvest import forward_until
from evaluator.metrics.results import fields_dict

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel
    from evaluator.core.probes import Probe

MIN_REPS = 100


@dataclass(frozen=True)
class LatencyResult:
    probe_ms: float  # median over reps: the scored number
    probe_ms_p90: float
    reps: int
    device: str  # e.g. "cpu (x86_64, 2 threads)" or "cuda (NVIDIA H100 ...)"
    model_forward_ms: float | None = None  # median, batch 1, up to the probe's layer (not scored)
    model_forward_reps: int = 0
    model_forward_tokens: int = 0
    layer: int | None = None

    def to_dict(self) -> dict:
        return fields_dict(self)


def device_description(device) -> str:
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)"


def _sync(device) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def measure_probe_latency(
    probe: Probe, *, device="cpu", reps: int = 200, warmup: int = 20, seed: int = 0
) -> tuple[float, float, int]:
    """(median ms, p90 ms, reps) of the probe applied to one activation vector, batch 1."""
    import torch

    reps = max(reps, MIN_REPS)
    forward = probe.torch_forward(device)
    x = torch.randn(1, probe.d_model, generator=torch.Generator().manual_seed(seed)).to(device)
    times = np.empty(reps)
    with torch.inference_mode():
        for _ in range(warmup):
            forward(x)
        _sync(device)
        for i in range(reps):
            start = time.perf_counter_ns()
            forward(x)
            _sync(device)
            times[i] = (time.perf_counter_ns() - start) / 1e6
    return float(np.median(times)), float(np.quantile(times, 0.9)), reps


def measure_forward_latency(lm: LoadedModel, prompt: str, *, layer: int, reps: int = 5) -> tuple[float, int]:
    """(median ms, n_tokens) of the base-model forward on one prompt, stopped after ``layer``."""

    enc = lm.tokenizer([prompt], return_tensors="pt", truncation=True, max_length=lm.max_length)
    batch = {
        "input_ids": enc["input_ids"].to(lm.device),
        "attention_mask": enc["attention_mask"].to(lm.device),
    }
    forward_until(lm, batch, [layer])  # warm-up
    times = []
    for _ in range(reps):
        _sync(lm.device)
        start = time.perf_counter_ns()
        forward_until(lm, batch, [layer])
        _sync(lm.device)
        times.append((time.perf_counter_ns() - start) / 1e6)
    return float(np.median(times)), int(enc["input_ids"].shape[1])


def measure_latency(
    probe: Probe,
    lm: LoadedModel | None = None,
    *,
    prompt: str | None = None,
    reps: int = 200,
    forward_reps: int = 5,
) -> LatencyResult:
    """Probe latency on the model's device (or CPU), plus the model forward when ``lm`` and a
    representative ``prompt`` are given."""
    device = lm.device if lm is not None else "cpu"
    median, p90, n = measure_probe_latency(probe, device=device, reps=reps)
    forward_ms, tokens, forward_n = None, 0, 0
    if lm is not None and prompt is not None:
        forward_ms, tokens = measure_forward_latency(lm, prompt, layer=probe.layer, reps=forward_reps)
        forward_n = forward_reps
    return LatencyResult(
        probe_ms=median,
        probe_ms_p90=p90,
        reps=n,
        device=device_description(device),
        model_forward_ms=forward_ms,
        model_forward_reps=forward_n,
        model_forward_tokens=tokens,
        layer=probe.layer,
    )
