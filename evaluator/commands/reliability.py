"""How much each metric moves when nothing but a seed changes, and whether it lands where it must
on entries whose answer is known.

A metric is only worth ranking by if (a) it separates entries by more than its own noise and (b)
it gives the known answer on entries built to have one. This module measures both on one fixed
reference probe and task (``SUBJECT``), through the same activations, split files and text panel
the workers read:

- **reseed**: the reference probe's recipe re-fit ``SEEDS`` times, each on a bootstrap resample of
  the train rows drawn with that seed (the recipe's own seed set to it too). The standard deviation
  of each metric over the refits is its *reseed SD*: a gap between two entries smaller than about
  twice it is noise.
- **diagnostic entries**, each scored on the same test and distshift rows:

  - ``oracle``: leaks the label (score = label, a seeded jitter breaking ties): every quality metric
    must be at its best and the lift over text must be positive;
  - ``shuffled``: the recipe re-fit on train with the labels permuted (mean over the seeds: one
    permutation's direction still projects on the real signal with a random sign): at chance, and
    no lift;
  - ``random_direction``: a unit direction drawn at random in the probe's layer (mean over the
    seeds; a direction and its negative are equally likely, so its expected AUROC is exactly 0.5):
    near chance, and nothing added beyond the text;
  - ``bag_of_words``: the text panel's word TF-IDF member presented as a probe: a text model has no
    lift over the strongest text model and adds nothing beyond the text controls.

``EXPECTATIONS`` states, per diagnostic and metric, where the value must land; a metric with a
failed expectation is *flagged*: the board shows it but does not rank by it.

``python -m evaluator reliability --json`` prints the table; ``--write`` stores it as
``registry/reliability.json`` (the methodology page shows it).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.axes.run import harvest_config_default
from evaluator.axes.text_baselines import controlled_auroc, load_panel, member_scores, text_lift
from evaluator.commands.base import cache_registry_json_args, default_cache_dir
from evaluator.commands.reference_probes.manifest import load_manifest
from evaluator.commands.reference_probes.sweep import score_tensors
from evaluator.core.activations import ActivationCache, split_activations
from evaluator.core.probes import load_probe
from evaluator.core.recipes import Recipe, fit_recipe
from evaluator.data.registry.load import load_registry
from evaluator.errors import EvaluatorError
from evaluator.metrics.metric_table import OPERATING_FPR, metrics
from evaluator.metrics.metrics import auroc, brier, ece, recall_at_fpr, sigmoid, threshold_at_fpr

#: the fixed reference probe and task the diagnostics run on: an on-policy task (labels from the
#: model's own answers) whose test AUROC is far from saturated and whose panel scores test and
#: distshift
SUBJECT = "onpolicy-city-logreg-smollm2"
SEEDS = 5
RECORD = Path("registry") / "reliability.json"
#: the metrics measured for every entry, in table order
METRICS = ("auroc", "auroc_ds", "ece", "brier", "recall_at_1pct_fpr", "lift_over_text", "controlled_auroc")
DIAGNOSTICS = ("oracle", "shuffled", "random_direction", "bag_of_words")

Check = Callable[[dict[str, Any]], bool]
#: an expectation's statement: fixed, or written from the measured value dict (a chance band
#: follows from the entry's numbers of positives and negatives)
Statement = str | Callable[[dict[str, Any]], str]

#: how many null standard deviations a chance band spans on each side
CHANCE_SDS = 2.0


def auroc_null_sd(n_pos: int, n_neg: int) -> float:
    """The standard deviation of the AUROC of scores unrelated to the labels (the Mann-Whitney
    null): sqrt((n_pos + n_neg + 1) / (12 n_pos n_neg)); 0.041 at 100 + 100 rows."""
    return math.sqrt((n_pos + n_neg + 1) / (12 * n_pos * n_neg))


def recall_null_sd(n_pos: int, fpr: float = OPERATING_FPR) -> float:
    """The standard deviation of the recall, over n_pos positives, of scores unrelated to the
    labels at a threshold passing a share ``fpr`` of negatives (binomial: sqrt(fpr (1 - fpr) / n_pos))."""
    return math.sqrt(fpr * (1 - fpr) / n_pos)


def _auroc_band(v: dict[str, Any]) -> float:
    return CHANCE_SDS * auroc_null_sd(v["n_pos"], v["n_neg"])


def _recall_band(v: dict[str, Any]) -> float:
    return OPERATING_FPR + CHANCE_SDS * recall_null_sd(v["n_pos"])


def _auroc_at_chance(v: dict[str, Any]) -> bool:
    return abs(v["value"] - 0.5) <= _auroc_band(v)


def _auroc_chance_statement(v: dict[str, Any]) -> str:
    return (
        f"within 0.5 ± {_auroc_band(v):.3f} ({CHANCE_SDS:g} SD of the chance AUROC at"
        f" {v['n_pos']} + {v['n_neg']} rows)"
    )


def _recall_chance_statement(v: dict[str, Any]) -> str:
    return (
        f"≤ {_recall_band(v):.3f} (the operating FPR + {CHANCE_SDS:g} SD of chance recall at"
        f" {v['n_pos']} positives)"
    )


def _ci_has_zero(v: dict[str, Any]) -> bool:
    lo, hi = v.get("ci") or (math.nan, math.nan)
    return bool(lo <= 0.0 <= hi)


#: (diagnostic, metric) → (what must hold, the test on the measured value dict {value, ci?, ref,
#: n_pos?, n_neg?}). The chance bands follow from the entry's rows: CHANCE_SDS standard deviations
#: of the metric's null distribution (scores unrelated to the labels) at its n_pos and n_neg. The
#: shuffled and random-direction values are means over the seeds, whose spread is at most one
#: draw's: the band of one draw is the conservative one.
EXPECTATIONS: dict[tuple[str, str], tuple[Statement, Check]] = {
    ("oracle", "auroc"): ("≥ 0.99", lambda v: v["value"] >= 0.99),
    ("oracle", "auroc_ds"): ("≥ 0.99", lambda v: v["value"] >= 0.99),
    ("oracle", "ece"): ("≤ 0.05", lambda v: v["value"] <= 0.05),
    ("oracle", "brier"): ("≤ 0.05", lambda v: v["value"] <= 0.05),
    ("oracle", "recall_at_1pct_fpr"): ("≥ 0.99", lambda v: v["value"] >= 0.99),
    ("oracle", "lift_over_text"): ("> 0, interval above 0", lambda v: v["ci"][0] > 0),
    ("oracle", "controlled_auroc"): ("> 0, interval above 0", lambda v: v["ci"][0] > 0),
    ("shuffled", "auroc"): (_auroc_chance_statement, _auroc_at_chance),
    ("shuffled", "auroc_ds"): (_auroc_chance_statement, _auroc_at_chance),
    ("shuffled", "recall_at_1pct_fpr"): (_recall_chance_statement, lambda v: v["value"] <= _recall_band(v)),
    ("shuffled", "lift_over_text"): (
        "≤ 0 or interval holding 0",
        lambda v: v["value"] <= 0 or _ci_has_zero(v),
    ),
    ("shuffled", "controlled_auroc"): ("interval holding 0, or below", lambda v: v["ci"][0] <= 0),
    ("random_direction", "auroc"): (_auroc_chance_statement, _auroc_at_chance),
    ("random_direction", "controlled_auroc"): ("interval holding 0, or below", lambda v: v["ci"][0] <= 0),
    ("bag_of_words", "lift_over_text"): ("≤ 0", lambda v: v["value"] <= 1e-9),
    ("bag_of_words", "controlled_auroc"): ("interval holding 0, or below", lambda v: v["ci"][0] <= 0),
}


# --------------------------------------------------------------------------- one entry's metrics


def entry_metrics(
    *,
    test: tuple[list[str], np.ndarray, np.ndarray],
    distshift: tuple[np.ndarray, np.ndarray] | None,
    train_negatives: np.ndarray,
    panel: dict[str, Any] | None,
    probability: Callable[[np.ndarray], np.ndarray],
) -> dict[str, dict[str, Any]]:
    """The METRICS of one entry from its scores: ``test`` (ids, labels, scores), ``distshift``
    (labels, scores), the train negatives' scores (the 1%-FPR operating point) and the task's text
    panel. Each metric is ``{"value": float, "ci": [lo, hi]?}``; a metric that cannot be computed
    is left out."""

    ids, y, s = test
    p = probability(s)
    n = {"n_pos": int(np.sum(y == 1)), "n_neg": int(np.sum(y == 0))}  # for the chance bands
    out: dict[str, dict[str, Any]] = {
        "auroc": {"value": auroc(s, y), **n},
        "ece": {"value": ece(p, y)},
        "brier": {"value": brier(p, y)},
        "recall_at_1pct_fpr": {
            "value": recall_at_fpr(s, y, threshold_at_fpr(train_negatives, OPERATING_FPR)),
            **n,
        },
    }
    if distshift is not None:
        y_ds = distshift[0]
        out["auroc_ds"] = {
            "value": auroc(distshift[1], y_ds),
            "n_pos": int(np.sum(y_ds == 1)),
            "n_neg": int(np.sum(y_ds == 0)),
        }
    if panel is not None:
        rows = list(zip(ids, y.tolist(), s.tolist(), strict=True))
        lift = text_lift(panel, rows)
        if lift is not None:
            out["lift_over_text"] = {"value": lift["lift"], "ci": lift["ci"]}
        controlled = controlled_auroc(panel, rows)
        if controlled is not None:
            out["controlled_auroc"] = {"value": controlled["delta"], "ci": controlled["ci"]}
    return out


def summarise(
    reseeds: list[dict[str, dict[str, Any]]], diagnostics: dict[str, dict[str, dict[str, Any]]]
) -> dict[str, Any]:
    """Per metric: the reseed mean and SD, each diagnostic's value and whether it met its
    expectation, and ``flagged`` (some expectation failed)."""
    table: dict[str, Any] = {}
    for metric in METRICS:
        values = [r[metric]["value"] for r in reseeds if metric in r]
        row: dict[str, Any] = {
            "reseed_mean": float(np.mean(values)) if values else None,
            "reseed_sd": float(np.std(values, ddof=1)) if len(values) > 1 else None,
            "diagnostics": {},
            "flagged": False,
        }
        for name in DIAGNOSTICS:
            measured = diagnostics.get(name, {}).get(metric)
            if measured is None:
                continue
            cell: dict[str, Any] = {"value": measured["value"]}
            if "ci" in measured:
                cell["ci"] = list(measured["ci"])
            rule = EXPECTATIONS.get((name, metric))
            if rule is not None:
                given = measured | {"ref": row["reseed_mean"]}
                ok = bool(rule[1](given))
                statement = rule[0](given) if callable(rule[0]) else rule[0]
                cell |= {"expected": statement, "ok": ok}
                row["flagged"] = row["flagged"] or not ok
            row["diagnostics"][name] = cell
        table[metric] = row
    return table


# --------------------------------------------------------------------------- the run


def _projection(w: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    def score(X: np.ndarray) -> np.ndarray:
        return np.asarray(X, np.float64) @ w

    return score


def _bootstrap(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=n)


def run_reliability(
    registry,
    *,
    cache_dir: str | Path,
    subject: str = SUBJECT,
    seeds: int = SEEDS,
    device: str | None = "cpu",
) -> dict[str, Any]:
    """Measure the reliability table on ``subject`` (a reference probe slug of the manifest)."""
    import dataclasses

    # imported when called: tests replace evaluator.core.models.load_model (no model may load)
    from evaluator.core.models import load_model

    entry = next((e for e in load_manifest(registry) if e.slug == subject), None)
    if entry is None:
        raise EvaluatorError(f"reliability: {subject} is not a reference probe of the manifest")
    probe = load_probe(entry.directory(registry.root), registry=registry)
    recipe = Recipe.from_dict(dict(probe.metadata.recipe or {}), registry=registry)
    task = registry.task(recipe.task)
    model = probe.base_model if task.on_policy else None
    panel = load_panel(registry.root, task, model)
    lm = load_model(
        probe.base_model, registry=registry, cache_dir=cache_dir, device=device, protocol=registry.protocol()
    )
    cache = ActivationCache(cache_dir)
    config = harvest_config_default(registry)

    def acts(split: str):
        return split_activations(
            lm,
            registry,
            task.id,
            split,
            layers=[recipe.layer],
            position=recipe.position,
            input_kind=recipe.input,
            cache=cache,
            config=config,
        )[recipe.layer]

    train, test = acts("train"), acts("test")
    distshift = acts("distshift") if "distshift" in task.splits_for(model) else None

    def measure(score: Callable[[np.ndarray], np.ndarray], probability=sigmoid, oracle=False):
        def scored(a):
            return (
                a.labels + np.random.default_rng(0).normal(0, 1e-3, a.labels.size) if oracle else score(a.X)
            )

        s_train = scored(train)
        return entry_metrics(
            test=(test.ids, test.labels, scored(test)),
            distshift=(distshift.labels, scored(distshift)) if distshift is not None else None,
            train_negatives=s_train[train.labels == 0],
            panel=panel,
            probability=probability,
        )

    def refit(seed: int, *, rows: np.ndarray, labels: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        r = dataclasses.replace(recipe, seed=seed)
        tensors = fit_recipe(r, train.X[rows], labels)
        return lambda X: score_tensors(r, tensors, X)

    reseeds = []
    for seed in range(seeds):
        rows = _bootstrap(train.labels.size, seed)
        reseeds.append(measure(refit(seed, rows=rows, labels=train.labels[rows])))

    everything = np.arange(train.labels.size)

    def mean_over(entries: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
        """Each metric's mean over the entries (an interval: the mean of theirs)."""
        out: dict[str, dict[str, Any]] = {}
        for m in entries[0]:
            out[m] = {"value": float(np.mean([e[m]["value"] for e in entries]))}
            if all("ci" in e[m] for e in entries):
                out[m]["ci"] = [float(np.mean([e[m]["ci"][k] for e in entries])) for k in (0, 1)]
            out[m] |= {k: entries[0][m][k] for k in ("n_pos", "n_neg") if k in entries[0][m]}
        return out

    shuffled, randoms = [], []
    for seed in range(seeds):
        permuted = np.random.default_rng(seed).permutation(train.labels)
        shuffled.append(measure(refit(seed, rows=everything, labels=permuted)))
        w = np.random.default_rng(1000 + seed).normal(size=train.X.shape[1])
        randoms.append(measure(_projection(w / np.linalg.norm(w))))
    diagnostics: dict[str, dict[str, dict[str, Any]]] = {
        "oracle": measure(lambda X: X, probability=lambda s: np.clip(s, 0.0, 1.0), oracle=True),
        "shuffled": mean_over(shuffled),
        "random_direction": mean_over(randoms),
    }
    if panel is not None:
        bow = {
            split: member_scores(panel, "word_tfidf", split)
            for split in ("test", "distshift")
            if split in panel.get("scores", {})
        }
        train_neg = np.array([0.0])  # the panel stores no train scores: the operating point is not measured
        diagnostics["bag_of_words"] = entry_metrics(
            test=(test.ids, test.labels, np.array([bow["test"][i] for i in test.ids])),
            distshift=(distshift.labels, np.array([bow["distshift"][i] for i in distshift.ids]))
            if distshift is not None and "distshift" in bow
            else None,
            train_negatives=train_neg,
            panel=panel,
            probability=sigmoid,
        )
        diagnostics["bag_of_words"].pop("recall_at_1pct_fpr", None)
    table = summarise(reseeds, diagnostics)
    return {
        "subject": {"probe": subject, "task": task.id, "base_model": probe.base_model, "layer": recipe.layer},
        "seeds": seeds,
        "metric_versions": {m.name: m.version for m in metrics() if m.name in METRICS},
        "split_sha256": {
            s: a.split_sha256
            for s, a in (("train", train), ("test", test), ("distshift", distshift))
            if a is not None
        },
        "metrics": table,
        "flagged": [m for m, row in table.items() if row["flagged"]],
        "command": "python -m evaluator reliability --write",
    }


def write_record(root: Path, result: dict[str, Any]) -> Path:
    path = Path(root) / RECORD
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def read_record(root: Path) -> dict[str, Any] | None:
    """The committed reliability table, or None when there is none."""
    try:
        return json.loads((Path(root) / RECORD).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


# --------------------------------------------------------------------------- reliability


def reliability_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seeds", type=int, default=None, help="refits of the reference probe (default 5)")
    p.add_argument(
        "--write",
        action="store_true",
        help="store the table as registry/reliability.json (shown on the methodology page)",
    )
    p.add_argument("--device", default="cpu", help="default cpu")
    cache_registry_json_args(p)


def run_reliability_cli(args: argparse.Namespace) -> dict:
    """Each metric's reseed SD and where the diagnostic entries land (evaluator/commands/reliability.py)."""

    registry = load_registry(args.registry)
    seeds = SEEDS if args.seeds is None else args.seeds
    if not 2 <= seeds <= 50:
        raise EvaluatorError(f"--seeds {seeds}: accepted 2..50 (a standard deviation needs two)")
    result = run_reliability(
        registry, cache_dir=args.cache_dir or default_cache_dir(), seeds=seeds, device=args.device
    )
    if args.write:
        result["written"] = str(write_record(registry.root, result).relative_to(registry.root))
    return result


def reliability_summary(result: object) -> str:
    if not isinstance(result, dict):
        return f"{result}\n"
    s = result["subject"]
    lines = [
        f"metric reliability on {s['probe']} ({s['task']}, {s['base_model']}), {result['seeds']} refits",
        "",
    ]
    for metric, row in result["metrics"].items():
        sd = row["reseed_sd"]
        cells = ", ".join(
            f"{name} {c['value']:.3f}{'' if c.get('ok', True) else ' FAILS ' + c['expected']}"
            for name, c in row["diagnostics"].items()
        )
        flag = "  FLAGGED" if row["flagged"] else ""
        sd_text = "—" if sd is None else f"{sd:.4f}"
        lines.append(f"{metric:<20} reseed SD {sd_text}  {cells}{flag}")
    return "\n".join(lines) + "\n"
