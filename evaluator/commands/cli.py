"""Command line: ``python -m evaluator <command>``. JSON on stdout, progress and errors on stderr
(a command with a summary, e.g. ``evaluate``, prints a short table instead when stdout is a
terminal and ``--json`` is not given).

``COMMANDS`` lists every command (``evaluator.commands.base.Command``: name, add_arguments, run,
summary); ``run`` returns the JSON-serialisable result or raises an EvaluatorError, which becomes
exit status 2 with its message.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import logging
import math
import sys
from pathlib import Path

from evaluator.axes.attack import attack_probe
from evaluator.axes.attack_graded import attack_graded, graded_budget
from evaluator.axes.steer import steer_probe
from evaluator.axes.stress import stress_probe
from evaluator.commands import build_data, bundle_cli, canary, reliability, sae_cli, train_cli, verify_holdout
from evaluator.commands.base import Command, cache_registry_json_args, default_cache_dir
from evaluator.commands.client import replicate, reproduce, submit
from evaluator.commands.reference_probes import command as reference_probes
from evaluator.data.registry.load import load_registry
from evaluator.data.texts import text_hash
from evaluator.errors import EvaluatorError
from evaluator.metrics.compare import scores_compare
from evaluator.metrics.metrics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, summarize
from evaluator.metrics.scoring import Measurements, probe_score


def wants_summary(args: argparse.Namespace, stream) -> bool:
    """A command with a summary prints it to a terminal unless ``--json`` asks for the JSON."""
    if COMMANDS[args.command].summary is None or getattr(args, "json", False):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


# --------------------------------------------------------------------------- score


def _score_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--components", required=True, type=Path, help="JSON file of measured components")
    p.add_argument("--spec", default=None, help="weights spec version (default: the latest)")
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")


def run_score(args: argparse.Namespace) -> dict:

    try:
        data = json.loads(args.components.read_text())
    except FileNotFoundError:
        raise EvaluatorError(f"{args.components}: file not found") from None
    except json.JSONDecodeError as exc:
        raise EvaluatorError(f"{args.components}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise EvaluatorError(f"{args.components}: expected a JSON object")
    reg = load_registry(args.registry)
    result = probe_score(Measurements.from_dict(data), spec=reg.spec(args.spec), licenses=reg.licenses)
    return result.to_dict()


# --------------------------------------------------------------------------- metrics


def _metrics_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scores", required=True, type=Path, help="CSV with columns score,label[,ref_score][,prob]"
    )


def _read_scores_csv(
    path: Path,
    *,
    required: tuple[str, ...] = ("score", "label"),
    optional: tuple[str, ...] = ("ref_score", "prob"),
) -> dict[str, list[float]]:
    try:
        fh = path.open(newline="")
    except FileNotFoundError:
        raise EvaluatorError(f"{path}: file not found") from None
    with fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in required if c not in header]
        if missing:
            also = f" and optionally {', '.join(optional)}" if optional else ""
            raise EvaluatorError(
                f"{path}: missing column(s) {', '.join(missing)}; expected {','.join(required)}{also}"
            )
        cols: dict[str, list[float]] = {c: [] for c in (*required, *optional) if c in header}
        for line_no, row in enumerate(reader, start=2):
            row = {(k or "").strip(): v for k, v in row.items()}
            for col in cols:
                raw = (row.get(col) or "").strip()
                try:
                    value = float(raw)
                except ValueError:
                    raise EvaluatorError(
                        f"{path}: line {line_no}: column {col} is not a number: {raw!r}"
                    ) from None
                if not math.isfinite(value):
                    raise EvaluatorError(f"{path}: line {line_no}: column {col} is not finite: {raw!r}")
                if col == "label" and value not in (0.0, 1.0):
                    raise EvaluatorError(f"{path}: line {line_no}: label must be 0 or 1, got {raw!r}")
                cols[col].append(value)
    if not cols[required[0]]:
        raise EvaluatorError(f"{path}: no rows")
    return cols


def run_metrics(args: argparse.Namespace) -> dict:

    cols = _read_scores_csv(args.scores)
    labels = [int(v) for v in cols["label"]]
    return summarize(cols["score"], labels, probs=cols.get("prob"), ref_scores=cols.get("ref_score"))


# --------------------------------------------------------------------------- compare


def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scores", required=True, type=Path, help="CSV with columns label,score_a,score_b (same rows)"
    )
    p.add_argument("--resamples", type=int, default=None, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, default=None, help="bootstrap seed (default: the board's)")


def run_compare(args: argparse.Namespace) -> dict:
    """Two probes on the same rows: both AUROCs, ΔAUROC with its paired bootstrap interval and
    DeLong's two-sided p-value (evaluator/metrics/compare.py)."""

    cols = _read_scores_csv(args.scores, required=("label", "score_a", "score_b"), optional=())
    if args.resamples is not None and args.resamples < 1:
        raise EvaluatorError("--resamples must be at least 1")
    return scores_compare(
        cols["score_a"],
        cols["score_b"],
        [int(v) for v in cols["label"]],
        n_resamples=args.resamples or BOOTSTRAP_RESAMPLES,
        seed=BOOTSTRAP_SEED if args.seed is None else args.seed,
    )


# --------------------------------------------------------------------------- text-hashes


def _text_hashes_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files",
        nargs="+",
        type=Path,
        help="JSONL files with a 'text' field per line (or plain text, one text per line, with --lines)",
    )
    p.add_argument("--lines", action="store_true", help="the files hold one text per line")


def run_text_hashes(args: argparse.Namespace) -> dict:
    """The normalised-text hashes to declare external training data with
    (metadata ``training_data.text_sha256``; see evaluator/data/leakage.py)."""

    hashes: set[str] = set()
    n = 0
    for path in args.files:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise EvaluatorError(f"{path}: file not found") from None
        for line_no, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            if args.lines:
                text = line
            else:
                try:
                    text = json.loads(line)["text"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise EvaluatorError(
                        f"{path}: line {line_no} is not a JSON object with a 'text' field"
                        " (use --lines for plain text)"
                    ) from None
            hashes.add(text_hash(str(text)))
            n += 1
    return {"texts": n, "text_sha256": sorted(hashes)}


# --------------------------------------------------------------------------- steer


def _steer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--probe", required=True, type=Path, help="probe directory (probe.json + probe.safetensors)"
    )
    p.add_argument(
        "--tasks", default=None, help="comma-separated task ids (default: the category's active tasks)"
    )
    p.add_argument(
        "--n", type=int, default=None, help="test rows per task (default: the protocol's steering.examples)"
    )
    p.add_argument("--device", default=None, help="cpu | cuda (default: CUDA when available)")
    p.add_argument(
        "--ignore-work-limit",
        action="store_true",
        help="measure a task whose test interventions exceed the protocol's steering.max_intervention_teramacs"
        " (the result then names no protocol: not a board number)",
    )
    cache_registry_json_args(p)


def run_steer(args: argparse.Namespace) -> dict:
    """Direction utility (evaluator/axes/steer.py): addition and ablation of the probe's direction
    against random directions, on each task's behavioural readout."""

    if args.n is not None and args.n < 2:
        raise EvaluatorError("--n must be at least 2 (one row of each class)")
    registry = load_registry(args.registry)
    return steer_probe(
        args.probe,
        registry=registry,
        cache_dir=args.cache_dir or default_cache_dir(),
        tasks=[t for t in args.tasks.split(",") if t] if args.tasks else None,
        n=args.n,
        device=args.device,
        ignore_work_limit=args.ignore_work_limit,
    )


def steer_summary(result: object) -> str:
    if not isinstance(result, dict):
        return f"{result}\n"
    probe = result.get("probe") or {}
    if not result.get("eligible"):
        return f"{probe.get('name')}: not eligible: {result.get('reason')}\n"
    lines = [
        f"{probe.get('name')} on {probe.get('base_model')}, layer {probe.get('layer')}: direction utility",
        "",
    ]
    for task_id, r in (result.get("tasks") or {}).items():
        if r.get("readout") is None:
            lines.append(f"{task_id}  n/a: {r['reason']}")
            continue
        head = f"{task_id}  readout AUROC {r['readout_auroc']:.3f} (n {r['readout']['n']})"
        if not r.get("judged"):
            lines.append(f"{head}  not judged: {r['reason']}")
            continue
        a, b, prompt = r["addition"], r["ablation"], r.get("prompt_baseline")
        lines += [
            f"{head}  strength {r['strength']:g} × norm, perplexity × {r['fluency']['ratio']:.2f}",
            f"  addition {a['effect']:+.3f} vs random {a['random_mean']:+.3f} ± {a['random_sd']:.3f}:"
            f" p {a['p_value']:.3f} over {a['n_random']}, z {a['utility_z']:+.2f} (± {a['z_spread']:.2f} over seeds)",
            f"  ablation AUROC drop {b['effect']:+.4f}: p {b['p_value']:.3f}, z {b['utility_z']:+.2f}",
            f"  prompting baseline: {'none declared' if prompt is None else format(prompt['effect'], '+.3f')}",
        ]
        g = r.get("generated")
        if g:
            lines.append(
                f"  generated ({g['judge']}): {g['positive_rate']:.2f} → {g['positive_rate_ablated']:.2f} ablated"
                f" (random {', '.join(f'{x:.2f}' for x in g['random_ablated'])});"
                f" {g['negative_rate']:.2f} → {g['negative_rate_added']:.2f} added"
                f" (random {', '.join(f'{x:.2f}' for x in g['random_added'])})"
            )
    du = result.get("direction_utility")
    lines.append(f"direction utility: {'n/a' if du is None else format(du, '+.2f')}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- stress


def _stress_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--probe", required=True, type=Path, help="probe directory (probe.json + probe.safetensors)"
    )
    p.add_argument(
        "--tasks",
        default=None,
        help="comma-separated task ids (default: the category's tasks with a stress split)",
    )
    p.add_argument("--scores", action="store_true", help="include every stress row's score")
    p.add_argument("--device", default=None, help="cpu | cuda (default: CUDA when available)")
    cache_registry_json_args(p)


def run_stress(args: argparse.Namespace) -> dict:
    """The probe on its tasks' stress splits (evaluator/axes/stress.py): AUROC, and recall and FPR at the
    threshold fixed at 1% FPR on the clean train negatives, per transform, with the drops."""

    return stress_probe(
        args.probe,
        registry=load_registry(args.registry),
        cache_dir=args.cache_dir or default_cache_dir(),
        tasks=[t for t in args.tasks.split(",") if t] if args.tasks else None,
        device=args.device,
        scores=args.scores,
    )


def stress_summary(result: object) -> str:
    if not isinstance(result, dict):
        return f"{result}\n"
    lines = [f"{result.get('probe')} on {result.get('base_model')}: stress splits", ""]
    for task_id, r in (result.get("tasks") or {}).items():
        c = r["clean"]
        lines.append(
            f"{task_id}  threshold {r['threshold']:.4g} (1% FPR on clean train negatives)"
            f"  clean: AUROC {c['auroc']:.3f}, recall {c['recall']:.3f}, FPR {c['fpr']:.3f}"
        )
        for name, t in r["transforms"].items():
            at_end = (
                f"  | at the content's end: AUROC {t['auroc_content_end']:.3f}, recall {t['recall_content_end']:.3f}"
                if "auroc_content_end" in t
                else ""
            )
            lines.append(
                f"  {name:<13} AUROC {t['auroc']:.3f} ({-t['auroc_drop']:+.3f})"
                f"  recall {t['recall']:.3f} ({-t['recall_drop']:+.3f})  FPR {t['fpr']:.3f}{at_end}"
            )
    for task_id, why in (result.get("not_measured") or {}).items():
        lines.append(f"not measured: {task_id}: {why}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- attack


def _attack_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--probe", required=True, type=Path, help="probe directory (probe.json + probe.safetensors)"
    )
    p.add_argument("--task", required=True, help="a task of the probe's category")
    p.add_argument(
        "--steps", type=int, default=None, help="Adam steps on the suffix (default: the protocol's; 0..5000)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the suffix's start and the batches (default: the protocol's)",
    )
    p.add_argument("--suffix-out", type=Path, default=None, help="write the final suffix (safetensors)")
    p.add_argument(
        "--suffix-in",
        type=Path,
        default=None,
        help="apply this suffix (from --suffix-out, same base model) instead of optimising one: the transfer attack",
    )
    p.add_argument(
        "--graded",
        action="store_true",
        help="the graded attack (vectors inserted inside the content, a grid of radii, one curve per seed):"
        " prints goodhart_resistance, eps50 and the curves; --steps is then per radius, --seed one seed",
    )
    p.add_argument("--device", default="cpu", help="default cpu")
    cache_registry_json_args(p)


def run_attack_graded(args: argparse.Namespace) -> dict:
    """The graded attack (evaluator/axes/attack_graded.py) under the current protocol's budget;
    --steps and --seed change it (the result then names no protocol)."""
    if args.suffix_in is not None or args.suffix_out is not None:
        raise EvaluatorError(
            "--graded inserts vectors inside the content: it takes no --suffix-in or --suffix-out"
        )
    registry = load_registry(args.registry)
    budget, _ = graded_budget(registry)
    if args.steps is not None:
        budget = dataclasses.replace(budget, steps=args.steps)
    if args.seed is not None:
        budget = dataclasses.replace(budget, seeds=(args.seed,))
    return attack_graded(
        args.probe,
        task_id=args.task,
        registry=registry,
        cache_dir=args.cache_dir or default_cache_dir(),
        budget=budget,
        device=args.device,
    )


def run_attack(args: argparse.Namespace) -> dict:
    """A universal soft suffix optimised against the frozen probe (evaluator/axes/attack.py): recall of
    the test positives at the 1%-FPR threshold, clean and attacked, and the steps to halve it."""

    if args.seed is not None and not 0 <= args.seed <= 2**31 - 1:
        raise EvaluatorError(f"--seed {args.seed}: accepted 0..{2**31 - 1}")
    if args.graded:
        return run_attack_graded(args)
    if args.suffix_in is not None and args.steps is not None:
        raise EvaluatorError("--suffix-in applies a stored suffix: it takes no --steps")
    return attack_probe(
        args.probe,
        task_id=args.task,
        registry=load_registry(args.registry),
        cache_dir=args.cache_dir or default_cache_dir(),
        steps=args.steps,
        seed=args.seed,
        device=args.device,
        suffix_out=args.suffix_out,
        suffix_in=args.suffix_in,
    )


def attack_summary(result: object) -> str:
    if not isinstance(result, dict):
        return f"{result}\n"
    if "seeds" in result:
        return graded_summary(result)
    half = result["steps_to_half"]
    lines = [
        f"{result['probe']} on {result['task']}: threshold {result['threshold']:.4g} (1% FPR on clean train negatives)",
        f"recall of {result['n_positives']} test positives: clean {result['recall_clean']:.3f},"
        f" attacked {result['recall_attacked']:.3f} "
        + (
            f"under the suffix made against {result['transfer_from'].get('probe') or '?'} (transfer);"
            if result.get("transfer_from")
            else f"best at step {result['best_step']} ({result['steps_run']} of {result['steps']} steps run);"
        )
        + f" halved {'at step ' + str(half) if half is not None else 'never within the budget'}",
        "curve: " + ", ".join(f"{c['step']}: {c['recall']:.3f}" for c in result["curve"]),
    ]
    return "\n".join(lines) + "\n"


def graded_summary(result: dict) -> str:
    head = (
        f"{result['probe']} on {result['task']}: threshold {result['threshold']:.4g} (1% FPR on clean train"
        f" negatives); {result['protocol'] or 'a changed budget, no protocol'}"
    )
    if result.get("not_attacked"):
        return f"{head}\nnot attacked: {result['not_attacked']}\n"
    lo, hi = result["goodhart_resistance_range"]
    lines = [
        head,
        f"recall of {result['n_positives']} test positives (of the attacked subset): clean"
        f" {result['caught_clean'] / result['n_positives']:.3f}, with the unoptimised vectors inserted "
        + ", ".join(f"{r:.3f}" for r in result["recall_inserted"]),
        f"goodhart resistance (area under the relative recall over log ε) {result['goodhart_resistance']:.3f}"
        f" [{lo:.3f}, {hi:.3f}] over {len(result['seeds'])} seed(s)",
    ]
    for s in result["seeds"]:
        eps50 = f"{s['eps50']:.3g}" if s["eps50"] is not None else f"> {s['curve'][-1]['eps']:g}"
        curve = ", ".join(f"{c['eps']:g}: {c['relative']:.2f}" for c in s["curve"])
        lines.append(f"seed {s['seed']}: area {s['area']:.3f}, ε50 {eps50}; relative recall {curve}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- entry point


#: every command, in the order ``--help`` lists them
COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (
        Command("score", _score_args, run_score),
        Command("metrics", _metrics_args, run_metrics),
        Command("compare", _compare_args, run_compare),
        Command("text-hashes", _text_hashes_args, run_text_hashes),
        Command("steer", _steer_args, run_steer, steer_summary),
        Command("stress", _stress_args, run_stress, stress_summary),
        Command("attack", _attack_args, run_attack, attack_summary),
        Command("train", train_cli.train_args, train_cli.run_train),
        Command("evaluate", train_cli.evaluate_args, train_cli.run_evaluate, train_cli.evaluate_summary),
        Command("build-data", build_data.build_args, build_data.run_build_data),
        Command(
            "data-baselines",
            build_data.baseline_args,
            build_data.run_data_baselines,
            build_data.data_baselines_summary,
        ),
        Command("data-stress", build_data.data_stress_args, build_data.run_data_stress),
        Command(
            "reference-probes", reference_probes.reference_probes_args, reference_probes.run_reference_probes
        ),
        Command(
            "reliability",
            reliability.reliability_args,
            reliability.run_reliability_cli,
            reliability.reliability_summary,
        ),
        Command("canary", canary.canary_args, canary.run_canary, canary.canary_summary),
        Command("submit", submit.submit_args, submit.run_submit),
        Command("follow", submit.follow_args, submit.run_follow),
        Command("reproduce", reproduce.reproduce_args, reproduce.run_reproduce, reproduce.reproduce_summary),
        Command("replicate", replicate.replicate_args, replicate.run_replicate, replicate.replicate_summary),
        Command(
            "verify-bundle",
            bundle_cli.verify_bundle_args,
            bundle_cli.run_verify_bundle,
            bundle_cli.verify_bundle_summary,
        ),
        Command(
            "verify-holdout",
            verify_holdout.verify_holdout_args,
            verify_holdout.run_verify_holdout,
            verify_holdout.verify_holdout_summary,
        ),
        Command("train-sae", sae_cli.train_sae_args, sae_cli.run_train_sae, sae_cli.train_sae_summary),
        Command("sae-card", sae_cli.sae_card_args, sae_cli.run_sae_card, sae_cli.sae_card_summary),
        Command(
            "sae-features", sae_cli.sae_features_args, sae_cli.run_sae_features, sae_cli.sae_features_summary
        ),
    )
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluator", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        command.add_arguments(sub.add_parser(name))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    command = COMMANDS[args.command]
    try:
        result = command.run(args)
    except EvaluatorError as exc:
        return _fail(str(exc))
    if wants_summary(args, sys.stdout):
        assert command.summary is not None  # wants_summary checked
        sys.stdout.write(command.summary(result))
    else:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return int(getattr(result, "exit_code", 0))  # e.g. reproduce: 1 when board and local disagree
