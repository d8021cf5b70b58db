"""Does probe AUROC rise with model size? The same reference recipes on SmolLM2-135M-Instruct
and Qwen2.5-Coder-0.5B-Instruct, side by side, from the committed reference records.

    .venv/bin/python bench/size_table.py

Prints a markdown table (RESULTS.md): per recipe and task, the test AUROC with its 95% interval,
the distshift AUROC and the chosen layer (of the model's depth) on each model, on the recipe's own
task (the manifest's ``recipe.task``). An on-policy task's
labels are each model's own behaviour, so its two rows are different label sets: a difference
there is the models' behaviour as much as their representations.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "registry" / "reference_probes"
#: (recipe stem, the two models' slug suffixes): the same recipe on both models
PAIRS = (
    ("cities-cp-logreg", "smollm2", "qwen"),
    ("onpolicy-city-logreg", "smollm2", "qwen"),
    ("onpolicy-city-dom", "smollm2", "qwen"),
    ("onpolicy-sycophancy-logreg", "smollm2", "qwen"),
    ("onpolicy-sycophancy-dom", "smollm2", "qwen"),
    ("ea", "smollm2", "qwen"),
)


def record(slug: str) -> dict:
    return json.loads((REFERENCE / slug / "reference.json").read_text(encoding="utf-8"))


def cell(task: dict | None) -> str:
    if task is None:
        return "n/a"
    lo, hi = task["auroc_ci"]
    ds = task.get("auroc_ds")
    return f"{task['auroc']:.3f} [{lo:.3f}, {hi:.3f}]" + ("" if ds is None else f" / {ds:.3f}")


def recipe_task(slug: str) -> str:
    manifest = yaml.safe_load((REFERENCE / "manifest.yaml").read_text(encoding="utf-8"))["probes"]
    return next(e["recipe"]["task"] for e in manifest if e["slug"] == slug)


def table() -> str:
    lines = [
        "| recipe | task | SmolLM2-135M: AUROC [95% CI] / distshift | layer | Qwen-0.5B: AUROC [95% CI] / distshift | layer |",
        "|---|---|---|---|---|---|",
    ]
    for stem, small, big in PAIRS:
        a, b = record(f"{stem}-{small}"), record(f"{stem}-{big}")
        tasks = [recipe_task(f"{stem}-{small}")]
        depth = {
            slug: f"{r['layer_sweep']['chosen_layer']}/{r['evaluation']['model']['n_layers']}"
            for slug, r in ((small, a), (big, b))
        }
        for task in tasks:
            lines.append(
                f"| {stem} | {task} | {cell(a['evaluation']['tasks'].get(task))} | {depth[small]} |"
                f" {cell(b['evaluation']['tasks'].get(task))} | {depth[big]} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")
