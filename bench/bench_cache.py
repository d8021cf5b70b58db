"""Activation cache: a second probe on the same model/layer/split, versus a cold harvest.

Cold: ``split_activations`` with an empty activation cache (harvest + atomic write). Warm: the
same call again from a new ActivationCache object (a file read), median of several repeats.
Then a new process asks for the same entry, to show the cache survives a restart.
The model is loaded before timing in both cases (a worker keeps it loaded).

    .venv/bin/python bench/bench_cache.py [--task halueval-qa-v1] [--split train] [--layer 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the CLI does; see evaluator/commands/train_cli.py
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODEL = "smollm2-135m-instruct"


def share_models(cache_dir: Path, models_from: Path) -> None:
    """An empty activation cache that reuses the converted model weights."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / "models").symlink_to((models_from / "models").resolve(), target_is_directory=True)


def timed_call(task: str, split: str, layer: int, cache_dir: Path) -> dict:
    """Load the model, then time one split_activations call (used for the new-process check)."""
    from evaluator.core.activations import ActivationCache, split_activations
    from evaluator.core.models import load_model
    from evaluator.data.registry.load import load_registry

    registry = load_registry(ROOT)
    lm = load_model(MODEL, registry=registry, cache_dir=cache_dir, device="cpu", dtype="float32")
    start = time.perf_counter()
    acts = split_activations(
        lm, registry, task, split, layers=[layer], position="last_token", cache=ActivationCache(cache_dir)
    )[layer]
    return {"seconds": time.perf_counter() - start, "cache_hit": acts.cache_hit, "cache_key": acts.cache_key}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="halueval-qa-v1")
    parser.add_argument("--split", default="train")
    parser.add_argument("--layer", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model-cache", type=Path, default=ROOT / "var" / "cache")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(timed_call(args.task, args.split, args.layer, args.child)))
        return 0

    from evaluator.core.activations import ActivationCache, split_activations
    from evaluator.core.models import load_model
    from evaluator.data.registry.load import load_registry

    registry = load_registry(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = Path(tmp) / "cache"
        share_models(cache_dir, args.model_cache)
        lm = load_model(MODEL, registry=registry, cache_dir=cache_dir, device="cpu", dtype="float32")

        def call() -> tuple[float, object]:
            start = time.perf_counter()
            acts = split_activations(
                lm,
                registry,
                args.task,
                args.split,
                layers=[args.layer],
                position="last_token",
                cache=ActivationCache(cache_dir),
            )[args.layer]
            return time.perf_counter() - start, acts

        cold_s, cold = call()
        assert not cold.cache_hit
        warm = [call() for _ in range(args.repeats)]
        assert all(a.cache_hit for _, a in warm)
        warm_s = statistics.median(t for t, _ in warm)
        entry = ActivationCache(cache_dir).path(cold.cache_key)
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--task",
                args.task,
                "--split",
                args.split,
                "--layer",
                str(args.layer),
                "--child",
                str(cache_dir),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        restart = json.loads(child.stdout.strip().splitlines()[-1])
        summary = {
            "benchmark": "activation cache",
            "model": MODEL,
            "task": args.task,
            "split": args.split,
            "rows": len(cold.ids),
            "layer": args.layer,
            "cold_harvest_s": cold_s,
            "warm_read_s_median": warm_s,
            "warm_read_s_all": [t for t, _ in warm],
            "speedup": cold_s / warm_s,
            "entry_bytes": entry.stat().st_size,
            "new_process": restart,
            "loadavg": [round(x, 2) for x in os.getloadavg()],
        }
    print(
        f"cold {cold_s:.2f}s, warm {warm_s * 1000:.1f} ms (x{cold_s / warm_s:.0f}); new process: hit="
        f"{restart['cache_hit']} in {restart['seconds'] * 1000:.1f} ms",
        file=sys.stderr,
    )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
