"""One base model's reference probes as a filled board holds them, beside their committed records
(no model is run).

    .venv/bin/python bench/demo_fill.py --keep                      # MODELS: PROBEBENCH_MODELS
    .venv/bin/python bench/model_board.py DATA_DIR --model qwen2.5-coder-0.5b-instruct

A snapshot of the data directory's database is read (the original is left as it was, even while a
demo still writes to it). The manifest's probes on ``--model`` are found on the board by their
artifact's SHA-256. Prints markdown tables:

1. per probe and task: the worker's test AUROC next to the committed reference record's (the same
   artifact evaluated by ``python -m evaluator reference-probes``), their difference against the
   protocol's AUROC tolerance, the distshift AUROC and ``auroc_ea``;
2. per probe: the ProbeScore under the board's default spec and the secondary axes (direction
   utility, stress AUROC, Goodhart resistance, ρ_CE);
3. per probe and readout task: the steer run (readout AUROC, then the strength, fluency, the
   addition against the random directions, the prompting baseline and the generated-text rates,
   or why the task is not judged);
4. the runs of the model's reference submissions by kind and status, and every failed run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.board_snapshot import board_django  # noqa: E402


def _f(value, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def manifest_on(model: str) -> dict[str, str]:
    """{artifact SHA-256: manifest slug} of the reference probes on ``model``."""
    entries = yaml.safe_load((ROOT / "registry" / "reference_probes" / "manifest.yaml").read_text())["probes"]
    out = {}
    for entry in entries:
        if entry["base_model"] == model:
            artifact = ROOT / entry["path"] / "probe.safetensors"
            out[hashlib.sha256(artifact.read_bytes()).hexdigest()] = entry["slug"]
    return out


def steer_row(task_id: str, t: dict) -> str:
    head = f"{task_id} | {_f(t.get('readout_auroc'))}"
    if not t.get("judged"):
        return f"{head} | not judged: {t.get('reason', '')} ||||||||"
    a, b, g = t.get("addition") or {}, t.get("ablation") or {}, t.get("generated")
    generated = (
        "—"
        if not g
        else f"refused {g['positive_rate']:.2f} → {g['positive_rate_ablated']:.2f} ablated"
        f" (random max {max(g['random_ablated']):.2f}); answered-then-refused"
        f" {g['negative_rate']:.2f} → {g['negative_rate_added']:.2f} added (random max {max(g['random_added']):.2f})"
    )
    return (
        f"{head} | {_f(t.get('strength'), 2)} | {_f(t.get('perplexity_ratio'), 2)} | {a.get('effect', 0):+.3f}"
        f" | {_f(a.get('random_mean'))} ± {_f(a.get('random_sd'))} | {_f(a.get('p_value'))}"
        f" | {a.get('utility_z', 0):+.2f} ± {_f(a.get('z_spread'), 2)} | {_f(t.get('prompt_effect'))}"
        f" | {_f(b.get('effect'), 4)} | {generated} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path, help="a data directory holding a filled probebench.sqlite3")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    args = parser.parse_args(argv)
    wanted = manifest_on(args.model)
    if not wanted:
        parser.error(f"the manifest has no reference probe on {args.model}")
    try:
        copy = board_django(args.data_dir, secret="bench-model-board-not-secret")
    except FileNotFoundError as exc:
        parser.error(str(exc))
    from django.db.models import Count

    from evaluator.data.registry.load import load_registry
    from leaderboard.models import EvaluationRun, Score
    from leaderboard.selectors.board.query import weights_spec_list

    spec = weights_spec_list()[-1].version  # the board's default: the newest spec
    tolerance = load_registry(ROOT).protocol().tolerances.auroc
    scores = sorted(
        Score.objects.on_board(spec=spec)
        .filter(probe_version__artifact_sha256__in=list(wanted))
        .select_related("probe_version"),
        key=lambda s: wanted[s.probe_version.artifact_sha256],
    )
    print(f"#### Test AUROC: the worker against the committed record (protocol tolerance {tolerance})\n")
    print("| probe | task | worker | record | difference | distshift | auroc_ea |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for score in scores:
        slug = wanted[score.probe_version.artifact_sha256]
        record = json.loads((ROOT / "registry" / "reference_probes" / slug / "reference.json").read_text())
        recorded = record["evaluation"]["tasks"]
        for task_id, t in sorted((score.per_task or {}).items()):
            ref = (recorded.get(task_id) or {}).get("auroc")
            diff = None if ref is None else abs(t["auroc"] - ref)
            worst = max(worst, diff or 0.0)
            print(
                f"| {slug} | {task_id} | {_f(t['auroc'])} | {_f(ref)} | {_f(diff, 4)} | {_f(t.get('auroc_ds'))}"
                f" | {_f(t.get('auroc_ea'))} |"
            )
    print(
        f"\nlargest difference: {worst:.2e} ({'within' if worst <= tolerance else 'OUTSIDE'} the tolerance)"
    )

    print(f"\n#### Per probe ({spec})\n")
    print("| probe | ProbeScore | direction utility | stress AUROC | Goodhart resistance | ρ_CE |")
    print("|---|---|---|---|---|---|")
    for score in scores:
        m = score.measurements or {}
        print(
            f"| {wanted[score.probe_version.artifact_sha256]} | {_f(score.total)} | {_f(m.get('direction_utility'), 2)}"
            f" | {_f(m.get('stress_auroc'))} | {_f(m.get('goodhart_resistance'))} | {_f(m.get('rho_ce'))} |"
        )

    print("\n#### Direction utility per readout task (the steer runs)\n")
    print(
        "| probe | task | readout AUROC | strength (× norm) | perplexity ratio | addition | random mean ± sd"
        " | p | z ± spread over seeds | prompting | ablation AUROC drop | generated text |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for score in scores:
        for task_id, t in sorted(((score.measurements or {}).get("steer") or {}).items()):
            print(f"| {wanted[score.probe_version.artifact_sha256]} | {steer_row(task_id, t)}")

    runs = EvaluationRun.objects.filter(cycle=None, probe_version__artifact_sha256__in=list(wanted))
    by = {(r["kind"], r["status"]): r["n"] for r in runs.values("kind", "status").annotate(n=Count("id"))}
    print(f"\nruns of these submissions (kind, status): {dict(sorted(by.items()))}")
    for run in runs.filter(status="failed"):
        print(
            f"FAILED {run.kind} {wanted[run.probe_version.artifact_sha256]} {run.task_id}: {run.error[:200]}"
        )
    shutil.rmtree(copy, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
