"""What a base model costs on this machine, side by side: load time, peak memory, harvest and
generation throughput (numbers in BENCHMARKS.md).

    .venv/bin/python bench/model_costs.py                                  # SmolLM2 and Qwen 0.5B
    .venv/bin/python bench/model_costs.py --models smollm2-135m-instruct,gemma-3-270m --n 64

Each model runs in its own subprocess, so its peak RSS is its own, one after the other:

- ``load_s``: :func:`evaluator.core.models.load_model` from the converted cache (converted first, untimed,
  if it is not there yet);
- ``harvest_tok_s``: the workers' harvest (every layer, last token, the protocol's batches) over
  ``--n`` prompts of cities-truth-v1's train split, real tokens per second;
- ``generate_tok_s``: greedy generation as the on-policy builders run it (batches of 32,
  float32), ``--new-tokens`` new tokens for ``--n`` chat-formatted requests, new tokens per second;
- ``peak_rss_mb``: the subprocess's peak resident memory.

Prints one JSON object; the load average before and after says how quiet the machine was.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_MODELS = "smollm2-135m-instruct,qwen2.5-coder-0.5b-instruct"
REQUESTS = (
    "What is the capital of France?",
    "Write a short poem about autumn.",
    "How do I bake bread?",
    "Explain photosynthesis briefly.",
    "How do I kill a Python process?",
    "Summarise the plot of Hamlet in two sentences.",
    "What is 17 times 23?",
    "Give me three tips for a job interview.",
)


def measure(model_id: str, n: int, new_tokens: int, cache_dir: str) -> dict:
    """In the subprocess: every measurement of one model."""
    from evaluator.axes.run import harvest_config_default
    from evaluator.core.activations import read_split, residual_layers
    from evaluator.core.generate import greedy_generate
    from evaluator.core.harvest import harvest, render_prompts
    from evaluator.core.models import _MEMO, load_model
    from evaluator.data.registry.load import load_registry

    reg = load_registry(ROOT)
    load_model(model_id, registry=reg, cache_dir=cache_dir, device="cpu", memo=False)  # converts once
    _MEMO.clear()
    start = time.perf_counter()
    lm = load_model(model_id, registry=reg, cache_dir=cache_dir, device="cpu", memo=False)
    load_s = time.perf_counter() - start

    task = reg.task("cities-truth-v1")
    texts = read_split(reg, task.id, "train").texts[:n]
    prompts = render_prompts(task, texts, "single")
    config = harvest_config_default(reg)
    tokens = sum(len(lm.tokenizer(p).input_ids) for p in prompts)
    start = time.perf_counter()
    harvest(lm, prompts, layers=residual_layers(lm), positions=["last_token"], config=config)
    harvest_s = time.perf_counter() - start

    chats = [
        (
            f"r{i:03d}",
            lm.tokenizer.apply_chat_template(
                [{"role": "user", "content": REQUESTS[i % len(REQUESTS)]}],
                tokenize=False,
                add_generation_prompt=True,
            ),
        )
        for i in range(n)
    ]
    del lm
    start = time.perf_counter()
    greedy_generate(
        chats, model_id=model_id, registry=reg, cache_dir=Path(cache_dir), max_new_tokens=new_tokens
    )
    generate_s = time.perf_counter() - start
    return {
        "model": model_id,
        "load_s": round(load_s, 2),
        "harvest_prompts": n,
        "harvest_tokens": tokens,
        "harvest_tok_s": round(tokens / harvest_s, 1),
        "generate_prompts": n,
        "generate_new_tokens": new_tokens,
        "generate_tok_s": round(n * new_tokens / generate_s, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--n", type=int, default=64, help="prompts harvested and requests generated")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--cache-dir", default=str(ROOT / "var" / "cache"))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the subprocess: one model
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.n, args.new_tokens, args.cache_dir)))
        return
    before = os.getloadavg()[0]
    rows = []
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        cmd = [
            sys.executable,
            __file__,
            "--one",
            model,
            "--n",
            str(args.n),
            "--new-tokens",
            str(args.new_tokens),
        ]
        out = subprocess.run(
            [*cmd, "--cache-dir", args.cache_dir], capture_output=True, text=True, check=True, cwd=ROOT
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), file=sys.stderr)
    print(
        json.dumps(
            {
                "cores": os.cpu_count(),
                "load_avg_before": before,
                "load_avg_after": os.getloadavg()[0],
                "models": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
