"""A small registry for end-to-end tests: real rows from the committed split files, few of them.

It copies licenses, models and weights specs, and writes, for a few real tasks, split files made
of the first rows of each label of the real splits (deterministic), with their real SHA-256 in a
tasks.yaml of their own. A pipeline run on it is a real run on real data, only shorter.
``seal_pools`` seals small pools for its quarterly holdouts (other real rows) under a test's data
directory, as the board keeps the sealed pools it builds from the source archives.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SIZES = {"train": 48, "test": 32, "distshift": 16, "holdout_pool": 48}


def _subsample(rows: list[dict], n: int) -> list[dict]:
    pos = [r for r in rows if r["label"] == 1][: n // 2]
    neg = [r for r in rows if r["label"] == 0][: n - n // 2]
    return sorted(pos + neg, key=lambda r: r["id"])


def build_mini_registry(
    dest: Path,
    task_ids: tuple[str, ...] = ("cities-truth-v1", "benchmark-vs-user-v1"),
    sizes: dict[str, int] | None = None,
) -> Path:
    sizes = sizes or SIZES
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "registry").mkdir(exist_ok=True)
    for name in ("licenses.yaml", "models.yaml"):
        shutil.copy(ROOT / "registry" / name, dest / "registry" / name)
    shutil.copytree(ROOT / "registry" / "weights", dest / "registry" / "weights", dirs_exist_ok=True)
    data = yaml.safe_load((ROOT / "tasks.yaml").read_text())
    tasks = []
    for entry in data["tasks"]:
        if entry["id"] not in task_ids:
            continue
        entry = dict(entry, card="")
        if entry.get("on_policy"):  # one set of split files per base model
            entry["splits_by_model"] = {
                model: _write_splits(dest, splits, sizes)
                for model, splits in entry["splits_by_model"].items()
            }
            if entry.get("text_panel"):
                entry["text_panel"] = {
                    model: _write_panel(dest, entry["id"], model, entry["splits_by_model"][model])
                    for model in entry["text_panel"]
                }
        else:
            entry["splits"] = _write_splits(dest, entry["splits"], sizes)
            if entry.get("stress"):  # rebuilt from the rows the mini test split kept
                entry["stress"] = _write_stress(dest, entry["id"], entry["splits"])
            if entry.get("text_panel"):
                entry["text_panel"] = _write_panel(dest, entry["id"], None, entry["splits"])
        tasks.append(entry)
    data["tasks"] = tasks
    (dest / "tasks.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return dest


def _write_stress(dest: Path, task_id: str, splits: dict) -> dict:
    from evaluator.data.builders.stress import stress_bytes, stress_relpath

    def rows(name: str) -> list[dict]:
        text = (dest / splits[name]["path"]).read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    payload = stress_bytes(task_id, rows("test"), rows("train"))
    path = dest / stress_relpath(task_id)
    path.write_bytes(payload)
    return {
        "path": stress_relpath(task_id),
        "rows": payload.count(b"\n"),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }


def _write_panel(dest: Path, task_id: str, model: str | None, splits: dict) -> str:
    """The committed text-baseline panel cut to the rows the mini splits kept (its per-member
    summary stays the full file's); returns the new file's SHA-256 for the pin."""
    from evaluator.axes.text_baselines import panel_bytes, panel_relpath

    panel = json.loads((ROOT / panel_relpath(task_id, model)).read_text())
    for split, block in panel["scores"].items():
        kept = {json.loads(line)["id"] for line in (dest / splits[split]["path"]).read_text().splitlines()}
        keep = [i for i, row_id in enumerate(block["ids"]) if row_id in kept]
        panel["scores"][split] = {name: [values[i] for i in keep] for name, values in block.items()}
    payload = panel_bytes(panel)
    path = dest / panel_relpath(task_id, model)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    return hashlib.sha256(payload).hexdigest()


def _write_splits(dest: Path, splits: dict, sizes: dict[str, int]) -> dict:
    """Write the first rows of each label of every split under ``dest``; their new entries."""
    out = {}
    for split, spec in splits.items():
        rows = [json.loads(line) for line in (ROOT / spec["path"]).read_text().splitlines() if line.strip()]
        rows = _subsample(rows, sizes[split])
        path = dest / spec["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode()
        path.write_bytes(payload)
        out[split] = {"path": spec["path"], "rows": len(rows), "sha256": hashlib.sha256(payload).hexdigest()}
    return out


#: rows in each sealed pool the tests seal: ten times the tests' holdouts of 16, and some over
SEALED_POOL_ROWS = 200


def seal_pools(root: Path, data_dir: Path, key_file: Path, rows: int = SEALED_POOL_ROWS) -> dict[str, int]:
    """Seal a pool for every task of the registry at ``root`` that is about its text, where the
    board keeps its sealed pools (``evaluator.data.pools.sealed_pool_path`` under ``data_dir``,
    encrypted with the key at ``key_file``), so that a cycle on it never builds one from the source
    archives. Returns task → rows sealed.

    The rows are real rows of the task's committed splits (this project's) in groups that no split
    of ``root`` holds, so they are disjoint from the small registry's public splits. Where those
    are too few (``root`` is the whole registry), stand-ins fill the pool: public pool rows with a
    marker appended to the text, group and id, which makes them disjoint by normalised text too."""
    from evaluator.data.holdouts import read_rows
    from evaluator.data.pools import pool_bytes, sealed_label, sealed_pool_path
    from evaluator.data.sealing import key_load_or_create, write_sealed
    from evaluator.data.texts import text_hash

    key = key_load_or_create(key_file)
    data = yaml.safe_load((root / "tasks.yaml").read_text())
    real = {t["id"]: t for t in yaml.safe_load((ROOT / "tasks.yaml").read_text())["tasks"]}
    sealed = {}
    for entry in data["tasks"]:
        if entry.get("on_policy") or entry["id"] not in real:
            continue
        public = [r for s in entry["splits"].values() for r in read_rows(root / s["path"])]
        groups = {r["group"] for r in public}
        texts = {text_hash(r["text"]) for r in public}
        by_group: dict[str, list[dict]] = {}
        for name in ("holdout_pool", "test", "train"):
            for r in read_rows(ROOT / real[entry["id"]]["splits"][name]["path"]):
                if r["group"] not in groups and text_hash(r["text"]) not in texts:
                    by_group.setdefault(r["group"], []).append(r)
        pool: list[dict] = []
        for name in sorted(by_group):
            if len(pool) >= rows:
                break
            pool += by_group[name]
        for r in public:
            if len(pool) >= rows:
                break
            pool.append(
                r | {"id": f"{r['id']}~s", "group": f"{r['group']}~s", "text": f"{r['text']} [sealed]"}
            )
        write_sealed(
            sealed_pool_path(data_dir, entry["id"]),
            pool_bytes(pool),
            key=key,
            label=sealed_label(entry["id"]),
        )
        sealed[entry["id"]] = len(pool)
    return sealed
