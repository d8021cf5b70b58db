"""Every reference probe's lift over the strongest text baseline and its controlled AUROC, per task,
from a filled board (no model is run).

    .venv/bin/python bench/demo_fill.py --keep          # fills a board in a temporary data dir
    .venv/bin/python bench/reference_lifts.py DATA_DIR  # copies it, rescores the copy, prints

The data directory is copied first (the original is left as it was), migrated, synced with this
checkout's registry and rescored (``manage.py rescore``: every Score recomputed from its stored
per-row scores against the committed text-baseline panels). Prints a markdown table, one row per
(reference probe, task): test AUROC, the strongest text baseline and its AUROC, the lift with its
95% interval, and the controlled AUROC with its interval; then the per-probe means.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.board_snapshot import board_copy  # noqa: E402


def _ci(pair) -> str:
    return "—" if not pair else f"[{pair[0]:+.3f}, {pair[1]:+.3f}]"


def _n(value) -> str:
    return "—" if value is None else f"{value:+.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path, help="a data directory holding a filled probebench.sqlite3")
    args = parser.parse_args(argv)
    try:
        copy, env = board_copy(args.data_dir, secret="bench-reference-lifts-not-secret")
    except FileNotFoundError as exc:
        parser.error(str(exc))
    for cmd in (["migrate", "--noinput", "-v0"], ["rescore"]):
        subprocess.run(
            [sys.executable, "manage.py", *cmd], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
        )
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "probebench.settings")
    import django

    django.setup()
    from leaderboard.models import Score

    print("| probe | task | AUROC | strongest text baseline | lift [95% CI] | controlled [95% CI] |")
    print("|---|---|---|---|---|---|")
    means = []
    scores = Score.objects.on_board(spec="v0.0.1").filter(probe_version__probe__is_reference=True)
    for score in scores.select_related("probe_version__probe").order_by("probe_version__probe__slug"):
        slug = score.probe_version.probe.slug
        for task_id, r in sorted((score.per_task or {}).items()):
            text = r.get("text_baseline") or {}
            baseline = f"{text.get('name')} {text['auroc']:.3f}" if text.get("auroc") is not None else "—"
            print(
                f"| {slug} | {task_id} | {r.get('auroc', 0):.3f} | {baseline} | {_n(r.get('lift_over_text'))}"
                f" {_ci(r.get('lift_over_text_ci'))} | {_n(r.get('controlled_auroc'))}"
                f" {_ci(r.get('controlled_auroc_ci'))} |"
            )
        m = score.measurements or {}
        means.append(
            (
                slug,
                m.get("lift_over_text"),
                m.get("lift_over_text_ci"),
                m.get("controlled_auroc"),
                m.get("controlled_auroc_ci"),
            )
        )
    print("\n| probe | mean lift [95% CI] | mean controlled AUROC [95% CI] |")
    print("|---|---|---|")
    for slug, lift, lift_ci, ctrl, ctrl_ci in means:
        print(f"| {slug} | {_n(lift)} {_ci(lift_ci)} | {_n(ctrl)} {_ci(ctrl_ci)} |")
    shutil.rmtree(copy, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
