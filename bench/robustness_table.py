"""Every reference probe's stress and attack numbers, per task, as the board holds them (no model
is run).

    .venv/bin/python bench/demo_fill.py --keep               # fills a board in a temporary data dir
    .venv/bin/python bench/robustness_table.py DATA_DIR      # reads a snapshot of it, prints

A snapshot of the data directory's database is read (the original is left as it was, even while a
demo still writes to it). Prints markdown tables: per (reference probe, task) the stress axis (the
clean AUROC and recall on the rewritten rows, the worst transform with its AUROC and recall, the
hard negatives' false-positive rate) and the robustness axis (recall clean and under the attack,
the steps run and to half, the transfer attack's source and recall); then per probe the board's
means (``stress_auroc``, ``goodhart_resistance``, ``transfer_attack_recall``), the runs that
failed, and the counts behind the summary sentences of RESULTS.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.board_snapshot import board_django  # noqa: E402

SPEC = "v0.0.2"


def _f(value, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def stress_rows(measurements: dict) -> list[str]:
    out = []
    for task_id, t in sorted((measurements.get("stress") or {}).items()):
        transforms = t["transforms"]
        worst = min(transforms, key=lambda name: transforms[name]["auroc"])
        hard = transforms.get("concept_words")
        out.append(
            f"| {task_id} | {_f(t['clean']['auroc'])} | {_f(t['clean']['recall'])} | {worst}"
            f" {_f(transforms[worst]['auroc'])} | {_f(t['worst']['recall'])}"
            f" | {_f(hard['fpr']) if hard else '—'} |"
        )
    return out


def robustness_rows(measurements: dict) -> list[str]:
    out = []
    for task_id, t in sorted((measurements.get("robustness") or {}).items()):
        transfer = t.get("transfer") or {}
        if not transfer:
            moved = "n/a"
        elif transfer.get("self"):
            moved = "(the source)"
        else:
            moved = f"{transfer.get('source')} → {_f(transfer.get('recall_attacked'))}"
        half = t.get("steps_to_half")
        out.append(
            f"| {task_id} | {_f(t['recall_clean'])} | {_f(t['recall_attacked'])}"
            f" | {t.get('steps_run', '—')} of {t.get('steps')} | {'never' if half is None else half}"
            f" | {_f(t.get('goodhart_resistance'))} | {moved} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path, help="a data directory holding a filled probebench.sqlite3")
    args = parser.parse_args(argv)
    try:
        copy = board_django(args.data_dir, secret="bench-robustness-table-not-secret")
    except FileNotFoundError as exc:
        parser.error(str(exc))
    from django.db.models import Count

    from leaderboard.models import EvaluationRun, Score

    scores = list(
        Score.objects.on_board(spec=SPEC)
        .filter(probe_version__probe__is_reference=True)
        .select_related("probe_version__probe")
        .order_by("probe_version__probe__slug")
    )
    print("#### Stress (per task: the 64 rewritten test rows, clean and under the worst transform)\n")
    print(
        "| probe | task | clean AUROC | clean recall | worst transform, AUROC | worst recall | hard-negative FPR |"
    )
    print("|---|---|---|---|---|---|---|")
    for score in scores:
        for row in stress_rows(score.measurements or {}):
            print(f"| {score.probe_version.probe.slug} {row}")
    print("\n#### Attack (per task: the protocol's soft suffix, and the transfer attack)\n")
    print(
        "| probe | task | recall clean | recall attacked | steps run | steps to half | resistance | transfer: source → recall |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for score in scores:
        for row in robustness_rows(score.measurements or {}):
            print(f"| {score.probe_version.probe.slug} {row}")
    print("\n#### Per probe (the board's means over its tasks)\n")
    print(
        "| probe | stress AUROC | stress recall | Goodhart resistance | attack recall | transfer attack recall |"
    )
    print("|---|---|---|---|---|---|")
    counts = {"probes": 0, "stress_measured": 0, "attack_measured": 0, "resistance_zero": 0}
    for score in scores:
        m = score.measurements or {}
        counts["probes"] += 1
        counts["stress_measured"] += m.get("stress_auroc") is not None
        counts["attack_measured"] += m.get("goodhart_resistance") is not None
        counts["resistance_zero"] += m.get("goodhart_resistance") == 0.0
        print(
            f"| {score.probe_version.probe.slug} | {_f(m.get('stress_auroc'))} | {_f(m.get('stress_recall'))}"
            f" | {_f(m.get('goodhart_resistance'))} | {_f(m.get('attack_recall'))}"
            f" | {_f(m.get('transfer_attack_recall'))} |"
        )
    runs = EvaluationRun.objects.filter(cycle=None, kind__in=["stress", "robustness"])
    by_status = {
        (r["kind"], r["status"]): r["n"] for r in runs.values("kind", "status").annotate(n=Count("id"))
    }
    print(f"\nruns (kind, status): {dict(sorted(by_status.items()))}")
    print(f"counts: {counts}")
    for run in runs.filter(status="failed").select_related("probe_version__probe"):
        print(f"FAILED {run.kind} {run.probe_version.probe.slug} {run.task_id}: {run.error[:200]}")
    shutil.rmtree(copy, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
