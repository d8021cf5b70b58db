"""Every reference probe under the measurement protocol's attack: the direct attack on its own task
and the transfer attack from its category's reference on the same model, with what each costs.

    .venv/bin/python bench/attack_survey.py [--cache-dir DIR] [--only SLUG,SLUG] [--max-minutes M] [--out FILE]

For each reference probe of the manifest that the attack applies to (one prompt, a decoder base
model), on its recipe's task: ``python -m evaluator attack`` at the protocol's budget (the clean
recall, the recall under attack, the steps to halve it, seconds), and the transfer attack: the
suffix the same attack made against the transfer source of its category, model and task (the rule
the workers use, ``evaluator.axes.attack.source_order``) applied to it. Sources are attacked first, their
suffixes kept in a temporary directory. Results are appended to ``--out`` (JSON lines) as they come,
so a survey cut short by ``--max-minutes`` keeps what it measured; a markdown table is printed at
the end. Not a test: minutes per probe on 2 cores. Reuses the activation cache of a filled board
(``--cache-dir``) for the clean scores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def eligible(registry, entries):
    """(entry, probe) for every manifest entry the attack applies to."""
    from evaluator.axes.attack import attack_applies
    from evaluator.core.probes import load_probe

    out = []
    for entry in entries:
        probe = load_probe(registry.root / entry.path, registry=registry)
        encoder = registry.model(entry.base_model).encoder
        if attack_applies(input_kind=probe.metadata.input, model_id=entry.base_model, encoder=encoder):
            continue
        out.append((entry, probe))
    return out


def main(argv: list[str] | None = None) -> int:
    from evaluator.axes.attack import attack_probe, source_order
    from evaluator.commands.reference_probes.manifest import load_manifest
    from evaluator.core.models import load_model
    from evaluator.data.registry.load import load_registry

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "var" / "cache")
    parser.add_argument("--only", default="", help="comma-separated slugs (their sources are attacked too)")
    parser.add_argument("--max-minutes", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=None, help="append one JSON line per measurement")
    args = parser.parse_args(argv)

    registry = load_registry(ROOT)
    pool = eligible(registry, load_manifest(registry))
    by_group: dict[tuple, list] = {}
    for entry, probe in pool:
        by_group.setdefault((probe.metadata.category, entry.base_model, entry.task), []).append(
            (entry, probe)
        )
    sources = {
        # the method the artifact records (the board reads the same field of the stored version)
        group: min(
            members, key=lambda m: source_order((m[1].metadata.recipe or {}).get("method", ""), m[0].slug)
        )[0].slug
        for group, members in by_group.items()
    }
    wanted = {s.strip() for s in args.only.split(",") if s.strip()}
    chosen = [(e, p) for e, p in pool if not wanted or e.slug in wanted]
    # sources first: every transfer then finds its suffix made
    chosen.sort(
        key=lambda m: (m[0].slug != sources[(m[1].metadata.category, m[0].base_model, m[0].task)], m[0].slug)
    )
    deadline = time.monotonic() + 60 * args.max_minutes
    suffixes = Path(tempfile.mkdtemp(prefix="probebench-suffixes-"))
    models: dict[str, object] = {}
    rows = []

    def record(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")

    def lm_for(model_id: str):
        if model_id not in models:
            models.clear()  # one model in memory at a time
            models[model_id] = load_model(
                model_id,
                registry=registry,
                cache_dir=args.cache_dir,
                device="cpu",
                protocol=registry.protocol(),
            )
        return models[model_id]

    def direct(entry, probe) -> dict:
        kept = suffixes / f"{entry.slug}-{entry.task}.safetensors"
        if kept.exists():
            return json.loads(kept.with_suffix(".json").read_text())
        started = time.perf_counter()
        out = attack_probe(
            probe,
            task_id=entry.task,
            registry=registry,
            cache_dir=args.cache_dir,
            lm=lm_for(entry.base_model),
            suffix_out=kept,
        )
        row = {
            "probe": entry.slug,
            "task": entry.task,
            "kind": "direct",
            "layer": probe.layer,
            "position": probe.metadata.position,
            "n_positives": out["n_positives"],
            "threshold": out["threshold"],
            "recall_clean": out["recall_clean"],
            "recall_attacked": out["recall_attacked"],
            "steps": out["steps"],
            "steps_to_half": out["steps_to_half"],
            "curve": out["curve"],
            "wall_s": round(time.perf_counter() - started, 1),
        }
        kept.with_suffix(".json").write_text(json.dumps(row))
        record(row)
        return row

    by_slug = {e.slug: (e, p) for e, p in pool}
    for entry, probe in chosen:
        if time.monotonic() > deadline:
            print(f"stopped at --max-minutes {args.max_minutes}", file=sys.stderr)
            break
        own = direct(entry, probe)
        source_slug = sources[(probe.metadata.category, entry.base_model, entry.task)]
        if source_slug == entry.slug:
            continue
        source_entry, source_probe = by_slug[source_slug]
        direct(source_entry, source_probe)
        started = time.perf_counter()
        out = attack_probe(
            probe,
            task_id=entry.task,
            registry=registry,
            cache_dir=args.cache_dir,
            lm=lm_for(entry.base_model),
            suffix_in=suffixes / f"{source_slug}-{entry.task}.safetensors",
        )
        record(
            {
                "probe": entry.slug,
                "task": entry.task,
                "kind": "transfer",
                "source": source_slug,
                "recall_clean": own["recall_clean"],
                "recall_attacked": out["recall_attacked"],
                "wall_s": round(time.perf_counter() - started, 1),
            }
        )

    print(
        "| probe · task | layer, position | test positives | recall clean | attacked (100 steps) | steps to half | transfer: source → recall | wall |"
    )
    print("|---|---|---|---|---|---|---|---|")
    transfers = {(r["probe"], r["task"]): r for r in rows if r["kind"] == "transfer"}
    for r in (r for r in rows if r["kind"] == "direct"):
        t = transfers.get((r["probe"], r["task"]))
        half = "never" if r["steps_to_half"] is None else str(r["steps_to_half"])
        moved = f"{t['source']} → {t['recall_attacked']:.3f}" if t else "(the source)"
        print(
            f"| {r['probe']} · {r['task']} | {r['layer']}, {r['position']} | {r['n_positives']} |"
            f" {r['recall_clean']:.3f} | {r['recall_attacked']:.3f} | {half} | {moved} | {r['wall_s']:.0f} s |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
