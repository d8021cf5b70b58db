"""Every reference probe's AUROC, lift over the strongest text baseline and controlled AUROC, per
task and split into in-domain (the task it was trained on) and cross-domain (its category's other
tasks), from a filled board (no model is run).

    .venv/bin/python bench/demo_fill.py --keep                  # fills a board in a temporary data dir
    .venv/bin/python bench/reference_lifts.py DATA_DIR          # copies it, rescores the copy, prints
    .venv/bin/python bench/reference_lifts.py DATA_DIR --write registry/reference_probes/results.json
    .venv/bin/python bench/reference_lifts.py DATA_DIR --write registry/reference_probes/results.json --merge

The data directory is copied first (the original is left as it was), migrated, synced with this
checkout's registry and rescored (``manage.py rescore``: every Score recomputed from its stored
per-row scores against the committed text-baseline panels). Prints markdown: one row per (reference
probe, task) with whether the task is in-domain, test AUROC, the strongest text baseline, the lift
with its 95% interval and the controlled AUROC with its interval; the per-probe in-domain and
cross-domain means; the counts a reader should not have to add up (how many probes beat the text
bar on their own task and elsewhere, the in-domain/cross-domain gap, the saturated share). With
``--write`` the per-task records are also written as JSON (the committed reference results); with
``--merge`` too, the file's records of probes this board does not hold are kept (a board filled with
``bench/demo_fill.py --only`` for the probes just added).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.board_snapshot import board_copy  # noqa: E402

#: a board row or a task whose test AUROC is at least this is at the ceiling (docs/METHODOLOGY.md)
SATURATED = 0.99


def _ci(pair) -> str:
    return "—" if not pair else f"[{pair[0]:+.3f}, {pair[1]:+.3f}]"


def _n(value) -> str:
    return "—" if value is None else f"{value:+.3f}"


def _clear_of_zero(ci) -> bool:
    return bool(ci) and ci[0] > 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path, help="a data directory holding a filled probebench.sqlite3")
    parser.add_argument("--write", type=Path, help="also write the per-task records as JSON here")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="with --write: keep the file's records of the probes this board does not hold",
    )
    args = parser.parse_args(argv)
    try:
        copy, env = board_copy(args.data_dir, secret="bench-reference-lifts-not-secret")
    except FileNotFoundError as exc:
        parser.error(str(exc))
    for cmd in (["migrate", "--noinput", "-v0"], ["sync_registry"], ["rescore"]):
        subprocess.run(
            [sys.executable, "manage.py", *cmd], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
        )
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "probebench.settings")
    import django

    django.setup()
    from evaluator.metrics.in_domain import split_keys
    from leaderboard.models import Score
    from leaderboard.policy import saturated

    records: list[dict] = []
    scores = Score.objects.on_board(spec="v0.0.1").filter(probe_version__probe__is_reference=True)
    for score in scores.select_related("probe_version__probe").order_by("probe_version__probe__slug"):
        version = score.probe_version
        m = score.measurements or {}
        intervals = m.get("intervals") or {}
        entry = {
            "probe": version.probe.slug,
            "artifact_sha256": version.artifact_sha256,
            "base_model": version.probe.base_model_id,
            "category": version.probe.category_id,
            "mean_auroc": m.get("auroc"),
            "tasks": {},
            "in_domain": {k: m.get(k, intervals.get(k)) for k in split_keys()},
        }
        for task_id, r in sorted((score.per_task or {}).items()):
            text = r.get("text_baseline") or {}
            entry["tasks"][task_id] = {
                "in_domain": r.get("in_domain"),  # written by the rescore above (evaluator.metrics.in_domain)
                "auroc": r.get("auroc"),
                "text_baseline": text.get("name"),
                "text_baseline_auroc": text.get("auroc"),
                "lift_over_text": r.get("lift_over_text"),
                "lift_over_text_ci": r.get("lift_over_text_ci"),
                "controlled_auroc": r.get("controlled_auroc"),
                "controlled_auroc_ci": r.get("controlled_auroc_ci"),
            }
        records.append(entry)
    shutil.rmtree(copy, ignore_errors=True)

    print(
        "| probe | task | in-domain | AUROC | strongest text baseline | lift [95% CI] | controlled [95% CI] |"
    )
    print("|---|---|---|---|---|---|---|")
    for e in records:
        for task_id, t in e["tasks"].items():
            flag = {True: "in", False: "cross", None: "?"}[t["in_domain"]]
            base = (
                f"{t['text_baseline']} {t['text_baseline_auroc']:.3f}"
                if t["text_baseline_auroc"] is not None
                else "—"
            )
            print(
                f"| {e['probe']} | {task_id} | {flag} | {t['auroc']:.3f} | {base} | {_n(t['lift_over_text'])}"
                f" {_ci(t['lift_over_text_ci'])} | {_n(t['controlled_auroc'])} {_ci(t['controlled_auroc_ci'])} |"
            )

    def side(flag: bool) -> list[tuple[str, dict]]:
        return [(e["probe"], t) for e in records for t in e["tasks"].values() if t["in_domain"] is flag]

    print("\n| | in-domain | cross-domain |\n|---|---|---|")
    for label, key in (("probe-task pairs", None), ("mean test AUROC", "auroc")):
        cells = []
        for flag in (True, False):
            rows = side(flag)
            cells.append(
                str(len(rows)) if key is None else f"{mean(t[key] for _, t in rows):.3f}" if rows else "—"
            )
        print(f"| {label} | {cells[0]} | {cells[1]} |")
    for label, test in (
        ("lift over text > 0", lambda t: (t["lift_over_text"] or 0) > 0),
        ("lift over text > 0, interval clear of 0", lambda t: _clear_of_zero(t["lift_over_text_ci"])),
        ("controlled AUROC interval clear of 0", lambda t: _clear_of_zero(t["controlled_auroc_ci"])),
        ("AUROC below 0.5", lambda t: (t["auroc"] or 0) < 0.5),
    ):
        cells = []
        for flag in (True, False):
            rows = [t for _, t in side(flag)]
            if "AUROC below" not in label:
                rows = [t for t in rows if t["lift_over_text"] is not None]
            cells.append(f"{sum(1 for t in rows if test(t))} of {len(rows)}")
        print(f"| {label} | {cells[0]} | {cells[1]} |")

    boards = [e for e in records if e["mean_auroc"] is not None]
    saturated_rows = [e for e in boards if e["mean_auroc"] >= SATURATED]
    by_task: dict[str, list[float]] = {}
    for e in records:
        for task_id, t in e["tasks"].items():
            by_task.setdefault(task_id, []).append(t["auroc"])
    saturated_tasks = sorted(
        t for t, v in by_task.items() if saturated(sum(a >= SATURATED for a in v), len(v))
    )
    print(
        f"\nSaturation: {len(saturated_rows)} of {len(boards)} reference rows have mean test AUROC ≥ {SATURATED}"
        f" ({len(saturated_rows) / max(len(boards), 1):.0%}); tasks where most reference probes score ≥ {SATURATED}:"
        f" {', '.join(saturated_tasks) or 'none'} ({len(saturated_tasks)} of {len(by_task)})."
    )

    print(
        "\n| probe | AUROC in / cross | lift in [95% CI] | lift cross [95% CI] | controlled in | controlled cross |"
    )
    print("|---|---|---|---|---|---|")
    for e in records:
        d = e["in_domain"]

        def mean_of(flag: bool, key: str, tasks=e["tasks"]) -> float | None:
            vals = [t[key] for t in tasks.values() if t["in_domain"] is flag and t[key] is not None]
            return mean(vals) if vals else None

        a_in, a_cross = mean_of(True, "auroc"), mean_of(False, "auroc")
        print(
            f"| {e['probe']} | {'—' if a_in is None else f'{a_in:.3f}'} / {'—' if a_cross is None else f'{a_cross:.3f}'}"
            f" | {_n(d.get('lift_over_text_in_domain'))} {_ci(d.get('lift_over_text_in_domain_ci'))}"
            f" | {_n(d.get('lift_over_text_cross_domain'))} {_ci(d.get('lift_over_text_cross_domain_ci'))}"
            f" | {_n(d.get('controlled_auroc_in_domain'))} | {_n(d.get('controlled_auroc_cross_domain'))} |"
        )
    if args.write:
        written = records
        if args.merge and args.write.is_file():
            here = {e["artifact_sha256"] for e in records}
            kept = [
                e for e in json.loads(args.write.read_text())["probes"] if e["artifact_sha256"] not in here
            ]
            written = sorted(kept + records, key=lambda e: e["probe"])
        args.write.write_text(json.dumps({"format": 1, "probes": written}, indent=1, sort_keys=True) + "\n")
        print(f"\nwrote {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
