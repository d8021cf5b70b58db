"""The one place where the web pipeline calls the evaluator: an EvaluationRun row in, the values
to store out. Nothing here writes to the database (services do).

Each run kind maps to evaluator functions:

    score      execute_run on the probe's task/split; on ``test`` also latency and the baselines
    reference  execute_run of the eval-awareness reference probe on another probe's test split
    reproduce  reproduction_check (the recipe re-run, compared with the artifact)
    transfer   cross_model_transfer to the run's base model (ρ_CE for that target)
    steer      steer_probe on the run's task (direction utility; not part of the ProbeScore)
    stress     execute_run on the task's stress split (read against the clean runs by the score writer)
    robustness attack_probe on the run's task (the protocol's soft-suffix attack; goodhart component)
    holdout    the probe on the quarter's minted holdout (file verified against its SHA-256)

Every run is measured under the registry's current measurement protocol (registry/protocols/):
models are loaded with ``protocol=`` (float32, TF32 off; anything else is refused), harvested with
its settings, and each outcome records the protocol and the environment (evaluator.core.environment).
The device is ``PROBEBENCH_DEVICE`` (settings.EVALUATION_DEVICE; default: CUDA when available).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluator.errors import EvaluatorError, InfrastructureError
from leaderboard.artifacts import artifact_abspath
from leaderboard.models import EvaluationRun, ProbeVersion
from leaderboard.registry_sync import registry_load

Progress = Callable[[float, str], None]
Run = EvaluationRun
MODELS_KEPT = 2  # loaded base models a worker keeps in memory between runs


@dataclass
class RunOutcome:
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
    from evaluator.core.probes import probe_from_tensors, read_safetensors

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
    tensors = read_safetensors(data, max_bytes=settings.MAX_ARTIFACT_BYTES)
    return probe_from_tensors(tensors, metadata, registry=registry(), sha256=sha, path=str(path))


def harvest_config():
    """The protocol's harvest settings."""
    from evaluator.core.harvest import HarvestConfig

    return HarvestConfig.from_protocol(protocol())


def _measured(outcome: RunOutcome, lm) -> RunOutcome:
    """Record the protocol and the environment the run was measured in."""
    outcome.protocol = lm.protocol_id or ""
    outcome.environment = lm.environment()
    return outcome


# --------------------------------------------------------------------------- run kinds


def run_execute(*, run: EvaluationRun, progress: Progress) -> RunOutcome:
    kind = Run.Kind(run.kind)
    handler = {
        Run.Kind.SCORE: _score,
        Run.Kind.REFERENCE: _score,
        Run.Kind.REPRODUCE: _reproduce,
        Run.Kind.TRANSFER: _transfer,
        Run.Kind.HOLDOUT: _holdout,
        Run.Kind.STEER: _steer,
        Run.Kind.STRESS: _score,  # the stress split, scored like any split; summed up by the score writer
        Run.Kind.ROBUSTNESS: _robustness,
    }[kind]
    return handler(run, progress)


def _score(run: EvaluationRun, progress: Progress) -> RunOutcome:
    """One split of one task: the per-task step the CLI takes too (evaluator.axes.run.measure_split);
    the test split of a score run adds the baselines and the latency."""
    from evaluator.axes.run import MeasureSetup, measure_split

    probe = probe_for(run.probe_version)
    lm = loaded_model(probe.base_model)
    with_extras = run.kind == Run.Kind.SCORE and run.split == "test"
    measured = measure_split(
        probe,
        task_id=run.task_id,
        split=run.split,
        setup=MeasureSetup(registry(), settings.CACHE_DIR, None, None, harvest_config()),
        lm=lm,
        progress=progress,
        extras=with_extras,
        latency=with_extras,
    )
    result = measured.run
    outcome = RunOutcome(
        example_scores=result.examples.to_records(),
        metrics={
            "n": result.n,
            "model": result.model,
            "config": result.config,
            "cache_hit": result.cache_hit,
            "probe_sha256": result.probe_sha256,
            "layer": result.layer,
            "position": result.position,
        },
        timings=result.timings,
        cache_key=result.cache_key,
        split_sha256=result.split_sha256,
    )
    if measured.baselines is not None:
        outcome.metrics["baselines"] = measured.baselines.to_dict()
    if measured.latency is not None:
        outcome.metrics["latency"] = measured.latency.to_dict()
    progress(1.0, "scored")
    return _measured(outcome, lm)


def _reproduce(run: EvaluationRun, progress: Progress) -> RunOutcome:
    from evaluator.axes.reproduction import reproduction_check

    probe = probe_for(run.probe_version)
    lm = loaded_model(probe.base_model)
    result = reproduction_check(
        probe,
        registry=registry(),
        cache_dir=settings.CACHE_DIR,
        lm=lm,
        harvest_config=harvest_config(),
        progress=progress,
        protocol=protocol(),
    )
    outcome = RunOutcome(
        metrics={"reproduction": result.to_dict()},
        timings={"total": result.seconds},
        cache_key=result.train_cache_key,
    )
    return _measured(outcome, lm)


def _transfer(run: EvaluationRun, progress: Progress) -> RunOutcome:
    from evaluator.axes.transfer import cross_model_transfer

    probe = probe_for(run.probe_version)
    [result] = cross_model_transfer(
        probe,
        targets=[run.base_model_id],
        registry=registry(),
        cache_dir=settings.CACHE_DIR,
        config=harvest_config(),
        progress=progress,
        load=loaded_model,
    )
    outcome = RunOutcome(
        metrics={"transfer": result.to_dict()},
        timings={"total": result.seconds},
        cache_key=result.refit_train_cache_key,
    )
    return _measured(outcome, loaded_model(run.base_model_id))


def _steer(run: EvaluationRun, progress: Progress) -> RunOutcome:
    """Direction utility on one task: the steer JSON of that task is the stored result."""
    from evaluator.axes.steer import steer_probe

    probe = probe_for(run.probe_version)
    out = steer_probe(
        probe,
        registry=registry(),
        cache_dir=settings.CACHE_DIR,
        tasks=[run.task_id],
        protocol=protocol(),
        load=loaded_model,
        progress=progress,
    )
    if not out["eligible"]:
        raise EvaluatorError(f"direction utility: {out['reason']}")
    outcome = RunOutcome(
        metrics={"steer": out["tasks"][run.task_id], "settings": out["settings"]},
        timings={"total": out["seconds"]},
    )
    return _measured(outcome, loaded_model(probe.base_model))


def suffix_path(artifact_sha256: str, task_id: str) -> Path:
    """Where a probe's final suffix on a task is kept (under the protocol: a new budget is a new
    file); content-addressed like the activation cache, so every worker may reuse it."""
    current = protocol()
    name = f"{artifact_sha256}-{task_id}-{current.id}-{current.sha256[:12]}.safetensors"
    return Path(settings.CACHE_DIR) / "attack-suffixes" / name


def _attack_kept(probe, task_id: str, lm, progress: Progress) -> dict:
    """The protocol's attack on ``probe``, its final suffix kept at :func:`suffix_path` (written
    whole or not at all: two workers may race, and both write the same bytes)."""
    import os

    from evaluator.axes.attack import attack_probe

    path = suffix_path(probe.sha256, task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.part")
    out = attack_probe(
        probe,
        task_id=task_id,
        registry=registry(),
        cache_dir=settings.CACHE_DIR,
        lm=lm,
        progress=progress,
        suffix_out=partial,
    )
    if partial.exists():
        os.replace(partial, path)
    return out


def _transfer_attack(run: EvaluationRun, probe, lm, progress: Progress) -> dict | None:
    """The transfer attack on the run's task: the suffix made against the category's reference probe
    on this base model (selectors.shared.attack_source_version; made now and kept if no worker has
    made it yet) applied to this probe, one forward. None when the category has no such reference;
    ``{"source", "self": True}`` when this probe is it."""
    from evaluator.axes.attack import attack_probe
    from leaderboard.selectors.shared import attack_source_version

    version = run.probe_version
    source = attack_source_version(
        category_id=version.probe.category_id, base_model_id=version.probe.base_model_id, task_id=run.task_id
    )
    if source is None:
        return None
    about = {"source": source.probe.slug, "source_version": source.number}
    if source.pk == version.pk:
        return {**about, "self": True}
    path = suffix_path(source.artifact_sha256, run.task_id)
    if not path.exists():
        _attack_kept(probe_for(source), run.task_id, lm, lambda f, m: progress(0.5 + 0.4 * f, f"source {m}"))
    out = attack_probe(
        probe, task_id=run.task_id, registry=registry(), cache_dir=settings.CACHE_DIR, lm=lm, suffix_in=path
    )
    return {
        **about,
        "self": False,
        "recall_attacked": out["recall_attacked"],
        "scores": out["scores"]["positives_attacked"],
    }


def _attack_reused(run: EvaluationRun, probe) -> dict | None:
    """A robustness run queued again for its transfer attack (services.runs.transfer_attacks_refresh)
    keeps its direct attack: the same artifact, task and protocol give the same suffix, whose file is
    in the cache. None when there is nothing to keep (a first run, another protocol, no file)."""
    previous = (run.metrics or {}).get("attack")
    if (
        not previous
        or not run.example_scores
        or (previous.get("budget") or {}).get("protocol") != protocol().id
        or not suffix_path(probe.sha256, run.task_id).exists()
    ):
        return None
    return {
        **previous,
        "ids": {"positives": [e["id"] for e in run.example_scores]},
        "scores": {"positives_attacked": [float(e["score"]) for e in run.example_scores]},
        "n_positives": len(run.example_scores),
        "seconds": 0.0,
    }


def _robustness(run: EvaluationRun, progress: Progress) -> RunOutcome:
    """The protocol's soft-suffix attack against the frozen probe on one task's test positives, and
    the transfer attack (the category reference's suffix applied to it): the attacked scores are
    stored per example (the score writer recomputes the recalls from them and the clean runs), the
    recall curve over the steps and the transfer's scores in the metrics."""
    import numpy as np

    probe = probe_for(run.probe_version)
    lm = loaded_model(probe.base_model)
    out = _attack_reused(run, probe) or _attack_kept(
        probe, run.task_id, lm, lambda f, m: progress(0.5 * f, m)
    )
    transfer = _transfer_attack(run, probe, lm, progress)
    attacked = out["scores"]["positives_attacked"]
    probs = probe.probability(np.asarray(attacked, dtype=np.float64)).tolist() if attacked else []
    keys = (
        "threshold",
        "recall_clean",
        "recall_attacked",
        "steps",
        "steps_run",
        "best_step",
        "steps_to_half",
        "curve",
        "budget",
    )
    outcome = RunOutcome(
        example_scores=[
            {"id": i, "label": 1, "score": float(s), "prob": float(p)}
            for i, s, p in zip(out["ids"]["positives"], attacked, probs, strict=True)
        ],
        metrics={"attack": {k: out[k] for k in keys}, "transfer": transfer, "n": out["n_positives"]},
        timings={
            "total": out["seconds"],
            **({"attack": out["attack_seconds"]} if "attack_seconds" in out else {}),
        },
    )
    progress(1.0, "attacked")
    return _measured(outcome, lm)


def _holdout(run: EvaluationRun, progress: Progress) -> RunOutcome:
    """Score the probe on the cycle's minted holdout (the file is re-hashed against the cycle)."""
    from evaluator.axes.run import execute_run

    assert run.cycle is not None  # a holdout run belongs to a cycle
    # an on-policy task's holdout is per base model: the probe's own model's
    holdout = run.cycle.holdout_for(run.task_id, run.base_model_id)
    if holdout is None:
        raise EvaluatorError(
            f"cycle {run.cycle.quarter} has no holdout for {run.task_id} on {run.base_model_id}"
        )
    probe = probe_for(run.probe_version)
    lm = loaded_model(probe.base_model)
    result = execute_run(
        probe,
        task_id=run.task_id,
        split="holdout",
        registry=registry(),
        cache_dir=settings.CACHE_DIR,
        lm=lm,
        harvest_config=harvest_config(),
        progress=progress,
        split_file=Path(settings.DATA_DIR) / holdout["path"],
        split_sha256=holdout["sha256"],
    )
    outcome = RunOutcome(
        example_scores=result.examples.to_records(),
        metrics={"n": result.n, "model": result.model},
        timings=result.timings,
        cache_key=result.cache_key,
        split_sha256=result.split_sha256,
    )
    return _measured(outcome, lm)
