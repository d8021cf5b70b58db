"""The environment a number was measured in, recorded beside every run and score.

Under a measurement protocol (registry/protocols/) two environments must give the same numbers
within its tolerances; the record says which environment it was, so a disagreement can be traced
to a device, a CPU's kernel set, a library version or a thread count.

    environment_capture(device="cpu", dtype="float32", protocol_id="p1")
    → {"protocol": "p1", "device": "cpu", "dtype": "float32", "cpu_model": "AMD EPYC",
       "cpu_flags": {"avx2": true, "avx512f": true, "avx512_bf16": true, "amx_bf16": false},
       "cpu_capability": "AVX512", "gpu": null, "threads": 2, "torch": "2.13.0+cpu", ...}

:func:`cpu_info` and :func:`environment_label` are pure (text in, values out); only
:func:`environment_capture` reads the machine and the installed libraries. torch is imported
inside the functions so ``import evaluator`` stays cheap.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

#: CPU flags that decide which kernels (and which bf16 path) torch can use
CPU_FLAGS: tuple[str, ...] = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpu_info(cpuinfo: str) -> dict[str, Any]:
    """The CPU model and the flags of :data:`CPU_FLAGS` from the text of ``/proc/cpuinfo``."""
    model, flags = "", set[str]()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return {"cpu_model": model, "cpu_flags": {flag: flag in flags for flag in CPU_FLAGS}}


def _read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:  # not Linux: the model from platform, the flags unknown
        return f"model name\t: {platform.processor()}\n"


def environment_capture(*, device: str, dtype: str, protocol_id: str | None) -> dict[str, Any]:
    """JSON-able facts about where a number is measured: the protocol (None: exploration, e.g.
    bf16), device, CPU model and flags or GPU name, dtype, library versions, thread count."""
    import numpy as np
    import sklearn
    import torch
    import transformers

    on_cuda = str(device).startswith("cuda")
    out: dict[str, Any] = {"protocol": protocol_id, "device": str(device), "dtype": dtype}
    out |= cpu_info(_read_cpuinfo())
    out["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    out["gpu"] = torch.cuda.get_device_name(torch.device(device)) if on_cuda else None
    out["tf32"] = (
        {
            "matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        }
        if on_cuda
        else None
    )
    out["threads"] = torch.get_num_threads()
    out |= {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "scikit_learn": sklearn.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }
    return out


def environment_label(environment: dict[str, Any] | None) -> str:
    """One line for a page: "p1 · cpu (AMD EPYC, AVX512, 2 threads) · float32 · torch 2.13.0, …".

    An empty record (a run measured before environments were recorded) gives ""."""
    if not environment:
        return ""
    protocol = environment.get("protocol") or "no protocol"
    where = str(environment.get("device", "?"))
    if environment.get("gpu"):
        where += f" ({environment['gpu']})"
    else:
        details = [environment.get("cpu_model") or "", environment.get("cpu_capability") or ""]
        if environment.get("threads"):
            details.append(f"{environment['threads']} threads")
        details = [d for d in details if d]
        if details:
            where += f" ({', '.join(details)})"
    versions = ", ".join(
        f"{name} {environment[key]}"
        for name, key in (
            ("torch", "torch"),
            ("transformers", "transformers"),
            ("scikit-learn", "scikit_learn"),
        )
        if environment.get(key)
    )
    return " · ".join(x for x in (protocol, where, str(environment.get("dtype", "?")), versions) if x)
