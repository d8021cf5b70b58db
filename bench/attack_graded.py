"""The graded attack (evaluator/axes/attack_graded.py) on reference probes, side by side in one run:
per probe and task, the area under the relative-recall curve and ε50 per seed, the recall with the
unoptimised vectors inserted, and the cost (wall and CPU seconds of the attack, the clean scores
through the activation cache excluded where they were cached).

    .venv/bin/python bench/attack_graded.py                       # the default set below
    .venv/bin/python bench/attack_graded.py --only ea-smollm2 --steps 10
    .venv/bin/python bench/attack_graded.py --pairs ea-minilm:benchmark-vs-user-v1

The budget is the current protocol's (``attack_graded``); ``--steps`` changes it (no protocol then).

Prints one JSON object per probe on stdout as it finishes, and a table on stderr. Not a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: (reference probe, task): the eval-awareness probes on SmolLM2 (last token at layer 13, mean at
#: layer 8, mean at layer 0) and on MiniLM (an encoder), two deception probes, and a contrast pair,
#: each on its own task
DEFAULT = (
    ("ea-smollm2", "benchmark-vs-user-v1"),
    ("ea-ctx-smollm2", "benchmark-vs-user-v1"),
    ("ea-lofo-smollm2", "benchmark-vs-user-v1"),
    ("ea-minilm", "benchmark-vs-user-v1"),
    ("records-deception-logreg-smollm2", "records-deception-v1"),
    ("onpolicy-deception-logreg-smollm2", "onpolicy-incentive-deception-v1"),
    ("cities-cp-logreg-smollm2", "cities-truth-v1"),
)


def main() -> int:
    from evaluator.axes.attack_graded import attack_graded, graded_budget
    from evaluator.commands.base import default_cache_dir
    from evaluator.core import models
    from evaluator.data.registry.load import load_registry

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated reference probe slugs")
    parser.add_argument("--steps", type=int, default=None, help="steps per radius (default: the protocol's)")
    parser.add_argument(
        "--pairs", default="", help="comma-separated SLUG:TASK pairs instead of the default set"
    )
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args()
    wanted = {s for s in args.only.split(",") if s}
    registry = load_registry(ROOT)
    budget, _ = graded_budget(registry)
    if args.steps is not None:
        budget = dataclasses.replace(budget, steps=args.steps)
    pairs = [tuple(p.split(":", 1)) for p in args.pairs.split(",") if p] or list(DEFAULT)
    cache = args.cache_dir or default_cache_dir()
    rows = []
    for slug, task in pairs:
        if wanted and slug not in wanted:
            continue
        path = ROOT / "registry" / "reference_probes" / slug
        from evaluator.core.probes import load_probe

        probe = load_probe(path, registry=registry)
        lm = models.load_model(
            probe.base_model, registry=registry, cache_dir=cache, device="cpu", protocol=registry.protocol()
        )
        wall, cpu = time.perf_counter(), time.process_time()
        out = attack_graded(
            probe,
            task_id=task,
            registry=registry,
            cache_dir=cache,
            budget=budget,
            lm=lm,
            progress=lambda f, m, slug=slug: print(f"  {slug} {f:.0%} {m}", file=sys.stderr, flush=True),
        )
        row = {
            "probe": slug,
            "task": task,
            "position": probe.metadata.position,
            "input": probe.metadata.input,
            "layer": probe.layer,
            "recall_clean": out["recall_clean"],
            "caught_clean": out["caught_clean"],
            "not_attacked": out["not_attacked"],
            "recall_inserted": out.get("recall_inserted", []),
            "areas": [s["area"] for s in out["seeds"]],
            "goodhart_resistance": out["goodhart_resistance"],
            "eps50": out.get("eps50", []),
            "n_positives": out["n_positives"],
            "attack_seconds": out["seconds"],
            "wall_seconds": round(time.perf_counter() - wall, 1),
            "cpu_seconds": round(time.process_time() - cpu, 1),
            "curves": [[round(c["relative"], 3) for c in s["curve"]] for s in out["seeds"]],
            "kept_readout": (out.get("behaviour_kept") or {}).get("readout"),
            "kept_areas": [s["area"] for s in (out.get("behaviour_kept") or {}).get("seeds") or []],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(
        f"{'probe':<36} {'pos':<10} {'L':>3} {'clean':>6} {'insert':>13} {'area (seeds)':>15} {'ε50':>17} {'s':>6}",
        file=sys.stderr,
    )
    for r in rows:
        if r["not_attacked"]:
            print(f"{r['probe']:<36} not attacked: {r['not_attacked']}", file=sys.stderr)
            continue
        eps = ", ".join("-" if e is None else f"{e:.3f}" for e in r["eps50"])
        areas = ", ".join(f"{a:.2f}" for a in r["areas"])
        inserted = ", ".join(f"{x:.2f}" for x in r["recall_inserted"])
        print(
            f"{r['probe']:<36} {r['position']:<10} {r['layer']:>3} {r['recall_clean']:>6.2f} {inserted:>13}"
            f" {areas:>15} {eps:>17} {r['attack_seconds']:>6.0f}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
