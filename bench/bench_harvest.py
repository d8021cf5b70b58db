"""Harvest throughput on SmolLM2, side by side (numbers in BENCHMARKS.md).

Three ways to get the residual stream at a mid layer (last token) for the same N prompts:

- ``ours``: evaluator.core.harvest.harvest — bare base model, forward stopped after the layer,
  length-sorted right-padded batches.
- ``script-b1``: the common script — full AutoModelForCausalLM(..., output_hidden_states=True)
  in fp32, one prompt at a time.
- ``script-b32``: the same script batched 32 prompts at a time (right padding, unsorted).

Each runs in its own subprocess so its peak RSS is its own. Model loading is timed separately;
throughput counts only the harvesting loop. The vectors of all three are compared at the end.

    .venv/bin/python bench/bench_harvest.py [--n 512] [--layer 15] [--task halueval-qa-v1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the CLI does; see evaluator/commands/train_cli.py
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODEL = "smollm2-135m-instruct"
METHODS = ("ours", "script-b1", "script-b32")


def prompts_for(task_id: str, n: int) -> list[str]:
    from evaluator.core.activations import read_split
    from evaluator.core.harvest import render_prompts
    from evaluator.data.registry.load import load_registry

    registry = load_registry(ROOT)
    rows = read_split(registry, task_id, "train")
    texts = rows.texts[:n]
    if len(texts) < n:
        texts += read_split(registry, task_id, "test").texts[: n - len(texts)]
    return render_prompts(registry.task(task_id), texts, "single")


def worker(method: str, prompts: list[str], layer: int, cache_dir: Path, out: Path) -> dict:
    """Run one method in this process; write its vectors to ``out``; return its measurements."""
    import numpy as np
    import torch

    from evaluator.core.models import converted_dir, load_model
    from evaluator.data.registry.load import load_registry

    registry = load_registry(ROOT)
    start = time.perf_counter()
    if method == "ours":
        from evaluator.core.harvest import harvest

        lm = load_model(MODEL, registry=registry, cache_dir=cache_dir, device="cpu", dtype="float32")
        tokenizer = lm.tokenizer
        loaded = time.perf_counter()
        vectors = harvest(lm, prompts, layers=[layer])[(layer, "last_token")]
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        load_model(
            MODEL, registry=registry, cache_dir=cache_dir, memo=False
        )  # ensure the converted copy exists
        directory = converted_dir(cache_dir, registry.model(MODEL))
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
        loaded = time.perf_counter()
        batch = 1 if method == "script-b1" else 32
        tokenizer.padding_side = "right"
        rows = []
        for i in range(0, len(prompts), batch):
            enc = tokenizer(prompts[i : i + batch], return_tensors="pt", padding=True)
            with torch.no_grad():
                output = model(**enc, output_hidden_states=True)
            last = enc["attention_mask"].sum(1) - 1
            rows.append(output.hidden_states[layer][torch.arange(len(last)), last].float().numpy())
        vectors = np.concatenate(rows)
    done = time.perf_counter()
    np.save(out, vectors)
    tokens = sum(len(ids) for ids in tokenizer(prompts)["input_ids"])
    return {
        "method": method,
        "prompts": len(prompts),
        "tokens": tokens,
        "load_s": loaded - start,
        "harvest_s": done - loaded,
        "tokens_per_s": tokens / (done - loaded),
        "prompts_per_s": len(prompts) / (done - loaded),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "threads": torch.get_num_threads(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--layer", type=int, default=15)
    parser.add_argument("--task", default="halueval-qa-v1")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "var" / "cache")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    prompts = prompts_for(args.task, args.n)

    if args.worker:
        print(json.dumps(worker(args.worker, prompts, args.layer, args.cache_dir, args.out)))
        return 0

    import numpy as np

    results, vectors = [], {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods.split(","):
            out = Path(tmp) / f"{method}.npy"
            cmd = [
                sys.executable,
                __file__,
                "--worker",
                method,
                "--out",
                str(out),
                "--n",
                str(args.n),
                "--layer",
                str(args.layer),
                "--task",
                args.task,
                "--cache-dir",
                str(args.cache_dir),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return 1
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            vectors[method] = np.load(out)
            r = results[-1]
            print(
                f"{method:>11}: {r['tokens_per_s']:8.0f} tok/s  {r['prompts_per_s']:6.1f} prompts/s"
                f"  harvest {r['harvest_s']:6.1f}s  load {r['load_s']:5.1f}s  peak RSS {r['peak_rss_mb']:6.0f} MB",
                file=sys.stderr,
            )
    by = {r["method"]: r for r in results}
    summary = {
        "benchmark": "harvest",
        "model": MODEL,
        "task": args.task,
        "layer": args.layer,
        "n_prompts": args.n,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "results": results,
    }
    if "ours" in by:
        for other in ("script-b1", "script-b32"):
            if other in by:
                summary[f"speedup_vs_{other}"] = by["ours"]["tokens_per_s"] / by[other]["tokens_per_s"]
                diff = np.abs(vectors["ours"] - vectors[other]).max()
                summary[f"max_abs_diff_vs_{other}"] = float(diff)
                summary[f"max_rel_diff_vs_{other}"] = float(diff / np.abs(vectors[other]).max())
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
