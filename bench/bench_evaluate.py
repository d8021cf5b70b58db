"""Whole evaluation of one probe on one task, cold and warm, through the CLI.

A logistic probe is trained on the task (SmolLM2, layer 15) first. Then
``python -m evaluator evaluate`` runs twice in fresh processes on one activation cache:

- cold: the activation cache is empty (converted model weights already exist: the one-time
  GGUF conversion, 35 s for SmolLM2 and 110 s for Gemma here, is not counted);
- warm: the same command again — every split's activations come from the cache.

Both include train/test/distshift runs, baselines, the reproduction check, ρ_CE transfer to the
other base models (Gemma 3 270M and all-MiniLM-L6-v2) and the latency measurement.

    .venv/bin/python bench/bench_evaluate.py [--task cities-truth-v1] [--layer 15]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "smollm2-135m-instruct"


def run(cmd: list[str]) -> tuple[float, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return seconds, json.loads(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="cities-truth-v1")
    parser.add_argument("--layer", type=int, default=15)
    parser.add_argument("--method", default="logistic_regression")
    parser.add_argument("--model-cache", type=Path, default=ROOT / "var" / "cache")
    args = parser.parse_args()

    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = Path(tmp) / "cache"
        cache_dir.mkdir()
        (cache_dir / "models").symlink_to((args.model_cache / "models").resolve(), target_is_directory=True)
        train_cache = Path(tmp) / "train-cache"  # training fills its own cache, so "cold" stays cold
        train_cache.mkdir()
        (train_cache / "models").symlink_to((args.model_cache / "models").resolve(), target_is_directory=True)
        probe = Path(tmp) / "probe"
        train_s, trained = run(
            [
                py,
                "-m",
                "evaluator",
                "train",
                "--task",
                args.task,
                "--model",
                MODEL,
                "--layer",
                str(args.layer),
                "--method",
                args.method,
                "--out",
                str(probe),
                "--cache-dir",
                str(train_cache),
                "--device",
                "cpu",
            ]
        )
        evaluate = [
            py,
            "-m",
            "evaluator",
            "evaluate",
            "--probe",
            str(probe),
            "--tasks",
            args.task,
            "--cache-dir",
            str(cache_dir),
            "--device",
            "cpu",
        ]
        cold_s, cold = run(evaluate)
        warm_s, warm = run(evaluate)

    def brief(result: dict) -> dict:
        return {
            "timings": {k: round(v, 2) for k, v in result["timings"].items()},
            "probe_score": round(result["probe_score"]["total"], 4),
            "auroc": round(result["aggregate"]["auroc"], 4),
            "auroc_ds": round(result["aggregate"]["auroc_ds"], 4),
            "rho_ce": result["aggregate"]["rho_ce"],
            "transfer": {t["target_model"]: round(t["pearson"], 3) for t in result["transfer"]},
            "reproduced": result["reproduction"]["reproduced"],
            "latency_ms": result["latency"]["probe_ms"],
            "model_forward_ms": result["latency"]["model_forward_ms"],
            "cache_hits": {s: r["cache_hit"] for s, r in result["tasks"][args.task]["runs"].items()},
        }

    summary = {
        "benchmark": "evaluate one probe on one task (CLI, wall clock incl. process start and model loads)",
        "task": args.task,
        "model": MODEL,
        "layer": args.layer,
        "method": args.method,
        "train_s": train_s,
        "train_test_auroc": trained["test"]["auroc"],
        "cold_s": cold_s,
        "warm_s": warm_s,
        "cold": brief(cold),
        "warm": brief(warm),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }
    print(f"train {train_s:.1f}s; evaluate cold {cold_s:.1f}s, warm {warm_s:.1f}s", file=sys.stderr)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
