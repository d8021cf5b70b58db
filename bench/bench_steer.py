"""Direction utility: the random-direction control probe, and the cost of `steer` on CPU.

    # a random-direction control probe (a linear probe whose weight is a seeded random vector)
    .venv/bin/python bench/bench_steer.py random-probe var/steer/random-smollm2 --layer 18
    # seconds per probe per task (readout check, strength sweep with the fluency guard, the probe's
    # and the random directions' interventions replayed stacked, the prompting baseline)
    .venv/bin/python bench/bench_steer.py bench --probe registry/reference_probes/cities-cp-logreg-smollm2 \
        --task cities-truth-v1 --n 64

    # the RESULTS.md table from saved `python -m evaluator steer` outputs
    .venv/bin/python bench/bench_steer.py table var/steer/*.json

Prints JSON (table: markdown). The board's steer run costs what `bench` measures, per eligible task.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def random_probe_write(
    directory: Path,
    *,
    model: str = "smollm2-135m-instruct",
    layer: int = 18,
    category: str = "hallucination",
    task: str = "cities-truth-v1",
    seed: int = 12345,
) -> Path:
    """A linear probe whose direction is a seeded random unit vector (the control)."""
    from evaluator.core.probes import save_probe
    from evaluator.data.registry.load import load_registry

    d_model = load_registry(ROOT).model(model).d_model
    weight = np.random.default_rng(seed).standard_normal(d_model)
    metadata = {
        "name": f"Random-direction control probe (seed {seed})",
        "category": category,
        "base_model": model,
        "layer": layer,
        "position": "last_token",
        "input": "single",
        "output": "logit",
        "license": "Apache-2.0",
        "authors": ["ProbeBench maintainers"],
        "paper_url": "",
        "description": "Control for direction utility: a seeded random weight vector, trained on nothing.",
        "training_data": {"tasks": [], "external": "none: a random vector"},
        "declared_metrics": {},
    }
    tensors = {"weight": weight / np.linalg.norm(weight), "bias": np.zeros(())}
    return save_probe(directory, tensors, metadata)


def bench(probe_dir: Path, *, task: str, n: int, device: str) -> dict:
    from evaluator.axes.steer import steer_probe
    from evaluator.core.models import clear_model_memo, load_model
    from evaluator.core.probes import load_probe
    from evaluator.data.registry.load import load_registry

    registry = load_registry(ROOT)
    probe = load_probe(probe_dir, registry=registry)
    clear_model_memo()
    start = time.perf_counter()
    lm = load_model(probe.base_model, registry=registry, cache_dir=ROOT / "var" / "cache", device=device)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    out = steer_probe(
        probe, registry=registry, cache_dir=ROOT / "var" / "cache", tasks=[task], n=n, load=lambda _m: lm
    )
    steer_s = time.perf_counter() - start
    result = out["tasks"][task]
    import torch

    return {
        "probe": str(probe_dir),
        "task": task,
        "layer": probe.layer,
        "n_layers": lm.n_layers,
        "n": n,
        "random_directions": out["settings"]["random_directions"],
        "random_seeds": out["settings"]["random_seeds"],
        "judged": result.get("judged"),
        "readout_auroc": result.get("readout_auroc"),
        "model_load_s": round(load_s, 1),
        "steer_s": round(steer_s, 1),
        "utility_z": result.get("utility_z"),
        "device": device,
        "torch_threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg()[0],
    }


def table(paths: list[Path]) -> str:
    """The RESULTS.md table from `python -m evaluator steer` outputs (one JSON file per probe)."""
    lines = [
        "| probe | task | layer | readout AUROC | strength (× norm) | perplexity ratio | addition effect |"
        " random mean ± sd | p (n random) | z (spread over seeds) | prompting effect | ablation AUROC drop |"
        " z | utility_z |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        out = json.loads(path.read_text())
        for task, r in out["tasks"].items():
            if r.get("readout") is None:
                lines.append(f"| {path.stem} | {task} | | n/a: {r['reason']} |" + " |" * 10)
                continue
            auroc = r["readout"]["auroc"]
            if not r.get("judged"):
                lines.append(
                    f"| {path.stem} | {task} | {r['readout']['layer']} | {auroc:.3f} | not judged: {r['reason']} |"
                    + " |" * 9
                )
                continue
            a, b = r["addition"], r["ablation"]
            prompt = r.get("prompt_baseline")
            lines.append(
                f"| {path.stem} | {task} | {r['layer']} | {auroc:.3f} | {r['strength']:g} | {r['fluency']['ratio']:.2f} |"
                f" {a['effect']:+.3f} | {a['random_mean']:+.3f} ± {a['random_sd']:.3f} | {a['p_value']:.3f} ({a['n_random']}) |"
                f" {a['utility_z']:+.2f} (± {a['z_spread']:.2f}) | {'' if prompt is None else format(prompt['effect'], '+.3f')} |"
                f" {b['effect']:+.4f} | {b['utility_z']:+.2f} | {r['utility_z']:+.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rp = sub.add_parser("random-probe")
    rp.add_argument("directory", type=Path)
    rp.add_argument("--model", default="smollm2-135m-instruct")
    rp.add_argument("--layer", type=int, default=18)
    rp.add_argument("--category", default="hallucination")
    rp.add_argument("--task", default="cities-truth-v1")
    rp.add_argument("--seed", type=int, default=12345)
    bp = sub.add_parser("bench")
    bp.add_argument("--probe", type=Path, required=True)
    bp.add_argument("--task", required=True)
    bp.add_argument("--n", type=int, default=64)
    bp.add_argument("--device", default="cpu")
    tp = sub.add_parser("table")
    tp.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    if args.command == "table":
        print(table(args.files))
        return
    if args.command == "random-probe":
        path = random_probe_write(
            args.directory,
            model=args.model,
            layer=args.layer,
            category=args.category,
            task=args.task,
            seed=args.seed,
        )
        print(json.dumps({"written": str(path)}))
    else:
        print(json.dumps(bench(args.probe, task=args.task, n=args.n, device=args.device), indent=2))


if __name__ == "__main__":
    main()
