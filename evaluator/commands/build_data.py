"""``python -m evaluator build-data`` and ``python -m evaluator data-baselines`` (the text panel).

build-data runs the task builders, writes ``registry/splits/<task>/<split>.jsonl`` and writes the
tasks' entries (metadata, row counts, SHA-256) into the ``tasks:`` list of tasks.yaml; other
entries and the categories block are kept. ``--check`` rebuilds into a temporary directory and
fails (exit 2) unless every rebuilt file is byte-identical to the committed one and to the hash
pinned in tasks.yaml.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import tempfile
from pathlib import Path
from typing import Any

import yaml

from evaluator.axes.text_baselines import write_panels
from evaluator.axes.text_panel import ENCODER_ID, encoder_embed, panel_table, task_panel
from evaluator.commands.base import default_cache_dir
from evaluator.core.generate import BATCH_SIZE, generations_read, generations_relpath, generations_write
from evaluator.data.builders import TASK_IDS, builder
from evaluator.data.builders.common import BuildContext, read_split, rewrite_tasks, write_task
from evaluator.data.builders.onpolicy_tasks import generation_keys, generation_settings, relabel
from evaluator.data.builders.sources import DEFAULT_SOURCES_DIR, fetch
from evaluator.data.builders.stress import build_stress, build_stress_stats
from evaluator.data.registry.files import default_root, sha256_file
from evaluator.data.registry.load import load_registry
from evaluator.data.registry.tasks_yaml import load_tasks
from evaluator.errors import EvaluatorError

log = logging.getLogger(__name__)


class _Generations:
    """The greedy outputs on-policy builders label rows with: the committed ones
    (``registry/generations/<task>/<model>.jsonl`` under ``root``); missing ones, or all of them with
    ``regenerate``, come from running the model. ``write_to``: where the files used are written
    (None: a check, which writes nothing and needs every output committed unless regenerating).
    ``sample``: a check regenerates only a seeded sample of that many prompts per task and model."""

    def __init__(
        self,
        root: Path,
        *,
        regenerate: bool,
        write_to: Path | None,
        cache_dir: Path | None,
        sample: int | None = None,
    ):
        self.root, self.regenerate, self.write_to, self.cache_dir = root, regenerate, write_to, cache_dir
        self.sample = sample
        # keyed by (generation set, model); a set is a task id, or shared by tasks (onpolicy_pressure)
        self.fresh: dict[tuple[str, str], dict[str, str]] = {}  # regenerated outputs (check)
        self.files: dict[tuple[str, str], dict[str, Any]] = {}  # -> {path, sha256}
        self.used: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}  # records asked for this run
        # each file as committed before this run wrote to it (a set is written after every call)
        self.loaded: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self.touched: set[tuple[str, str]] = set()  # the sets the current task's build read

    def start_task(self) -> None:
        self.touched = set()

    def __call__(self, task_id: str, model_id: str, items: list[tuple[str, str]], max_new_tokens: int):
        # imported when called: tests replace evaluator.core.generate.greedy_generate
        from evaluator.core.generate import greedy_generate

        rel = generations_relpath(task_id, model_id)
        used = self.used.setdefault((task_id, model_id), {})
        self.touched.add((task_id, model_id))
        if (task_id, model_id) not in self.loaded:
            self.loaded[(task_id, model_id)] = generations_read(self.root / rel)
        committed = {**self.loaded[(task_id, model_id)], **used}
        missing = [(k, p) for k, p in items if k not in committed or committed[k]["prompt"] != p]
        todo = list(items) if self.regenerate else missing
        if self.regenerate and self.write_to is None and self.sample and not missing:
            import random

            todo = random.Random(f"probebench:regenerate:{task_id}:{model_id}").sample(
                todo, min(self.sample, len(todo))
            )
        if todo:
            if self.write_to is None and not self.regenerate:
                raise EvaluatorError(
                    f"{task_id}/{model_id}: {len(missing)} generations are not committed in {rel};"
                    " build the task (python -m evaluator build-data --task ...) or check with --regenerate"
                )
            outputs = greedy_generate(
                todo,
                model_id=model_id,
                registry=load_registry(self.root),
                cache_dir=self.cache_dir or self.root / "var" / "cache",
                max_new_tokens=max_new_tokens,
            )
            if self.write_to is None:
                self.fresh.setdefault((task_id, model_id), {}).update(outputs)
            else:
                for key, prompt in todo:
                    committed[key] = {"key": key, "prompt": prompt, "output": outputs[key]}
        wanted = {k for k, _ in items}
        used.update({k: r for k, r in committed.items() if k in wanted})
        records = dict(used)  # every prompt of the set asked for in this run (several calls)
        if self.write_to is not None:
            generations_write(self.write_to / rel, records)
            self.files[(task_id, model_id)] = {"path": rel, "sha256": sha256_file(self.write_to / rel)}
        elif (self.root / rel).is_file():
            self.files[(task_id, model_id)] = {"path": rel, "sha256": sha256_file(self.root / rel)}
        return {k: r["output"] for k, r in records.items() if k in wanted}


def build_tasks(
    task_ids: list[str],
    *,
    root: Path,
    out_root: Path,
    sources_dir: Path,
    generations: _Generations | None = None,
) -> dict[str, dict]:
    """Build ``task_ids`` reading sources pinned under ``root``; write split files under
    ``out_root``. Returns task id -> {"meta": TaskMeta, "splits": {split: {path, rows, sha256}}}
    (on-policy: "splits_by_model" {model: {split: ...}} and "generations" {model: {path, sha256}})."""

    generations = generations or _Generations(root, regenerate=False, write_to=out_root, cache_dir=None)

    archives: dict[str, Any] = {}

    def open_archive(package: str):
        if package not in archives:
            archives[package] = fetch(package, root=root, sources_dir=sources_dir)
        return archives[package]

    results: dict[str, dict] = {}
    try:
        for task_id in task_ids:
            build, meta = builder(task_id)
            log.info("building %s", task_id)
            generations.start_task()
            built = build(BuildContext(open_archive=open_archive, generate=generations))
            if built.on_policy:
                results[task_id] = {
                    "meta": meta,
                    "splits": {},
                    "splits_by_model": write_task(built, out_root),
                    "generations": {
                        m: generations.files[(t, m)]
                        for t, m in sorted(generations.touched)
                        if (t, m) in generations.files
                    },
                    "generation_sets": {m: t for t, m in sorted(generations.touched)},
                }
            else:
                results[task_id] = {"meta": meta, "splits": write_task(built, out_root)}
    finally:
        for archive in archives.values():
            archive.close()
    return results


def task_entry(meta, splits: dict[str, dict], res: dict | None = None) -> dict[str, Any]:
    """The tasks.yaml entry of one built task (``res``: the build result, for on-policy tasks)."""
    if res and res.get("splits_by_model"):
        entry = task_entry(meta, {})
        del entry["splits"]
        at = list(entry).index("templates") + 1
        extra = {
            "on_policy": True,
            "splits_by_model": {
                m: {name: dict(spec) for name, spec in s.items()} for m, s in res["splits_by_model"].items()
            },
            "generation": {
                "decoding": "greedy",
                "dtype": "float32",
                "batch_size": BATCH_SIZE,
                **generation_settings(meta.id),
                "files": {m: dict(f) for m, f in sorted(res["generations"].items())},
            },
        }
        return dict(list(entry.items())[:at] + list(extra.items()) + list(entry.items())[at:])
    return {
        "id": meta.id,
        "category": meta.category,
        "family": meta.family,
        "name": meta.name,
        "description": meta.description,
        "positive": meta.positive,
        "negative": meta.negative,
        "source": dict(meta.source),
        "templates": dict(meta.templates),
        "splits": {name: dict(spec) for name, spec in splits.items()},
        "status": "active",
        "minted": meta.minted,
        "card": meta.card,
        "caveats": meta.caveats,
    }


def update_tasks_yaml(path: Path, results: dict[str, dict]) -> None:
    """Replace (or append) the built tasks' entries in the ``tasks:`` list; keep everything else."""

    def edit(existing: list[dict]) -> list[dict]:
        by_id = {e["id"]: e for e in existing}
        for task_id, res in results.items():
            entry = task_entry(res["meta"], res["splits"], res)
            # declared by hand next to the templates: the behavioural readout (direction utility)
            # and the structured text baseline's features; text_panel is written by data-baselines;
            # refreshed: dated notes on rebuilds that changed a file's bytes but not its rows' content
            kept = {
                k: by_id[task_id][k]
                for k in ("readout", "readout_reason", "text_panel", "structured_baseline", "refreshed")
                if k in by_id.get(task_id, {})
            }
            if kept:
                at = list(entry).index("templates") + 1
                entry = dict(list(entry.items())[:at] + list(kept.items()) + list(entry.items())[at:])
            # declared by hand after the status: a refreshed task's predecessor, and a superseded
            # task's status and successor (a rebuild never re-activates a task)
            lineage = {
                k: by_id[task_id][k]
                for k in ("status", "superseded_by", "supersedes")
                if k in by_id.get(task_id, {})
            }
            if lineage:
                items = [(k, v) for k, v in entry.items() if k not in lineage]
                at = [k for k, _ in items].index("minted")
                entry = dict(items[:at] + list(lineage.items()) + items[at:])
            by_id[task_id] = entry
        ordered = [t for t in TASK_IDS if t in by_id] + [e["id"] for e in existing if e["id"] not in TASK_IDS]
        return [by_id[t] for t in ordered]

    rewrite_tasks(path, edit)


#: the largest share of an on-policy task's rows whose label may flip when the model's greedy
#: outputs are regenerated (float summation order differs across CPUs)
MAX_FLIPPED_SHARE = 0.01


def _compare_files(built: dict[str, dict], pinned: dict, root: Path, problems: list[str]) -> int:

    for split, spec in built.items():
        committed = root / spec["path"]
        committed_sha = sha256_file(committed) if committed.is_file() else "(missing)"
        pinned_sha = (pinned.get(split) or {}).get("sha256", "(not pinned)")
        pinned_rows = (pinned.get(split) or {}).get("rows")
        if not (spec["sha256"] == committed_sha == pinned_sha) or pinned_rows != spec["rows"]:
            problems.append(
                f"{spec['path']}: rebuilt sha256 {spec['sha256']} ({spec['rows']} rows),"
                f" committed {committed_sha}, tasks.yaml {pinned_sha} ({pinned_rows} rows)"
            )
    return len(built)


def _flipped_labels(task_id: str, model: str, fresh: dict[str, str], splits: dict, root: Path) -> dict:
    """Re-judge every committed row of one model whose generations were regenerated (``fresh``:
    generation key -> output; a sampled check regenerates only some). A row whose label changes, or
    that would leave the task (e.g. a pressure row whose neutral answer turns wrong), flipped."""

    rows = [r for spec in splits.values() for r in read_split(root / spec["path"])]
    flipped, judged = [], 0
    for row in rows:
        keys = generation_keys(task_id, row)
        if not any(k in fresh for k in keys.values()):
            continue  # a sample: not regenerated
        judged += 1
        committed = {
            k: row["meta"]["neutral_output" if role == "neutral" else "output"] for role, k in keys.items()
        }
        outputs = {k: fresh.get(k, committed[k]) for k in keys.values()}
        if relabel(task_id, row["meta"], outputs) != row["label"]:
            flipped.append(
                {
                    "id": row["id"],
                    "committed": committed,
                    "regenerated": {k: fresh.get(k) for k in keys.values()},
                }
            )
    return {
        "rows": judged,
        "flipped": len(flipped),
        "share": len(flipped) / max(judged, 1),
        "rows_flipped": flipped,
    }


def check_tasks(
    task_ids: list[str],
    *,
    root: Path,
    sources_dir: Path,
    regenerate: bool = False,
    sample: int | None = None,
) -> dict[str, Any]:
    """Rebuild into a temp dir; compare bytes with the committed files and with tasks.yaml.

    On-policy tasks are rebuilt from their committed generations (pure Python, fast); with
    ``regenerate`` the model's greedy outputs are produced again and every committed row is
    re-judged: the flipped labels are reported and more than MAX_FLIPPED_SHARE fails the check."""

    pinned = {
        e["id"]: e for e in (yaml.safe_load((root / "tasks.yaml").read_text()) or {}).get("tasks") or []
    }
    problems: list[str] = []
    checked = 0
    flips: dict[str, dict] = {}
    generations = _Generations(root, regenerate=regenerate, write_to=None, cache_dir=None, sample=sample)
    with tempfile.TemporaryDirectory(prefix="pb-check-") as tmp:
        results = build_tasks(
            task_ids, root=root, out_root=Path(tmp), sources_dir=sources_dir, generations=generations
        )
        for task_id, res in results.items():
            entry = pinned.get(task_id)
            if entry is None:
                problems.append(f"{task_id}: no entry in tasks.yaml")
                continue
            checked += _compare_files(res["splits"], entry.get("splits") or {}, root, problems)
            for model, built in (res.get("splits_by_model") or {}).items():
                by_model = (entry.get("splits_by_model") or {}).get(model) or {}
                checked += _compare_files(built, by_model, root, problems)
                gen = ((entry.get("generation") or {}).get("files") or {}).get(model) or {}
                path = root / gen.get("path", "(not pinned)")
                if not path.is_file() or sha256_file(path) != gen.get("sha256"):
                    problems.append(f"{task_id}/{model}: generations file {path} does not match tasks.yaml")
                gen_set = (res.get("generation_sets") or {}).get(model, task_id)
                if (gen_set, model) in generations.fresh:
                    report = _flipped_labels(task_id, model, generations.fresh[(gen_set, model)], built, root)
                    flips[f"{task_id}/{model}"] = report
                    if report["share"] > MAX_FLIPPED_SHARE:
                        problems.append(
                            f"{task_id}/{model}: {report['flipped']} of {report['rows']} labels flip when"
                            f" regenerated ({report['share']:.1%} > {MAX_FLIPPED_SHARE:.0%})"
                        )
    if problems:
        raise EvaluatorError("build-data --check failed:\n  " + "\n  ".join(problems))
    out: dict[str, Any] = {"checked_files": checked, "tasks": list(results), "ok": True}
    if flips:
        out["regenerated"] = flips
    return out


def build_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", action="append", default=None, help="task id (repeatable; default: all)")
    p.add_argument(
        "--sources", type=Path, default=None, help="directory of downloaded archives (default var/sources)"
    )
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")
    p.add_argument(
        "--check", action="store_true", help="rebuild into a temp dir and verify byte-identical output"
    )
    p.add_argument(
        "--regenerate",
        action="store_true",
        help="on-policy tasks: run the base models again (slow) instead of using the committed"
        " generations; with --check, report the labels that flip and fail above 1%%",
    )
    p.add_argument(
        "--sample",
        type=int,
        default=None,
        help="with --check --regenerate: regenerate a seeded sample of N prompts per task and model"
        " (in other batches than the build's, so with other padding)",
    )


def run_build_data(args: argparse.Namespace) -> dict:

    root = (args.registry or default_root()).resolve()
    sources_dir = args.sources or root / DEFAULT_SOURCES_DIR
    task_ids = args.task or list(TASK_IDS)
    for task_id in task_ids:
        builder(task_id)  # unknown ids fail here with "did you mean"
    if args.check:
        return check_tasks(
            task_ids, root=root, sources_dir=sources_dir, regenerate=args.regenerate, sample=args.sample
        )
    generations = _Generations(root, regenerate=args.regenerate, write_to=root, cache_dir=None)
    results = build_tasks(
        task_ids, root=root, out_root=root, sources_dir=sources_dir, generations=generations
    )
    update_tasks_yaml(root / "tasks.yaml", results)
    return {task_id: res["splits"] or res.get("splits_by_model") for task_id, res in results.items()}


def baseline_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--task", action="append", default=None, help="task id (repeatable with --write; default: all)"
    )
    p.add_argument("--model", default=None, help="base model whose rows an on-policy task is read from")
    p.add_argument("--split", default="test", help="the split the panel is scored on (default: test)")
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")
    p.add_argument(
        "--cache-dir", type=Path, default=None, help="model and activation cache (default: var/cache)"
    )
    p.add_argument(
        "--no-encoder", action="store_true", help="leave out the sentence-encoder member (no model load)"
    )
    p.add_argument("--scores", action="store_true", help="include every member's per-example scores")
    p.add_argument("--json", action="store_true", help="print JSON even on a terminal")
    p.add_argument(
        "--write",
        action="store_true",
        help="fit the panel of the given (default: every) task on each of its files, write"
        " registry/baselines/ and pin each file's SHA-256 in tasks.yaml as the task's text_panel",
    )


def run_data_baselines(args: argparse.Namespace) -> dict:
    """The text-baseline panel of one task (evaluator.axes.text_panel); with ``--write``, the committed
    panel files of the given (or all) tasks (evaluator.axes.text_baselines)."""

    root = (args.registry or default_root()).resolve()
    if args.write:
        return data_baselines_write(root, args.task, cache_dir=args.cache_dir, encoder=not args.no_encoder)
    if not args.task or len(args.task) != 1:
        raise EvaluatorError(
            "data-baselines prints the text-baseline panel of one task: name it with --task"
            " (--write writes the panels of several)"
        )
    return data_baselines_panel(
        root,
        args.task[0],
        model=args.model,
        split=args.split,
        cache_dir=args.cache_dir,
        encoder=not args.no_encoder,
        scores=args.scores,
    )


def data_baselines_write(
    root: Path, task_ids: list[str] | None, *, cache_dir: Path | None = None, encoder: bool = True
) -> dict[str, Any]:
    """Write the panel files of ``task_ids`` (default: all) and pin them in tasks.yaml; returns
    the pins."""

    registry = load_registry(root)
    embed = encoder_embed(registry, cache_dir=cache_dir or default_cache_dir()) if encoder else None
    pins = write_panels(root, task_ids, embed=embed, encoder=ENCODER_ID if encoder else None)

    def edit(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for entry in entries:
            if entry["id"] in pins:  # text_panel goes where it always sits: after the templates
                items = [(k, v) for k, v in entry.items() if k not in ("text_panel", "text_baselines")]
                at = [k for k, _ in items].index("templates") + 1 if "templates" in entry else len(items)
                entry = dict(items[:at] + [("text_panel", pins[entry["id"]])] + items[at:])
            out.append(entry)
        return out

    rewrite_tasks(root / "tasks.yaml", edit)
    return pins


def data_baselines_panel(
    root: Path,
    task_id: str,
    *,
    model: str | None,
    split: str = "test",
    cache_dir: Path | None = None,
    encoder: bool = True,
    scores: bool = False,
) -> dict[str, Any]:
    """What ``data-baselines --task T [--model M]`` prints: every panel member's AUROC on ``split``
    with its CI, CV AUROC and chosen hyperparameters, the strongest on ``split`` (the bar the board's
    lift is measured over) and the member CV on train picks."""

    registry = load_registry(root)
    task = registry.task(task_id)
    if not task.on_policy and model is not None:
        model = None  # a task about its input text has one set of rows for every model
    embed = encoder_embed(registry, cache_dir=cache_dir or default_cache_dir()) if encoder else None
    result = task_panel(registry, task_id, model=model, splits=(split,), embed=embed)
    return {
        "task": task_id,
        "model": model,
        "text": "each row's text under the task's single template (the prompt the probes read; for an"
        " on-policy task the model's answer is not part of it)",
        **result.to_dict(split, scores=scores),
    }


def data_baselines_summary(result: object) -> str:

    if not isinstance(result, dict) or "baselines" not in result:
        import json

        return json.dumps(result, indent=2) + "\n"
    return panel_table(result)


def data_stress_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", action="append", default=None, help="task id (repeatable; default: all)")
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")
    p.add_argument(
        "--check",
        action="store_true",
        help="rebuild in memory and compare with the committed files and their pins (writes nothing)",
    )
    p.add_argument("--json", action="store_true", help="print JSON even on a terminal")
    p.add_argument(
        "--stats",
        action="store_true",
        help="also print, per task and in-place rewrite, the rows it changed and how many each rule changed",
    )


def run_data_stress(args: argparse.Namespace) -> dict:
    """Build the stress split of every task about its text (evaluator.data.builders.stress) from its
    committed test rows, write it and pin it in tasks.yaml as the task's ``stress``; with
    ``--check``, compare instead and fail on a difference. With ``--stats`` the result also holds,
    per task, the in-place rewrites' counts (``stats``: the rows each rule changed)."""

    root = (args.registry or default_root()).resolve()
    stats = {"stats": build_stress_stats(root, args.task)} if args.stats else {}
    if args.check:
        built = build_stress(root, args.task, write=False)
        _, tasks = load_tasks(root / "tasks.yaml")
        stale = []
        for task_id, pin in built.items():
            spec = tasks[task_id].stress
            path = root / pin["path"]
            on_disk = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
            if spec is None or spec.sha256 != pin["sha256"] or on_disk != pin["sha256"]:
                stale.append(task_id)
        if stale:
            raise EvaluatorError(
                f"stress splits out of date for {', '.join(stale)}: run `python -m evaluator data-stress`"
            )
        return {"ok": True, "tasks": built, **stats}
    built = build_stress(root, args.task, write=True)

    def edit(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for entry in entries:
            if entry["id"] in built:  # after the test split's pins: the splits it is made from
                items = [(k, v) for k, v in entry.items() if k != "stress"]
                at = [k for k, _ in items].index("splits") + 1 if "splits" in entry else len(items)
                entry = dict(items[:at] + [("stress", built[entry["id"]])] + items[at:])
            out.append(entry)
        return out

    rewrite_tasks(root / "tasks.yaml", edit)
    return {"ok": True, "tasks": built, **stats}
