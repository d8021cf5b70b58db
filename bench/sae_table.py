"""The SAE-feature probes of a filled board beside their same-k neuron and dense baselines, per task
and split into in-domain (the task they were trained on) and cross-domain (their category's other
tasks), read from the board's ``sae`` runs (no model is run).

    .venv/bin/python bench/demo_fill.py --keep                 # fills a board in a temporary data dir
    .venv/bin/python bench/sae_table.py DATA_DIR               # prints markdown
    .venv/bin/python bench/sae_table.py DATA_DIR --json        # the rows and means as JSON

Each row is one (SAE probe, task): the three test AUROCs on the same rows with their 95% bootstrap
intervals, and the paired differences SAE − neurons and SAE − dense with theirs. Then, per model
and over both, the in-domain and cross-domain means of the differences, each with the interval of
a mean of differences (``evaluator.metrics.compare.mean_delta_ci``), and how many tasks' intervals
clear 0 either way. The database is opened read-only.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluator.metrics.compare import mean_delta_ci  # noqa: E402

DIFFS = ("sae_minus_neurons", "sae_minus_dense")


def sae_rows(data_dir: Path) -> list[dict]:
    """One dict per succeeded ``sae`` run outside any cycle: probe, model, and the run's task record."""
    path = Path(data_dir).resolve() / "probebench.sqlite3"
    if not path.is_file():
        raise FileNotFoundError(f"{path.parent} holds no probebench.sqlite3")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        found = db.execute(
            "SELECT p.slug, p.base_model_id, r.metrics FROM leaderboard_evaluationrun r"
            " JOIN leaderboard_probeversion v ON v.id = r.probe_version_id"
            " JOIN leaderboard_probe p ON p.id = v.probe_id"
            " WHERE r.kind = 'sae' AND r.status = 'succeeded' AND r.cycle_id IS NULL"
            " ORDER BY p.slug, r.id"
        ).fetchall()
    rows = []
    for slug, model, metrics in found:
        measured = json.loads(metrics).get("sae") or {}
        for task in measured.get("tasks") or []:
            rows.append({"probe": slug, "model": model, "k": measured.get("k"), **task})
    return rows


def _side_means(rows: list[dict]) -> dict:
    out: dict = {"tasks": len(rows)}
    for key in DIFFS:
        values = [(r[key], tuple(r[f"{key}_ci"])) for r in rows]
        ci = mean_delta_ci(values) if values else None
        out[key] = sum(v for v, _ in values) / len(values) if values else None
        out[f"{key}_ci"] = None if ci is None else list(ci)
        out[f"{key}_above_0"] = sum(1 for _, c in values if c[0] > 0)
        out[f"{key}_below_0"] = sum(1 for _, c in values if c[1] < 0)
    for name in ("sae_auroc", "neurons_auroc", "dense_auroc"):
        out[name] = sum(r[name] for r in rows) / len(rows) if rows else None
    return out


def summary(rows: list[dict]) -> dict:
    """In-domain and cross-domain means, per base model and over every model."""
    groups = {"all": rows} | {
        m: [r for r in rows if r["model"] == m] for m in sorted({r["model"] for r in rows})
    }
    return {
        name: {
            "in_domain": _side_means([r for r in group if r["in_domain"]]),
            "cross_domain": _side_means([r for r in group if not r["in_domain"]]),
        }
        for name, group in groups.items()
    }


def _ci(pair) -> str:
    return "—" if not pair else f"[{pair[0]:.3f}, {pair[1]:.3f}]"


def _d(value, pair) -> str:
    return (
        "—"
        if value is None
        else f"{value:+.3f} [{pair[0]:+.3f}, {pair[1]:+.3f}]"
        if pair
        else f"{value:+.3f}"
    )


def markdown(rows: list[dict], means: dict) -> str:
    lines = [
        "| SAE probe | task | in-domain | rows | SAE | same-k neurons | dense | SAE − neurons | SAE − dense |",
        "|---|---|:-:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r["model"], r["probe"], not r["in_domain"], r["task_id"])):
        lines.append(
            f"| {r['probe']} | {r['task_id']} | {'yes' if r['in_domain'] else ''} | {r['n']} |"
            f" {r['sae_auroc']:.3f} {_ci(r['sae_ci'])} | {r['neurons_auroc']:.3f} {_ci(r['neurons_ci'])} |"
            f" {r['dense_auroc']:.3f} {_ci(r['dense_ci'])} |"
            f" {_d(r['sae_minus_neurons'], r['sae_minus_neurons_ci'])} | {_d(r['sae_minus_dense'], r['sae_minus_dense_ci'])} |"
        )
    lines += [
        "",
        "| models | side | tasks | mean SAE | mean neurons | mean dense | SAE − neurons (mean, interval) | clear +/− | SAE − dense (mean, interval) | clear +/− |",
        "|---|---|---:|---:|---:|---:|---:|:-:|---:|:-:|",
    ]
    for name, sides in means.items():
        for side, m in sides.items():
            if not m["tasks"]:
                continue
            lines.append(
                f"| {name} | {side.replace('_', '-')} | {m['tasks']} | {m['sae_auroc']:.3f} | {m['neurons_auroc']:.3f} |"
                f" {m['dense_auroc']:.3f} | {_d(m['sae_minus_neurons'], m['sae_minus_neurons_ci'])} |"
                f" {m['sae_minus_neurons_above_0']}/{m['sae_minus_neurons_below_0']} |"
                f" {_d(m['sae_minus_dense'], m['sae_minus_dense_ci'])} |"
                f" {m['sae_minus_dense_above_0']}/{m['sae_minus_dense_below_0']} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path, help="a data directory holding a filled probebench.sqlite3")
    parser.add_argument("--json", action="store_true", help="print the rows and the means as JSON")
    args = parser.parse_args(argv)
    rows = sae_rows(args.data_dir)
    if not rows:
        print(f"{args.data_dir}: no succeeded sae run", file=sys.stderr)
        return 1
    means = summary(rows)
    sys.stdout.write(
        json.dumps({"rows": rows, "means": means}, indent=2) + "\n" if args.json else markdown(rows, means)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
