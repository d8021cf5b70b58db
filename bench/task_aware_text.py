"""An independent check of the text-baseline panel on the tasks whose rows have structure: a
task-aware text model, written apart from evaluator/axes/text_panel.py, against the committed
panel's strongest member.

    .venv/bin/python bench/task_aware_text.py [--cache-dir DIR] [--task T ...]

For each file of a task with structure (cities-truth-v1, city-pairs-reasoning-v1 and the on-policy
city and addition tasks) it reads the rows itself (its own regular expressions, not the ones in
tasks.yaml), embeds the entities they name with the registry's sentence encoder, and fits three
families on train only:

- an MLP over the entity embeddings, their pairwise cosines and whether two entities are the same
  string (64 hidden units, alpha by CV);
- k nearest neighbours (cosine) over the concatenated entity embeddings (k by CV);
- scikit-learn's classic GradientBoostingClassifier over its own table: the pairwise cosines and
  string equalities, the parsed categorical values (one-hot) and, for addition, the operands and
  their digits (depth, trees by CV).

The model with the highest cross-validated AUROC on train (5 folds, stratified, rows of a group in
one fold, its own seed) is the task-aware model; its test AUROC is printed beside the committed
panel's strongest member on test (registry/baselines/, read through its pinned hash). Test rows
choose nothing. Done when every file's panel is at least the task-aware model's AUROC less 0.01.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluator.axes.text_baselines import load_panel, strongest  # noqa: E402
from evaluator.axes.text_panel import encoder_embed  # noqa: E402
from evaluator.data.registry.load import load_registry  # noqa: E402
from evaluator.data.registry.tasks import panel_relpath  # noqa: E402
from evaluator.metrics.metrics import auroc  # noqa: E402

SEED = 7
FOLDS = 5
TOLERANCE = 0.01
TASKS = (
    "cities-truth-v1",
    "city-pairs-reasoning-v1",
    "onpolicy-city-country-v1",
    "onpolicy-incentive-deception-v1",
    "onpolicy-suggestion-sycophancy-v1",
    "onpolicy-addition-v1",
)


# --------------------------------------------------------------------------- parsing (own code)


def _cities_truth(text: str, meta: dict) -> dict:
    m = re.search(r"The city of (.+?) is in (.+?)\.\s*$", text) or re.search(
        r"Which country is (.+?) in\?\nA: (.+?)\s*$", text
    )
    if not m:
        raise ValueError(f"unparsed row: {text!r}")
    return {"entities": [m.group(1), m.group(2)], "cats": {"stated": m.group(2)}, "nums": {}}


_PLACE = re.compile(r"([^.\n]+?) (?:is located|lies|is) in ([^.,\n]+?)(?=[.,\n]| and that)")
_CONCL = re.compile(
    r"(?:Therefore,|It follows that|Conclusion:|So) (.+?) and (.+?) are in (the same country|different countries)"
)


def _city_pairs(text: str, meta: dict) -> dict:
    concl = _CONCL.search(text)
    if not concl:
        raise ValueError(f"unparsed row: {text!r}")
    where = {}
    for city, country in _PLACE.findall(text):
        city = re.sub(r"^(?:We know that|and that|Premise \d:)\s*", "", city.strip())
        where[city.strip()] = country.strip()
    a, b = concl.group(1), concl.group(2)
    ca, cb = where.get(a, ""), where.get(b, "")
    return {
        "entities": [a, ca, b, cb],
        "cats": {"conclusion": concl.group(3)},
        "nums": {},
    }


def _city_country(text: str, meta: dict) -> dict:
    return {"entities": [meta["city"], meta["country"]], "cats": {"country": meta["country"]}, "nums": {}}


def _pressured(text: str, meta: dict) -> dict:
    m = (
        re.search(r"believes? that .+? is in (.+?)\.\n", text)
        or re.search(r"I think it is (.+?)\.(?:\n|$)", text)
        or re.search(r"(?:told me|said) that .+? is in (.+?)\.\n", text)
    )
    if not m:
        raise ValueError(f"unparsed row: {text!r}")
    claimed = m.group(1)
    return {
        "entities": [meta["city"], claimed, meta["country"]],
        "cats": {"claimed": claimed, "country": meta["country"]},
        "nums": {},
    }


def _addition(text: str, meta: dict) -> dict:
    m = re.search(r"(\d+) \+ (\d+)", text)
    if not m:
        raise ValueError(f"unparsed row: {text!r}")
    a, b = int(m.group(1)), int(m.group(2))
    return {
        "entities": [],
        "cats": {},
        "nums": {"a": a, "b": b, "a1": a % 10, "b1": b % 10, "a10": a // 10, "b10": b // 10},
    }


PARSERS = {
    "cities-truth-v1": _cities_truth,
    "city-pairs-reasoning-v1": _city_pairs,
    "onpolicy-city-country-v1": _city_country,
    "onpolicy-incentive-deception-v1": _pressured,
    "onpolicy-suggestion-sycophancy-v1": _pressured,
    "onpolicy-addition-v1": _addition,
}


def _read(root: Path, spec) -> list[dict]:
    return [json.loads(line) for line in (root / spec.path).read_text().splitlines() if line.strip()]


# --------------------------------------------------------------------------- features


class Table:
    """Per-row parsed entities, categorical and numeric values, turned into matrices."""

    def __init__(self, parsed: list[dict], embed):
        self.parsed = parsed
        k = len(parsed[0]["entities"])
        self.k = k
        if k:
            strings = sorted({e for p in parsed for e in p["entities"] if e})
            vec = np.asarray(embed(strings), dtype=np.float64)
            vec /= np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
            index = {s: i for i, s in enumerate(strings)}
            d = vec.shape[1]
            self.emb = np.stack(
                [np.stack([vec[index[e]] if e else np.zeros(d) for e in p["entities"]]) for p in parsed]
            )
        else:
            self.emb = np.zeros((len(parsed), 0, 0))

    def pair_cols(self) -> np.ndarray:
        cols = []
        for i in range(self.k):
            for j in range(i + 1, self.k):
                cols.append(np.einsum("nd,nd->n", self.emb[:, i], self.emb[:, j]))
                same = [float(p["entities"][i] == p["entities"][j]) for p in self.parsed]
                cols.append(np.array(same))
        return np.column_stack(cols) if cols else np.zeros((len(self.parsed), 0))

    def concat(self) -> np.ndarray:
        return self.emb.reshape(len(self.parsed), -1)

    def nums(self) -> np.ndarray:
        keys = sorted(self.parsed[0]["nums"])
        return np.array([[p["nums"][k] for k in keys] for p in self.parsed], dtype=np.float64).reshape(
            len(self.parsed), len(keys)
        )

    def cats(self) -> list[dict]:
        return [p["cats"] for p in self.parsed]


def _onehot(train: list[dict], other: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    keys = sorted({(k, v) for row in train for k, v in row.items()})
    at = {kv: i for i, kv in enumerate(keys)}

    def enc(rows):
        out = np.zeros((len(rows), len(keys)))
        for n, row in enumerate(rows):
            for kv in row.items():
                if kv in at:
                    out[n, at[kv]] = 1.0
        return out

    return enc(train), enc(other)


def candidates(train: Table, other: Table):
    """(name, params, X_train, X_other, make_model) for every grid point of the three families."""
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    out = []
    if train.k:
        x_mlp = np.hstack([train.concat(), train.pair_cols()])
        o_mlp = np.hstack([other.concat(), other.pair_cols()])
        for width in (64,):
            for alpha in (0.1, 1.0, 10.0):
                out.append(
                    (
                        "mlp",
                        {"width": width, "alpha": alpha},
                        x_mlp,
                        o_mlp,
                        lambda w=width, a=alpha: make_pipeline(
                            StandardScaler(),
                            MLPClassifier((w,), alpha=a, max_iter=300, random_state=SEED),
                        ),
                    )
                )
        for k in (5, 15, 45):
            out.append(
                (
                    "knn",
                    {"k": k},
                    train.concat(),
                    other.concat(),
                    lambda k=k: KNeighborsClassifier(k, metric="cosine", weights="distance"),
                )
            )
    c_tr, c_ot = _onehot(train.cats(), other.cats())
    x_gb = np.hstack([train.pair_cols(), c_tr, train.nums()])
    o_gb = np.hstack([other.pair_cols(), c_ot, other.nums()])
    for depth in (2, 4):
        for trees in (100, 300):
            out.append(
                (
                    "gbm",
                    {"depth": depth, "trees": trees},
                    x_gb,
                    o_gb,
                    lambda d=depth, t=trees: GradientBoostingClassifier(
                        n_estimators=t, max_depth=d, learning_rate=0.1, subsample=0.8, random_state=SEED
                    ),
                )
            )
    return out


def _score(model, x) -> np.ndarray:
    return model.predict_proba(x)[:, 1]


def evaluate(
    root: Path, registry, task_id: str, model_id: str | None, embed, *, unpinned: bool = False
) -> dict:
    from sklearn.model_selection import StratifiedGroupKFold

    task = registry.task(task_id)
    specs = task.splits_for(model_id)
    parse = PARSERS[task_id]
    rows = {s: _read(root, specs[s]) for s in ("train", "test")}
    single = task.templates["single"]
    parsed = {
        s: [parse(single.replace("{text}", r["text"]), r.get("meta") or {}) for r in rs]
        for s, rs in rows.items()
    }
    y = np.array([r["label"] for r in rows["train"]])
    y_test = np.array([r["label"] for r in rows["test"]])
    groups = [r["group"] for r in rows["train"]]
    tr, te = Table(parsed["train"], embed), Table(parsed["test"], embed)
    folds = list(
        StratifiedGroupKFold(FOLDS, shuffle=True, random_state=SEED).split(np.zeros(len(y)), y, groups)
    )
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, params, x, xo, make in candidates(tr, te):
            cv = float(np.mean([auroc(_score(make().fit(x[a], y[a]), x[b]), y[b]) for a, b in folds]))
            test = auroc(_score(make().fit(x, y), xo), y_test)
            results.append({"model": name, "params": params, "cv": cv, "test": test})
    pick = max(results, key=lambda r: r["cv"])
    if unpinned:  # the file on disk as it is (while iterating, before the pins are updated)
        path = root / panel_relpath(task_id, model_id if task.on_policy else None)
        panel = json.loads(path.read_text()) if path.is_file() else None
    else:
        panel = load_panel(root, task, model_id)
    best = strongest(panel, "test") if panel else None
    panel_auroc = panel["members"][best]["splits"]["test"]["auroc"] if best else float("nan")
    return {"pick": pick, "best_on_test": max(r["test"] for r in results), "panel": (best, panel_auroc)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache-dir", type=Path, default=ROOT / "var" / "cache")
    p.add_argument("--task", action="append", default=None)
    p.add_argument(
        "--unpinned", action="store_true", help="read the panel files on disk without checking their pins"
    )
    args = p.parse_args(argv)
    registry = load_registry(ROOT)
    embed = encoder_embed(registry, cache_dir=args.cache_dir)
    print(
        "| file | task-aware model (CV pick) | its CV AUROC | its test AUROC | best of its grid on test |"
        " panel strongest | panel test AUROC | met (panel ≥ model − 0.01) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    ok = True
    for task_id in args.task or TASKS:
        task = registry.task(task_id)
        for model_id in list(task.splits_by_model) if task.on_policy else [None]:
            t0 = time.time()
            r = evaluate(ROOT, registry, task_id, model_id, embed, unpinned=args.unpinned)
            pick, (name, value) = r["pick"], r["panel"]
            met = value >= pick["test"] - TOLERANCE
            ok &= met
            params = ", ".join(f"{k}={v}" for k, v in pick["params"].items())
            label = task_id + (f" · {model_id}" if model_id else "")
            print(
                f"| {label} | {pick['model']} ({params}) | {pick['cv']:.3f} | {pick['test']:.3f} |"
                f" {r['best_on_test']:.3f} | {name} | {value:.3f} | {'yes' if met else 'NO'} |"
                f" <!-- {time.time() - t0:.0f}s -->",
                flush=True,
            )
    print("\nall met" if ok else "\nNOT all met")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
