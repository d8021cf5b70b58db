"""One forward for every probe, and cheaper secondary runs: before and after, side by side.

Three measurements on the real models, each old path and new path in the same process (so their
ratio is measured under one load), with the largest difference between their numbers:

- ``harvest``: two reference probes of one task at different layers (cities-cp-logreg-smollm2 at
  layer 18, cities-cp-pca-smollm2 at 24) scored on the same split, on an empty activation cache.
  Old: each harvest stops at its probe's layer and stores that layer (``all_layers=False``).
  New: the first harvest keeps every layer, the second probe reads the cache. Wall time of each
  probe, model forwards, bytes on disk, max |Δ s(x)|.
- ``steer``: direction utility of cities-cp-logreg-smollm2 on cities-truth-v1 (``--steer-n``
  rows): one replay of the upper blocks per intervention vs the 2 + 2K interventions of one
  seed's random comparison stacked, alternated ``--steer-repeats`` times (the fastest
  of each). Max |Δ| of the readouts.
- ``transfer``: the transfer runs of both probes to ``--target``, old (ablations harvested on
  every call, train split at the re-fit layer only) vs shared (everything through the cache at
  every layer). Max |Δ ρ|.

The harvest and transfer parts read a slice of cities-truth-v1 (``--rows`` rows per split, half
of each class: a small registry in a temporary directory, its split files re-hashed), so they
fit a loaded 2-core machine; steer reads the real split (its subset is ``--steer-n`` rows).

    .venv/bin/python bench/bench_secondary.py --rows 48 --steer-n 16 [--parts harvest,steer,transfer]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the CLI does; see evaluator/commands/train_cli.py
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

SMOLLM = "smollm2-135m-instruct"
TASK = "cities-truth-v1"
PROBES = ("cities-cp-logreg-smollm2", "cities-cp-pca-smollm2")  # layers 18 and 24, same task
REFERENCE = ROOT / "registry" / "reference_probes"


def sliced_registry(root: Path, *, task_id: str, rows: int) -> Path:
    """A registry under ``root`` holding ``task_id`` only, each split cut to ``rows`` rows (the
    first rows/2 of each class), the split files written and hashed anew."""
    for name in ("licenses.yaml", "models.yaml"):
        (root / "registry").mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "registry" / name, root / "registry" / name)
    for folder in ("weights", "protocols"):
        shutil.copytree(ROOT / "registry" / folder, root / "registry" / folder, dirs_exist_ok=True)
    data = yaml.safe_load((ROOT / "tasks.yaml").read_text(encoding="utf-8"))
    [task] = [t for t in data["tasks"] if t["id"] == task_id]
    for split, spec in task["splits"].items():
        lines = (ROOT / spec["path"]).read_text(encoding="utf-8").splitlines()
        by_label: dict[int, list[str]] = {0: [], 1: []}
        for line in lines:
            by_label[int(json.loads(line)["label"])].append(line)
        chosen = set(by_label[0][: rows // 2] + by_label[1][: rows // 2])
        kept = [line for line in lines if line in chosen]
        body = ("\n".join(kept) + "\n").encode()
        path = root / spec["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        task["splits"][split] = {
            "path": spec["path"],
            "rows": len(kept),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
    task.pop("card", None)
    out = {"version": data.get("version", 1), "categories": data["categories"], "tasks": [task]}
    (root / "tasks.yaml").write_text(yaml.safe_dump(out, sort_keys=False), encoding="utf-8")
    return root


@contextmanager
def counting_forwards(*lms: Any) -> Iterator[list[str]]:
    """Every call of a base model's forward (one per batch), by model id."""
    calls: list[str] = []
    handles = [lm.model.register_forward_pre_hook(lambda m, a, i=lm.id: calls.append(i)) for lm in lms]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


def _bytes(directory: Path) -> tuple[int, int]:
    files = list(directory.rglob("*.safetensors"))
    return len(files), sum(f.stat().st_size for f in files)


def bench_harvest(registry, lm, probes, workdir: Path) -> dict[str, Any]:
    from evaluator.core.activations import ActivationCache, split_activations

    out: dict[str, Any] = {"probes": {p.metadata.name: p.layer for p in probes}}
    scores: dict[str, list[np.ndarray]] = {}
    for path, all_layers in (("old", False), ("new", True)):
        cache = ActivationCache(workdir / path)
        rows = []
        for probe in probes:
            with counting_forwards(lm) as calls:
                start = time.perf_counter()
                acts = split_activations(
                    lm,
                    registry,
                    TASK,
                    "test",
                    layers=[probe.layer],
                    position=probe.metadata.position,
                    input_kind=probe.metadata.input,
                    cache=cache,
                    all_layers=all_layers,
                )[probe.layer]
                s = probe.score(acts.X)
                seconds = time.perf_counter() - start
            scores.setdefault(path, []).append(s)
            rows.append({"layer": probe.layer, "seconds": round(seconds, 3), "forwards": len(calls)})
        entries, size = _bytes(cache.root)
        out[path] = {"runs": rows, "cache_entries": entries, "cache_bytes": size, "n_rows": len(acts.ids)}
    out["second_probe_speedup"] = out["old"]["runs"][1]["seconds"] / out["new"]["runs"][1]["seconds"]
    out["first_probe_cost"] = out["new"]["runs"][0]["seconds"] / out["old"]["runs"][0]["seconds"]
    out["both_probes_speedup"] = sum(r["seconds"] for r in out["old"]["runs"]) / sum(
        r["seconds"] for r in out["new"]["runs"]
    )
    out["max_abs_score_diff"] = max(float(np.abs(a - b).max()) for a, b in zip(*scores.values(), strict=True))
    n, d, sides = out["new"]["n_rows"], lm.d_model, 2  # contrast pairs store both sides
    out["bytes_per_layer_per_row"] = d * 4 * sides
    out["bytes_one_layer_vs_all"] = [out["old"]["cache_bytes"] // 2, out["new"]["cache_bytes"]]
    out["layers_kept"] = lm.n_layers + 1
    out["bytes_per_split_all_layers_formula"] = (
        f"{n} rows x {d} x 4 B x {sides} sides x {lm.n_layers + 1} layers"
    )
    return out


def bench_steer(registry, lm, probe, *, n: int, repeats: int) -> dict[str, Any]:
    """The interventions of one seed's random comparison (the probe's direction and K random ones,
    added and projected out) on the readout prompts of ``n`` test rows: one replay of the upper
    blocks per intervention (:func:`evaluator.axes.steer_readout.readouts`) vs the interventions stacked
    (:func:`evaluator.axes.steer_readout.readouts_batched`), alternated ``repeats`` times (the fastest of each
    is reported: alternating exposes both paths to the load of a shared machine alike)."""
    import torch

    from evaluator.axes.steer import unit_direction
    from evaluator.axes.steer_null import random_directions
    from evaluator.axes.steer_readout import (
        _ablation,
        _addition,
        _encode,
        readout_prefix,
        readout_tokens,
        readouts,
        readouts_batched,
    )
    from evaluator.core.activations import read_split
    from evaluator.core.harvest import HarvestConfig, render

    settings = registry.protocol().steering
    task = registry.task(TASK)
    texts = read_split(registry, TASK, "test").texts[:n]
    encoded = _encode(
        lm,
        [render(task.readout.template, t) for t in texts],
        HarvestConfig.from_protocol(registry.protocol()),
    )
    tokens = readout_tokens(lm, positive=task.readout.positive, negative=task.readout.negative)
    prefix = readout_prefix(lm, encoded, layer=probe.layer, tokens=tokens)
    alpha = float(np.median(prefix.norms))
    directions = [unit_direction(probe), *random_directions(lm.d_model, k=settings.random_directions, seed=0)]
    as_t = lambda v: torch.as_tensor(v, dtype=torch.float32)  # noqa: E731
    edits = [_addition(as_t(alpha * d)) for d in directions] + [_ablation(as_t(d)) for d in directions]
    results: dict[bool, np.ndarray] = {}
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeats):
        for batched in (False, True):
            start = time.perf_counter()
            if batched:
                results[batched] = readouts_batched(lm, prefix, tokens=tokens, edits=edits)
            else:
                results[batched] = np.stack([readouts(lm, prefix, tokens=tokens, edit=e) for e in edits])
            times[batched].append(time.perf_counter() - start)
    seconds = {k: min(v) for k, v in times.items()}
    return {
        "probe": probe.metadata.name,
        "layer": probe.layer,
        "n_layers": lm.n_layers,
        "n": n,
        "interventions": len(edits),
        "old_seconds": round(seconds[False], 2),
        "new_seconds": round(seconds[True], 2),
        "all_seconds": {
            "old": [round(t, 2) for t in times[False]],
            "new": [round(t, 2) for t in times[True]],
        },
        "speedup": seconds[False] / seconds[True],
        "max_abs_diff": float(np.abs(results[False] - results[True]).max()),
    }


def bench_transfer(registry, models: dict[str, Any], probes, *, target: str, workdir: Path, n_examples: int):
    from evaluator.axes.transfer import cross_model_transfer

    out: dict[str, Any] = {"target": target, "n_examples": n_examples}
    rho: dict[str, list[float]] = {}
    for path, share in (("old", False), ("new", True)):
        rows = []
        for probe in probes:
            with counting_forwards(*models.values()) as calls:
                start = time.perf_counter()
                (result,) = cross_model_transfer(
                    probe,
                    targets=[target],
                    registry=registry,
                    cache_dir=workdir / path,
                    load=models.__getitem__,
                    n_examples=n_examples,
                    share_activations=share,
                )
                seconds = time.perf_counter() - start
            rho.setdefault(path, []).append(result.pearson)
            rows.append(
                {
                    "probe": probe.metadata.name,
                    "target_layer": result.target_layer,
                    "n_pairs": result.n_pairs,
                    "seconds": round(seconds, 2),
                    "forwards": len(calls),
                    "rho": result.pearson,
                }
            )
        out[path] = rows
    out["second_probe_speedup"] = out["old"][1]["seconds"] / out["new"][1]["seconds"]
    out["both_probes_speedup"] = sum(r["seconds"] for r in out["old"]) / sum(r["seconds"] for r in out["new"])
    out["max_abs_rho_diff"] = max(abs(a - b) for a, b in zip(rho["old"], rho["new"], strict=True))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=48, help="rows per split of the sliced task")
    parser.add_argument("--steer-n", type=int, default=16)
    parser.add_argument("--steer-repeats", type=int, default=2)
    parser.add_argument("--transfer-examples", type=int, default=8)
    parser.add_argument("--target", default="all-minilm-l6-v2")
    parser.add_argument("--parts", default="harvest,steer,transfer")
    parser.add_argument(
        "--cache-dir", type=Path, default=Path(os.environ.get("PROBEBENCH_CACHE_DIR", ROOT / "var" / "cache"))
    )
    args = parser.parse_args()
    parts = args.parts.split(",")

    import torch

    from evaluator.core.models import load_model
    from evaluator.core.probes import load_probe
    from evaluator.data.registry.load import load_registry

    load_before = os.getloadavg()
    summary: dict[str, Any] = {
        "benchmark": "secondary",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}",
        "rows_per_split": args.rows,
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sliced = load_registry(sliced_registry(work / "registry", task_id=TASK, rows=args.rows))
        real = load_registry(ROOT)
        models = {SMOLLM: load_model(SMOLLM, registry=real, cache_dir=args.cache_dir, device="cpu")}
        if "harvest" in parts:
            probes = [load_probe(REFERENCE / name, registry=sliced) for name in PROBES]
            summary["harvest"] = bench_harvest(sliced, models[SMOLLM], probes, work / "harvest")
            print(json.dumps({"harvest": summary["harvest"]}), file=sys.stderr)
        if "steer" in parts:
            probe = load_probe(REFERENCE / PROBES[0], registry=real)
            summary["steer"] = bench_steer(
                real, models[SMOLLM], probe, n=args.steer_n, repeats=args.steer_repeats
            )
            print(json.dumps({"steer": summary["steer"]}), file=sys.stderr)
        if "transfer" in parts:
            models[args.target] = load_model(
                args.target, registry=real, cache_dir=args.cache_dir, device="cpu"
            )
            probes = [load_probe(REFERENCE / name, registry=sliced) for name in PROBES]
            summary["transfer"] = bench_transfer(
                sliced,
                models,
                probes,
                target=args.target,
                workdir=work / "transfer",
                n_examples=args.transfer_examples,
            )
    summary["loadavg_before"] = [round(x, 2) for x in load_before]
    summary["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
