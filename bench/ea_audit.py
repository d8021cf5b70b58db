"""After the choice: how every eval-awareness candidate would have done on the format shift.

The eval-awareness reference probe is chosen on train alone (evaluator/axes/ea_selection.py). This
script looks, afterwards, at what the choice could not see: every candidate of the manifest's
selection grid (method × position × layer) fitted on the whole train split and scored on
benchmark-vs-user-v1's distshift split, beside the text panel's strongest member there. It chooses
nothing; it says whether any activation probe of the grid beats the text on the shift, and where
the chosen one ranks.

    .venv/bin/python bench/ea_audit.py [--model smollm2-135m-instruct] [--slug ea-ctx-smollm2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TASK = "benchmark-vs-user-v1"


def main() -> None:
    from evaluator.axes.run import harvest_config_default
    from evaluator.axes.text_baselines import load_panel, strongest
    from evaluator.commands.base import default_cache_dir
    from evaluator.commands.reference_probes.manifest import load_manifest
    from evaluator.commands.reference_probes.sweep import score_tensors
    from evaluator.core.activations import ActivationCache, split_activations
    from evaluator.core.models import load_model
    from evaluator.core.recipes import fit_recipe
    from evaluator.data.registry.load import load_registry
    from evaluator.metrics.metrics import auroc

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slug", default="ea-ctx-smollm2", help="a selection entry of the manifest")
    args = parser.parse_args()
    registry = load_registry()
    entry = next(e for e in load_manifest(registry) if e.slug == args.slug)
    if not entry.candidates:
        raise SystemExit(f"{args.slug} has no selection grid")
    lm = load_model(entry.base_model, registry=registry, cache_dir=default_cache_dir(), device="cpu")
    cache = ActivationCache(default_cache_dir())
    config = harvest_config_default(registry)
    layers = list(range(lm.n_layers + 1))
    acts = {
        (split, position): split_activations(
            lm, registry, TASK, split, layers=layers, position=position, cache=cache, config=config
        )
        for split in ("train", "distshift")
        for position in sorted({c.position for c in entry.candidates})
    }
    panel = load_panel(registry.root, registry.task(TASK), None)
    bar_name = strongest(panel, "distshift")
    bar = panel["members"][bar_name]["splits"]["distshift"]["auroc"]
    chosen = json.loads((entry.directory(registry.root) / "probe.json").read_text())["recipe"]
    rows = []
    for cand in entry.candidates:
        for layer in layers:
            recipe = entry.recipe_at(layer, registry, cand)
            train = acts[("train", cand.position)][layer]
            shift = acts[("distshift", cand.position)][layer]
            tensors = fit_recipe(recipe, train.X, train.labels)
            value = auroc(score_tensors(recipe, tensors, shift.X), shift.labels)
            is_chosen = (recipe.method, recipe.position, recipe.layer, recipe.hyperparameters) == (
                chosen["method"],
                chosen["position"],
                chosen["layer"],
                chosen["hyperparameters"],
            )
            rows.append(
                {"candidate": cand.label(), "layer": layer, "distshift_auroc": value, "chosen": is_chosen}
            )
    rows.sort(key=lambda r: -r["distshift_auroc"])
    values = np.array([r["distshift_auroc"] for r in rows])
    chosen_row = next(r for r in rows if r["chosen"])
    out = {
        "model": entry.base_model,
        "text_bar": {"member": bar_name, "distshift_auroc": bar},
        "candidates": len(rows),
        "above_text_bar": int((values > bar).sum()),
        "best": rows[0],
        "chosen": chosen_row | {"rank": rows.index(chosen_row) + 1},
        "median": float(np.median(values)),
        "top10": rows[:10],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
