"""What every run a worker executes shares: the registry, the measurement protocol, the loaded
base models (kept per worker process), a version's artifact as an evaluator Probe, and the outcome
of a run (``RunOutcome``: the values to store). Nothing here writes to the database (services do).

The worker function of each run kind is its axis's (``leaderboard.axes``: ``run_execute`` looks the
run's kind up in ``AXES``); this module sits under the axes and imports none of them.

Every run is measured under the registry's current measurement protocol (registry/protocols/):
models are loaded with ``protocol=`` (float32, TF32 off; anything else is refused), harvested with
its settings, and each outcome records the protocol and the environment (evaluator.core.environment).
The device is ``PROBEBENCH_DEVICE`` (settings.EVALUATION_DEVICE; default: CUDA when available).

Before a worker takes any run it scores the canary of each base model it serves
(``canary_refusal``, called at the worker's start by ``leaderboard.tasks``; evaluator.axes.canary):
a worker whose numbers differ from the committed ones refuses to start.
"""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluator.axes.canary import canary_path, canary_read, canary_verdicts
from evaluator.core.harvest import HarvestConfig
from evaluator.core.probes import probe_from_tensors, read_artifact
from evaluator.errors import EvaluatorError, InfrastructureError
from leaderboard.artifacts import artifact_abspath
from leaderboard.models import ProbeVersion
from leaderboard.registry_sync import registry_load

log = logging.getLogger(__name__)

#: a run's progress: (fraction done, step)
Progress = Callable[[float, str], None]
MODELS_KEPT = 2  # loaded base models a worker keeps in memory between runs
#: the longest the canary may take at a worker's start (a first start converts the GGUF weights)
CANARY_TIMEOUT_S = 1800


@dataclass
class RunOutcome:
    """What a run's worker function returns: the values the service stores on the run."""

    example_scores: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    cache_key: str = ""
    split_sha256: str = ""
    protocol: str = ""  # the measurement protocol the run followed
    environment: dict[str, Any] = field(default_factory=dict)  # evaluator.core.environment


# --------------------------------------------------------------------------- per-process caches

_registries: dict[str, Any] = {}
_models: OrderedDict[str, Any] = OrderedDict()
_lock = threading.Lock()


def _registry_fingerprint(root: Path) -> tuple:
    """What load_registry reads, by (name, size, mtime): a maintainer who adds a task and syncs
    the database does not have to restart the workers."""
    files = [root / "tasks.yaml", root / "registry" / "licenses.yaml", root / "registry" / "models.yaml"]
    files.append(root / "registry" / "saes.yaml")
    files += sorted((root / "registry" / "weights").glob("*"))
    files += sorted((root / "registry" / "protocols").glob("*"))
    out = []
    for f in files:
        try:
            st = f.stat()
        except FileNotFoundError:
            continue
        out.append((str(f), st.st_size, st.st_mtime_ns))
    return tuple(out)


def registry():
    """The registry, kept per worker process and reloaded when its files change (the split
    hashes are re-checked per run)."""
    root = Path(settings.REGISTRY_ROOT)
    fingerprint = _registry_fingerprint(root)
    cached = _registries.get(str(root))
    if cached is None or cached[0] != fingerprint:
        cached = _registries[str(root)] = (fingerprint, registry_load())
    return cached[1]


def protocol():
    """The measurement protocol every run of this worker follows (the registry's current one)."""
    return registry().protocol()


def loaded_model(model_id: str):
    """A base model kept loaded between runs of the same worker (LRU of MODELS_KEPT), under the
    protocol: float32 whatever the hardware offers (``dtype="auto"`` would pick bf16 on a CPU
    with AVX512-BF16 units or a GPU), TF32 off on CUDA."""
    from evaluator.core.models import load_model

    current = protocol()
    key = f"{model_id}@{current.id}"
    with _lock:
        if key in _models:
            _models.move_to_end(key)
            return _models[key]
        lm = load_model(
            model_id,
            registry=registry(),
            cache_dir=settings.CACHE_DIR,
            device=getattr(settings, "EVALUATION_DEVICE", None) or None,
            protocol=current,
        )
        _models[key] = lm
        while len(_models) > MODELS_KEPT:
            _models.popitem(last=False)
        return lm


def model_libraries_import() -> list[str]:
    """Import the model libraries and the registry's architectures now (a worker process at
    start, before its first run: ``leaderboard.tasks``), never under a run's time limit."""
    from evaluator.core.models import model_libraries_import as import_now

    return import_now(tuple(sorted({spec.architecture for spec in registry().models.values()})))


def probe_for(version: ProbeVersion):
    """The stored artifact of a version as an evaluator Probe (its metadata as submitted)."""
    path = artifact_abspath(version.artifact_path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InfrastructureError(
            f"artifact file {version.artifact_path} is missing from the store"
        ) from None
    sha = hashlib.sha256(data).hexdigest()
    if sha != version.artifact_sha256:
        raise InfrastructureError(
            f"artifact {version.artifact_path} hashes to {sha}, not {version.artifact_sha256}"
        )
    metadata = {k: v for k, v in version.metadata.items() if k != "probe"}
    if version.recipe is not None:
        metadata["recipe"] = version.recipe
    tensors, header = read_artifact(data, max_bytes=settings.MAX_ARTIFACT_BYTES)
    return probe_from_tensors(
        tensors, metadata, registry=registry(), sha256=sha, path=str(path), artifact_metadata=header
    )


def harvest_config():
    """The protocol's harvest settings."""
    return HarvestConfig.from_protocol(protocol())


def measured(outcome: RunOutcome, lm) -> RunOutcome:
    """Record the protocol and the environment the run was measured in."""
    outcome.protocol = lm.protocol_id or ""
    outcome.environment = lm.environment()
    return outcome


# --------------------------------------------------------------------------- the canary


def canary_models() -> list[str]:
    """The base models this worker serves: those PROBEBENCH_MODELS names, else every model of the
    registry but those loaded on request."""
    reg = registry()
    if settings.ENABLED_MODELS:
        return [m for m in settings.ENABLED_MODELS if m in reg.models]
    return [m.id for m in reg.models.values() if not m.on_request]


def canary_file() -> Path:
    """The committed canary (registry/canary.json under the registry root)."""
    return canary_path(settings.REGISTRY_ROOT)


def canary_in_process(models: list[str]) -> list[dict[str, Any]]:
    """The verdicts measured in this process, each model loaded as the runs load it
    (:func:`loaded_model`, so the first runs find it loaded): a solo or threads pool, whose runs
    execute in this process."""
    canary = canary_read(canary_file())
    return [v.to_dict() for v in canary_verdicts(canary, registry(), models, load=loaded_model)]


def canary_apart(models: list[str]) -> list[dict[str, Any]]:
    """The verdicts measured by ``python -m evaluator canary`` in a process of its own, with this
    worker's registry, cache, device and environment: a prefork pool's processes are forked from
    this one, which must not have started torch's thread pools (a fork after them can hang) nor
    hold the models."""
    cmd = [sys.executable, "-m", "evaluator", "canary", "--json", "--models", ",".join(models)]
    cmd += ["--registry", str(settings.REGISTRY_ROOT), "--cache-dir", str(settings.CACHE_DIR)]
    cmd += ["--canary-file", str(canary_file())]
    device = getattr(settings, "EVALUATION_DEVICE", None)
    if device:
        cmd += ["--device", str(device)]
    try:
        proc = subprocess.run(
            cmd, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=CANARY_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise InfrastructureError(f"the canary did not finish within {CANARY_TIMEOUT_S} s") from None
    if proc.returncode not in (0, 1):  # 1: a model differs, and the JSON says which
        raise InfrastructureError(
            f"the canary exited with status {proc.returncode}: {proc.stderr.strip()[-2000:]}"
        )
    return json.loads(proc.stdout)["models"]


def canary_refusal(*, in_process: bool) -> str | None:
    """Score the canary of every base model this worker serves (evaluator.axes.canary) and log
    each verdict; the reason to refuse to start (a model differs, its canary is stale, or the
    canary could not run), or None."""
    models = canary_models()
    if not models:
        return None
    try:
        verdicts = canary_in_process(models) if in_process else canary_apart(models)
    except EvaluatorError as exc:  # no canary file, a malformed one, a check that crashed
        reason = f"the canary could not run: {exc}"
        log.error("canary: %s", reason)
        return reason
    for v in verdicts:
        level = logging.ERROR if v["refuses"] else logging.INFO if v["status"] == "agree" else logging.WARNING
        log.log(
            level, "canary: %s (model load %.1f s, check %.1f s)", v["line"], v["load_seconds"], v["seconds"]
        )
    refusing = [v["line"] for v in verdicts if v["refuses"]]
    return "; ".join(refusing) if refusing else None
