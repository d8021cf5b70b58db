"""Replication of the source papers' qualitative findings on our models and truth tasks.

Findings checked (papers 000 and 003 in ../shared/papers):

1. Unsupervised contrast-pair probes (top principal component of the centered differences
   φ(x⁺) − φ(x⁻)) beat chance and approach supervised ones (logistic regression on the same
   differences) on truth tasks.
2. Supervised probes generalise across hallucination tasks: trained on one task's train split,
   tested on the other task's test split.
3. Truth is decodable from the middle layers, not layer 0: AUROC against layer, on train
   (grouped cross-validation) and on test.

Every probe's layer is chosen on the train split only (``evaluator.reference_probes.layer_sweep``:
5-fold grouped, stratified CV, highest mean AUROC, ties broken by held-out log-loss). Test numbers at
every layer are reported for the layer curves only, never used to choose. Activations come from
the shared activation cache (filled on the first run; one harvest per split, all layers).

    .venv/bin/python bench/replication.py [--models smollm2-135m-instruct,gemma-3-270m]
        [--tasks cities-truth-v1,halueval-qa-v1] [--json var/replication.json] [--markdown PATH]

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

from evaluator.activations import ActivationCache, SplitActivations  # noqa: E402
from evaluator.metrics import auroc  # noqa: E402
from evaluator.recipes import Recipe, fit_recipe  # noqa: E402
from evaluator.reference_probes import choose_layer, cv_score, grouped_folds, train_activations  # noqa: E402
from evaluator.registry import Registry, load_registry  # noqa: E402

log = logging.getLogger("replication")

METHODS = ("logistic_regression", "pca_unsupervised")
SHORT = {"logistic_regression": "LR", "pca_unsupervised": "PCA"}
MODELS = ("smollm2-135m-instruct", "gemma-3-270m")
TASKS = ("cities-truth-v1", "halueval-qa-v1")
INPUT = "contrast_pair"
POSITION = "last_token"
SEED = 0
FOLDS = 5


def score(tensors: dict[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    """s(x) of a linear recipe's tensors (standardization first when present)."""
    Z = np.asarray(X, dtype=np.float64)
    if "mean" in tensors:
        Z = (Z - tensors["mean"]) / tensors["scale"]
    return Z @ tensors["weight"].astype(np.float64) + float(tensors["bias"])


def curves(
    recipe: Recipe, train: dict[int, SplitActivations], test: dict[int, SplitActivations]
) -> dict[str, Any]:
    """Per layer: mean/std grouped-CV AUROC on train, and test AUROC of the probe fit on all of train."""
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


def run(models: list[str], tasks: list[str], cache_dir: Path, registry: Registry) -> dict[str, Any]:
    from evaluator.models import load_model

    cache = ActivationCache(cache_dir)
    out: dict[str, Any] = {
        "models": {},
        "config": {"folds": FOLDS, "seed": SEED, "input": INPUT, "position": POSITION},
    }
    for model_id in models:
        start = time.perf_counter()
        lm = load_model(model_id, registry=registry, cache_dir=cache_dir, device="cpu", dtype="float32")
        layers = list(range(lm.n_layers + 1))
        acts: dict[tuple[str, str], dict[int, SplitActivations]] = {}
        for task in tasks:
            base = Recipe("logistic_regression", task, 0, POSITION, INPUT, INPUT, {}, SEED)
            for split in ("train", "test"):
                acts[(task, split)] = train_activations(lm, registry, base, layers, cache=cache, split=split)
        per_task: dict[str, Any] = {}
        for task in tasks:
            per_task[task] = {}
            for method in METHODS:
                recipe = Recipe(method, task, 0, POSITION, INPUT, INPUT, {}, SEED)
                per_task[task][method] = curves(recipe, acts[(task, "train")], acts[(task, "test")])
                log.info("%s %s %s done", model_id, task, method)
        transfer: list[dict[str, Any]] = []
        for source in tasks:
            for target in tasks:
                if source == target:
                    continue
                for method in METHODS:
                    layer = per_task[source][method]["chosen_layer"]
                    recipe = Recipe(method, source, layer, POSITION, INPUT, INPUT, {}, SEED)
                    train = acts[(source, "train")][layer]
                    t = fit_recipe(recipe, train.X, train.labels)
                    target_test = acts[(target, "test")][layer]
                    transfer.append(
                        {
                            "source": source,
                            "target": target,
                            "method": method,
                            "layer": layer,
                            "transfer_auroc": auroc(score(t, target_test.X), target_test.labels),
                            "in_task_auroc_target_same_layer": per_task[target][method]["test_auroc"][layer],
                            "in_task_auroc_target_own_layer": per_task[target][method]["test_at_chosen"],
                        }
                    )
        out["models"][model_id] = {
            "n_layers": lm.n_layers,
            "tasks": per_task,
            "transfer": transfer,
            "seconds": time.perf_counter() - start,
        }
    return out


# --------------------------------------------------------------------------- tables


def fmt(x: float) -> str:
    return f"{x:.3f}"


def markdown(result: dict[str, Any]) -> str:
    lines: list[str] = []
    models = result["models"]
    lines += [
        "### 1. Unsupervised (PCA) vs supervised (LR) contrast-pair probes",
        "",
        "Test AUROC at the layer chosen by grouped 5-fold CV on train (CV AUROC in brackets).",
        "",
        "| model | task | LR layer | LR test (train CV) | PCA layer | PCA test (train CV) | PCA − LR |",
        "|---|---|---|---|---|---|---|",
    ]
    for model_id, m in models.items():
        for task, r in m["tasks"].items():
            lr, pca = r["logistic_regression"], r["pca_unsupervised"]
            lines.append(
                f"| {model_id} | {task} | {lr['chosen_layer']} | {fmt(lr['test_at_chosen'])} ({fmt(lr['cv_at_chosen'])})"
                f" | {pca['chosen_layer']} | {fmt(pca['test_at_chosen'])} ({fmt(pca['cv_at_chosen'])})"
                f" | {pca['test_at_chosen'] - lr['test_at_chosen']:+.3f} |"
            )
    lines += [
        "",
        "### 2. Cross-task generalisation (train on one hallucination task, test on the other)",
        "",
        "At the source task's chosen layer; 'in-task' is the target task's own probe (same method).",
        "",
        "| model | method | train on → test on | layer | transfer test AUROC | in-task, same layer | in-task, own layer |",
        "|---|---|---|---|---|---|---|",
    ]
    for model_id, m in models.items():
        for t in m["transfer"]:
            lines.append(
                f"| {model_id} | {SHORT[t['method']]} | {t['source']} → {t['target']} | {t['layer']}"
                f" | {fmt(t['transfer_auroc'])} | {fmt(t['in_task_auroc_target_same_layer'])}"
                f" | {fmt(t['in_task_auroc_target_own_layer'])} |"
            )
    lines += ["", "### 3. Layer curves (AUROC against layer)", ""]
    for model_id, m in models.items():
        for task, r in m["tasks"].items():
            lr, pca = r["logistic_regression"], r["pca_unsupervised"]
            lines += [
                f"**{model_id}, {task}** (contrast pairs, last token; * = layer chosen on train CV)",
                "",
                "| layer | LR train-CV | LR test | PCA train-CV | PCA test |",
                "|---|---|---|---|---|",
            ]
            for k, layer in enumerate(lr["layers"]):
                star_lr = "*" if layer == lr["chosen_layer"] else ""
                star_pca = "*" if layer == pca["chosen_layer"] else ""
                lines.append(
                    f"| {layer} | {fmt(lr['cv_auroc'][k])}{star_lr} | {fmt(lr['test_auroc'][k])}"
                    f" | {fmt(pca['cv_auroc'][k])}{star_pca} | {fmt(pca['test_auroc'][k])} |"
                )
            lines.append("")
    lines += [
        "### Summary of the layer curves",
        "",
        "| model | task | method | layer 0 test | best test (layer) | last layer test | chosen (train CV) test |",
        "|---|---|---|---|---|---|---|",
    ]
    for model_id, m in models.items():
        for task, r in m["tasks"].items():
            for method in METHODS:
                c = r[method]
                best = int(np.argmax(c["test_auroc"]))
                lines.append(
                    f"| {model_id} | {task} | {SHORT[method]} | {fmt(c['test_auroc'][0])}"
                    f" | {fmt(c['test_auroc'][best])} ({c['layers'][best]}) | {fmt(c['test_auroc'][-1])}"
                    f" | {fmt(c['test_at_chosen'])} ({c['chosen_layer']}) |"
                )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(os.environ.get("PROBEBENCH_CACHE_DIR", ROOT / "var" / "cache")),
    )
    parser.add_argument("--json", type=Path, default=None, help="write the raw numbers here")
    parser.add_argument("--markdown", type=Path, default=None, help="write the tables here (else stdout)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    registry = load_registry(ROOT)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    result = run(models, tasks, args.cache_dir, registry)
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
