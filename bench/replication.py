"""Replication of the source papers' qualitative findings on our models and truth tasks.

Findings checked (from the contrast-pair and supervised-probe literature; docs/METHODOLOGY.md):

1. Unsupervised contrast-pair probes (top principal component of the centered differences
   φ(x⁺) − φ(x⁻)) beat chance and approach supervised ones (logistic regression on the same
   differences) on truth tasks.
2. Supervised probes generalise across hallucination tasks: trained on one task's train split,
   tested on the other task's test split.
3. Truth is decodable from the middle layers, not layer 0: AUROC against layer, on train
   (grouped cross-validation) and on test.

Probe configurations (``--configs``): LR-cp and PCA-cp (paper 000's supervised and unsupervised
contrast-pair probes, last token), PCA-single (RepEval-style, paper 003: top principal component
of the bare statement's last-token state) and LR-mean (logistic regression on the bare text's
mean-pooled states). At layer 0 a last-token contrast-pair difference is the same vector for
every row (the embedding of "No" minus that of "Yes"), so its 0.5 there is true by construction;
LR-mean's layer 0 is a bag of token embeddings, the non-trivial layer-0 comparison.

Every probe's layer is chosen on the train split only (``evaluator.commands.reference_probes.sweep.layer_sweep``:
5-fold grouped, stratified CV, highest mean AUROC, ties broken by held-out log-loss). Test numbers at
every layer are reported for the layer curves only, never used to choose. Activations come from
the shared activation cache (filled on the first run; one harvest per split, all layers).

    .venv/bin/python bench/replication.py [--models smollm2-135m-instruct,gemma-3-270m]
        [--tasks cities-truth-v1,halueval-qa-v1] [--configs LR-cp,PCA-cp,PCA-single,LR-mean]
        [--json var/replication.json] [--markdown PATH]

Markdown tables go to stdout (or --markdown), the raw numbers to --json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from evaluator.commands.reference_probes.sweep import choose_layer, cv_score, grouped_folds, train_activations  # noqa: E402
from evaluator.core.activations import ActivationCache, SplitActivations  # noqa: E402
from evaluator.core.recipes import Recipe, fit_recipe  # noqa: E402
from evaluator.data.registry.load import Registry, load_registry  # noqa: E402
from evaluator.metrics.metrics import auroc  # noqa: E402

log = logging.getLogger("replication")

#: probe configurations: name → (method, input, position)
CONFIGS: dict[str, tuple[str, str, str]] = {
    "LR-cp": ("logistic_regression", "contrast_pair", "last_token"),  # paper 000, supervised
    "PCA-cp": ("pca_unsupervised", "contrast_pair", "last_token"),  # paper 000, unsupervised
    "PCA-single": ("pca_unsupervised", "single", "last_token"),  # RepEval-style (paper 003)
    "LR-mean": ("logistic_regression", "single", "mean"),  # mean-pooled: layer 0 = bag of embeddings
}
DESCRIBE = {
    "LR-cp": "logistic regression on contrast-pair differences, last token",
    "PCA-cp": "top principal component of centered contrast-pair differences, last token (unsupervised)",
    "PCA-single": "top principal component of the bare statement's last-token state (RepEval-style, unsupervised)",
    "LR-mean": "logistic regression on the bare text's mean-pooled states (layer 0 = bag of token embeddings)",
}
TRANSFER_CONFIGS = ("LR-cp", "PCA-cp", "LR-mean")
MODELS = ("smollm2-135m-instruct", "gemma-3-270m")
TASKS = ("cities-truth-v1", "halueval-qa-v1")
SEED = 0
FOLDS = 5


def recipe_for(config: str, task: str, layer: int = 0) -> Recipe:
    method, input_kind, position = CONFIGS[config]
    return Recipe(method, task, layer, position, input_kind, input_kind, {}, SEED)


def score(tensors: dict[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    """s(x) of a linear recipe's tensors (standardization first when present)."""
    Z = np.asarray(X, dtype=np.float64)
    if "mean" in tensors:
        Z = (Z - tensors["mean"]) / tensors["scale"]
    return Z @ tensors["weight"].astype(np.float64) + float(tensors["bias"])


def curves(
    recipe: Recipe, train: dict[int, SplitActivations], test: dict[int, SplitActivations]
) -> dict[str, Any]:
    """Per layer: mean/std grouped-CV AUROC on train, and test AUROC of the probe fit on all of
    train. The chosen layer uses the train CV only (the reference probes' rule)."""
    layers = sorted(train)
    first = train[layers[0]]
    folds = grouped_folds(first.labels, first.groups, FOLDS, recipe.seed)
    cv_mean, cv_std, cv_loss, test_auroc = [], [], [], []
    for layer in layers:
        r = recipe.at_layer(layer)
        cv = cv_score(r, train[layer].X, train[layer].labels, folds)
        t = fit_recipe(r, train[layer].X, train[layer].labels)
        cv_mean.append(cv.auroc)
        cv_std.append(cv.auroc_std)
        cv_loss.append(cv.log_loss)
        test_auroc.append(auroc(score(t, test[layer].X), test[layer].labels))
    chosen = choose_layer(layers, cv_mean, cv_loss)
    return {
        "layers": layers,
        "cv_auroc": cv_mean,
        "cv_auroc_std": cv_std,
        "cv_log_loss": cv_loss,
        "test_auroc": test_auroc,
        "chosen_layer": chosen,
        "cv_at_chosen": cv_mean[layers.index(chosen)],
        "test_at_chosen": test_auroc[layers.index(chosen)],
    }


def run(
    models: list[str], tasks: list[str], configs: list[str], cache_dir: Path, registry: Registry
) -> dict[str, Any]:
    from evaluator.core.models import load_model

    cache = ActivationCache(cache_dir)
    out: dict[str, Any] = {
        "models": {},
        "config": {
            "folds": FOLDS,
            "seed": SEED,
            "configs": {
                c: dict(zip(("method", "input", "position"), CONFIGS[c], strict=True)) for c in configs
            },
        },
    }
    for model_id in models:
        start = time.perf_counter()
        lm = load_model(model_id, registry=registry, cache_dir=cache_dir, device="cpu", dtype="float32")
        layers = list(range(lm.n_layers + 1))
        acts: dict[tuple[str, str, str], dict[int, SplitActivations]] = {}
        per_task: dict[str, Any] = {}
        for task in tasks:
            per_task[task] = {}
            for config in configs:
                recipe = recipe_for(config, task)
                for split in ("train", "test"):
                    acts[(config, task, split)] = train_activations(
                        lm, registry, recipe, layers, cache=cache, split=split
                    )
                per_task[task][config] = curves(
                    recipe, acts[(config, task, "train")], acts[(config, task, "test")]
                )
                log.info("%s %s %s done", model_id, task, config)
        transfer: list[dict[str, Any]] = []
        for source in tasks:
            for target in tasks:
                if source == target:
                    continue
                for config in (c for c in TRANSFER_CONFIGS if c in configs):
                    layer = per_task[source][config]["chosen_layer"]
                    train = acts[(config, source, "train")][layer]
                    t = fit_recipe(recipe_for(config, source, layer), train.X, train.labels)
                    target_test = acts[(config, target, "test")][layer]
                    transfer.append(
                        {
                            "source": source,
                            "target": target,
                            "config": config,
                            "layer": layer,
                            "transfer_auroc": auroc(score(t, target_test.X), target_test.labels),
                            "in_task_auroc_target_same_layer": per_task[target][config]["test_auroc"][layer],
                            "in_task_auroc_target_own_layer": per_task[target][config]["test_at_chosen"],
                        }
                    )
        out["models"][model_id] = {
            "n_layers": lm.n_layers,
            "tasks": per_task,
            "transfer": transfer,
            "seconds": time.perf_counter() - start,
        }
    return out


def ea_curves(models: list[str], cache_dir: Path, registry: Registry) -> dict[str, Any]:
    """Reporting only, after the choice: the eval-awareness reference recipe (from the manifest)
    fitted on train at every layer, AUROC on test and on distshift (formatting stripped)."""
    from evaluator.commands.reference_probes.evaluation import SIDECAR, read_sidecar
    from evaluator.commands.reference_probes.manifest import ea_reference_for, load_manifest
    from evaluator.core.models import load_model

    cache = ActivationCache(cache_dir)
    entries = load_manifest(registry)
    out: dict[str, Any] = {}
    for model_id in models:
        # the layer-swept reference (the first one; a held-out-format selection that replaced it
        # records its own candidates × layers in its reference.json)
        entry = next(
            (
                e
                for e in entries
                if e.role == "eval_awareness" and e.base_model == model_id and not e.candidates
            ),
            ea_reference_for(entries, model_id),
        )
        if entry is None or entry.candidates:
            continue
        lm = load_model(model_id, registry=registry, cache_dir=cache_dir, device="cpu", dtype="float32")
        layers = entry.candidate_layers(lm.n_layers)
        recipe = entry.recipe_at(0, registry)
        acts = {
            split: train_activations(lm, registry, recipe, layers, cache=cache, split=split)
            for split in ("train", "test", "distshift")
        }
        test, dist = [], []
        for layer in layers:
            t = fit_recipe(recipe.at_layer(layer), acts["train"][layer].X, acts["train"][layer].labels)
            test.append(auroc(score(t, acts["test"][layer].X), acts["test"][layer].labels))
            dist.append(auroc(score(t, acts["distshift"][layer].X), acts["distshift"][layer].labels))
        out[model_id] = {
            "slug": entry.slug,
            "position": recipe.position,
            "layers": layers,
            "test": test,
            "distshift": dist,
        }
        sidecar = entry.directory(registry.root) / SIDECAR
        if sidecar.is_file():
            out[model_id]["chosen_layer"] = read_sidecar(sidecar.parent)["layer_sweep"]["chosen_layer"]
    return out


# --------------------------------------------------------------------------- tables


def fmt(x: float) -> str:
    return f"{x:.3f}"


def markdown(result: dict[str, Any]) -> str:
    """The tables of RESULTS.md."""
    models = result["models"]
    configs = list(result["config"]["configs"])
    lines: list[str] = ["Probe configurations:", ""]
    lines += [f"- **{c}**: {DESCRIBE[c]}" for c in configs]
    lines += [
        "",
        "### 1. Unsupervised vs supervised probes on the truth tasks",
        "",
        "Test AUROC at the layer chosen by grouped 5-fold CV on train: `test (train CV) @layer`.",
        "",
        "| model | task | " + " | ".join(configs) + " |",
        "|---|---|" + "---|" * len(configs),
    ]
    for model_id, m in models.items():
        for task, r in m["tasks"].items():
            cells = [
                f"{fmt(r[c]['test_at_chosen'])} ({fmt(r[c]['cv_at_chosen'])}) @{r[c]['chosen_layer']}"
                for c in configs
            ]
            lines.append(f"| {model_id} | {task} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### 2. Cross-task generalisation (train on one hallucination task, test on the other)",
        "",
        "At the source task's chosen layer; 'in-task' is the target task's own probe (same configuration).",
        "",
        "| model | probe | train on → test on | layer | transfer test AUROC | in-task, same layer | in-task, own layer |",
        "|---|---|---|---|---|---|---|",
    ]
    for model_id, m in models.items():
        for t in m["transfer"]:
            lines.append(
                f"| {model_id} | {t['config']} | {t['source']} → {t['target']} | {t['layer']}"
                f" | {fmt(t['transfer_auroc'])} | {fmt(t['in_task_auroc_target_same_layer'])}"
                f" | {fmt(t['in_task_auroc_target_own_layer'])} |"
            )
    lines += [
        "",
        "### 3. Layer curves: AUROC against layer",
        "",
        "Summary (test AUROC; the layer in brackets):",
        "",
        "| model | task | probe | layer 0 | best layer on test | last layer | chosen on train CV |",
        "|---|---|---|---|---|---|---|",
    ]
    for model_id, m in models.items():
        for task, r in m["tasks"].items():
            for c in configs:
                cur = r[c]
                best = int(np.argmax(cur["test_auroc"]))
                lines.append(
                    f"| {model_id} | {task} | {c} | {fmt(cur['test_auroc'][0])}"
                    f" | {fmt(cur['test_auroc'][best])} ({cur['layers'][best]}) | {fmt(cur['test_auroc'][-1])}"
                    f" | {fmt(cur['test_at_chosen'])} ({cur['chosen_layer']}) |"
                )
    lines.append("")
    for model_id, m in models.items():
        for task, r in m["tasks"].items():
            lines += [
                f"**{model_id}, {task}**: train-CV / test AUROC per layer (* = chosen on train CV)",
                "",
                "| layer | " + " | ".join(configs) + " |",
                "|---|" + "---|" * len(configs),
            ]
            for k, layer in enumerate(r[configs[0]]["layers"]):
                cells = []
                for c in configs:
                    cur = r[c]
                    star = "*" if layer == cur["chosen_layer"] else ""
                    cells.append(f"{fmt(cur['cv_auroc'][k])}{star} / {fmt(cur['test_auroc'][k])}")
                lines.append(f"| {layer} | " + " | ".join(cells) + " |")
            lines.append("")
    ea = result.get("ea_reference")
    if ea:
        lines += [
            "### 4. Eval-awareness reference recipe: test vs distshift AUROC by layer (reporting only)",
            "",
            "The reference probes' layers were chosen on train CV; this table was made afterwards.",
            "",
            "| model | probe (position) | chosen layer | test | distshift | best distshift over layers (layer) |",
            "|---|---|---|---|---|---|",
        ]
        for model_id, c in ea.items():
            k = c["layers"].index(c["chosen_layer"]) if "chosen_layer" in c else None
            best = int(np.argmax(c["distshift"]))
            at = f"{fmt(c['test'][k])} | {fmt(c['distshift'][k])}" if k is not None else "– | –"
            lines.append(
                f"| {model_id} | {c['slug']} ({c['position']}) | {c.get('chosen_layer', '–')} | {at}"
                f" | {fmt(c['distshift'][best])} ({c['layers'][best]}) |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def reference_table(registry: Registry) -> str:
    """The reference probes' recorded numbers (registry/reference_probes/*/reference.json)."""
    from evaluator.commands.reference_probes.evaluation import read_sidecar
    from evaluator.commands.reference_probes.manifest import load_manifest

    lines = [
        "| slug | model | task | method | input | layer (train CV) | test AUROC [95% CI] | auroc_ea | auroc_ds"
        " | ECE | category AUROC |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in load_manifest(registry):
        side = read_sidecar(entry.directory(registry.root))
        ev = side["evaluation"]
        if "selection" in side:  # held-out-format selection: the chosen method, its worst-fold AUROC
            chosen = side["selection"]["chosen"]
            method, layer, cv = chosen["method"], chosen["layer"], chosen["worst"]
        else:
            sweep = side["layer_sweep"]
            method, layer = entry.method, sweep["chosen_layer"]
            cv = sweep["cv_auroc"][sweep["layers"].index(layer)]
        own = ev["tasks"][entry.task]
        ea = "n/a" if own["auroc_ea"] is None else fmt(own["auroc_ea"])
        lines.append(
            f"| {entry.slug} | {entry.base_model} | {entry.task} | {method} | {entry.recipe['input']}"
            f" | {layer} ({fmt(cv)})"
            f" | {fmt(own['auroc'])} [{fmt(own['auroc_ci'][0])}, {fmt(own['auroc_ci'][1])}] | {ea}"
            f" | {fmt(own['auroc_ds'])} | {fmt(own['ece'])} | {fmt(ev['aggregate']['auroc'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"of {', '.join(CONFIGS)}")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(os.environ.get("PROBEBENCH_CACHE_DIR", ROOT / "var" / "cache")),
    )
    parser.add_argument("--json", type=Path, default=None, help="write the raw numbers here")
    parser.add_argument("--markdown", type=Path, default=None, help="write the tables here (else stdout)")
    parser.add_argument(
        "--reference-probes",
        action="store_true",
        help="print only the table of the reference probes' recorded metrics (no model, no fitting)",
    )
    parser.add_argument(
        "--no-ea", action="store_true", help="skip section 4 (eval-awareness test vs distshift)"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    registry = load_registry(ROOT)
    if args.reference_probes:
        sys.stdout.write(reference_table(registry))
        return 0
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration(s) {', '.join(unknown)}; accepted: {', '.join(CONFIGS)}")
    result = run(models, tasks, configs, args.cache_dir, registry)
    if not args.no_ea:
        result["ea_reference"] = ea_curves(
            [m for m, s in registry.models.items() if not s.on_request], args.cache_dir, registry
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    if args.markdown:
        args.markdown.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
