"""How fast can the demo's board fill at best? A lower bound from the forwards it cannot avoid.

The board's primary scores need, for each reference probe, its scores on the train, test and
distshift splits of every task of its category that it can read (and the eval-awareness reference
probe's scores on each of those tasks' test splits). Only the first eval-awareness reference of each
model is counted; the demo also measures the reference that replaces it (another position, so more
forwards), so the bound under-counts and stays a lower bound. With a perfect activation cache, each distinct
(base model, task, split, input, position) is read by one full-depth forward and never again, so
the time to fill the board cannot be less than the sum, over those groups, of their tokens divided
by the model's forward throughput. This script counts the tokens with each model's own tokenizer,
measures each model's every-layer harvest throughput on a sample of the same prompts, and prints:

- the bound for every reference probe's primary scores (all groups);
- the bound for a measured entry in every category: the eval-awareness references, then the probe
  of each category whose groups cost least (what ``install_reference_probes`` submits first).

Model loading and everything but the forward (fitting, scoring, writing) are left out, so the real
times are higher.

    .venv/bin/python bench/demo_lower_bound.py [--sample 96] [--cache-dir var/cache]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SPLITS = ("train", "test", "distshift")


def reference_groups(registry) -> tuple[dict[str, dict], dict[tuple, set[str]]]:
    """slug → probe.json, and group (model, task, split, input, position) → slugs that read it."""
    import yaml

    from evaluator.core.applicability import ProbeReads, applicability

    manifest = yaml.safe_load((ROOT / "registry/reference_probes/manifest.yaml").read_text())["probes"]
    probes = {
        e["slug"]: json.loads((ROOT / e["path"] / "probe.json").read_text()) | {"role": e.get("role")}
        for e in manifest
    }
    ea_reads = {}  # model → (input, position) of its first eval-awareness reference probe
    for m in probes.values():
        if m["role"] == "eval_awareness":
            ea_reads.setdefault(m["base_model"], (m["input"], m["position"]))
    groups: dict[tuple, set[str]] = defaultdict(set)
    for slug, m in probes.items():
        model = registry.model(m["base_model"])
        reads = ProbeReads(m["input"], m["position"], m["layer"])
        for task in registry.active_tasks(m["category"], model=m["base_model"]):
            if not applicability(reads, task, model)[0]:
                continue
            for split in SPLITS:
                if split in task.splits_for(m["base_model"]):
                    groups[(m["base_model"], task.id, split, m["input"], m["position"])].add(slug)
            if m["category"] != "eval_awareness" and m["base_model"] in ea_reads:
                groups[(m["base_model"], task.id, "test", *ea_reads[m["base_model"]])].add(slug)
    return probes, groups


def group_prompts(registry, group: tuple) -> list[str]:
    from evaluator.core.activations import read_split
    from evaluator.core.harvest import render_prompts

    model, task_id, split, input_kind, _ = group
    rows = read_split(registry, task_id, split, model=model)
    return render_prompts(registry.task(task_id), rows.texts, input_kind)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=96, help="prompts per model for the throughput")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "var" / "cache")
    args = parser.parse_args()

    import torch

    from evaluator.core.activations import residual_layers
    from evaluator.core.harvest import harvest
    from evaluator.core.models import load_model
    from evaluator.data.registry.load import load_registry

    registry = load_registry(ROOT)
    probes, groups = reference_groups(registry)
    load_before = os.getloadavg()
    tokens: dict[tuple, int] = {}
    rate: dict[str, float] = {}
    for model_id in sorted({g[0] for g in groups}):
        lm = load_model(model_id, registry=registry, cache_dir=args.cache_dir, device="cpu", dtype="float32")
        mine = sorted(g for g in groups if g[0] == model_id)
        pool: list[tuple[str, str]] = []  # (prompt, position)
        for g in mine:
            prompts = group_prompts(registry, g)
            ids = lm.tokenizer(prompts, truncation=True, max_length=lm.max_length)["input_ids"]
            tokens[g] = sum(len(x) for x in ids)
            pool += [(p, g[4]) for p in prompts]
        sample = random.Random(0).sample(pool, min(args.sample, len(pool)))
        layers = residual_layers(lm)
        sampled_tokens, seconds, cpu = 0, 0.0, 0.0
        for position in ("last_token", "mean"):
            prompts = [p for p, pos in sample if pos == position]
            if not prompts:
                continue
            harvest(lm, prompts[:4], layers=layers, positions=(position,))  # warm-up
            start, start_cpu = time.perf_counter(), time.process_time()
            harvest(lm, prompts, layers=layers, positions=(position,))
            seconds += time.perf_counter() - start
            cpu += time.process_time() - start_cpu
            ids = lm.tokenizer(prompts, truncation=True, max_length=lm.max_length)["input_ids"]
            sampled_tokens += sum(len(x) for x in ids)
        # On a shared machine the wall time counts other processes' turns; CPU seconds spread over
        # torch's threads do not, and assume perfect parallelism: the rate can only be overstated,
        # so the bound stays a lower bound.
        threads = torch.get_num_threads()
        rate[model_id] = max(sampled_tokens / seconds, sampled_tokens * threads / cpu)
        print(
            f"{model_id}: {len(mine)} groups, {sum(tokens[g] for g in mine):,} tokens; every-layer harvest"
            f" {sampled_tokens / seconds:,.0f} tokens/s wall, {sampled_tokens * threads / cpu:,.0f} per"
            f" {threads} CPU-thread-seconds, on {len(sample)} sampled prompts",
            flush=True,
        )

    def cost(gs) -> float:
        return sum(tokens[g] / rate[g[0]] for g in gs)

    by_probe: dict[str, set[tuple]] = defaultdict(set)
    for g, slugs in groups.items():
        for s in slugs:
            by_probe[s].add(g)
    ea = [s for s, m in probes.items() if m["role"] == "eval_awareness"]
    first_ea = {}
    for s in ea:
        first_ea.setdefault(probes[s]["base_model"], s)
    leaders: dict[str, str] = {}
    for s, m in probes.items():
        if m["role"] == "eval_awareness":
            continue
        c = m["category"]
        if c not in leaders or cost(by_probe[s]) < cost(by_probe[leaders[c]]):
            leaders[c] = s
    every_category = set().union(*(by_probe[s] for s in [*first_ea.values(), *leaders.values()]))
    everything = set(groups)
    print()
    print("| bound | groups | tokens | forward time |")
    print("|---|---:|---:|---:|")
    for label, gs in (
        ("an entry in every category (EA references + cheapest probe per category)", every_category),
        ("every reference probe's primary scores", everything),
    ):
        print(f"| {label} | {len(gs)} | {sum(tokens[g] for g in gs):,} | {cost(gs) / 60:.1f} min |")
    print()
    print(
        "cheapest probe per category: "
        + ", ".join(f"{c}: {s} ({cost(by_probe[s]) / 60:.1f} min alone)" for c, s in sorted(leaders.items()))
    )
    print(
        f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}; cpu count {os.cpu_count()}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
