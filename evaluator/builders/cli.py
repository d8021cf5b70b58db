"""``python -m evaluator build-data`` and ``python -m evaluator data-baselines``.

build-data runs the task builders, writes ``registry/splits/<task>/<split>.jsonl`` and writes the
tasks' entries (metadata, row counts, SHA-256) into the ``tasks:`` list of tasks.yaml; other
entries and the categories block are kept. ``--check`` rebuilds into a temporary directory and
fails (exit 2) unless every rebuilt file is byte-identical to the committed one and to the hash
pinned in tasks.yaml.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import yaml

from evaluator.cli import command
from evaluator.errors import EvaluatorError

log = logging.getLogger(__name__)


def build_tasks(task_ids: list[str], *, root: Path, out_root: Path, sources_dir: Path) -> dict[str, dict]:
    """Build ``task_ids`` reading sources pinned under ``root``; write split files under
    ``out_root``. Returns task id -> {"meta": TaskMeta, "splits": {split: {path, rows, sha256}}}."""
    from evaluator.builders import builder
    from evaluator.builders.common import BuildContext, write_task
    from evaluator.builders.sources import fetch

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
            built = build(BuildContext(open_archive=open_archive))
            results[task_id] = {"meta": meta, "splits": write_task(built, out_root)}
    finally:
        for archive in archives.values():
            archive.close()
    return results


def task_entry(meta, splits: dict[str, dict]) -> dict[str, Any]:
    """The tasks.yaml entry of one built task."""
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
    from evaluator.builders import TASK_IDS

    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("tasks:")]
    if len(starts) != 1:
        raise EvaluatorError(f"{path}: expected exactly one top-level 'tasks:' line, found {len(starts)}")
    existing = (yaml.safe_load(text) or {}).get("tasks") or []
    by_id = {e["id"]: e for e in existing}
    for task_id, res in results.items():
        by_id[task_id] = task_entry(res["meta"], res["splits"])
    ordered = [t for t in TASK_IDS if t in by_id] + [e["id"] for e in existing if e["id"] not in TASK_IDS]
    entries = [by_id[t] for t in ordered]
    body = yaml.safe_dump(entries, sort_keys=False, allow_unicode=True, width=110, default_flow_style=False)
    block = (
        "tasks:\n"
        "  # Entries of buildable tasks are written by `python -m evaluator build-data`"
        " (evaluator/builders/).\n" + textwrap.indent(body, "  ")
    )
    path.write_text("".join(lines[: starts[0]]) + block, encoding="utf-8")


def check_tasks(task_ids: list[str], *, root: Path, sources_dir: Path) -> dict[str, Any]:
    """Rebuild into a temp dir; compare bytes with the committed files and with tasks.yaml."""
    from evaluator.registry import sha256_file

    pinned = {
        e["id"]: e for e in (yaml.safe_load((root / "tasks.yaml").read_text()) or {}).get("tasks") or []
    }
    problems: list[str] = []
    checked = 0
    with tempfile.TemporaryDirectory(prefix="pb-check-") as tmp:
        results = build_tasks(task_ids, root=root, out_root=Path(tmp), sources_dir=sources_dir)
        for task_id, res in results.items():
            entry = pinned.get(task_id)
            if entry is None:
                problems.append(f"{task_id}: no entry in tasks.yaml")
                continue
            for split, spec in res["splits"].items():
                checked += 1
                committed = root / spec["path"]
                committed_sha = sha256_file(committed) if committed.is_file() else "(missing)"
                pinned_sha = (entry.get("splits") or {}).get(split, {}).get("sha256", "(not pinned)")
                pinned_rows = (entry.get("splits") or {}).get(split, {}).get("rows")
                if not (spec["sha256"] == committed_sha == pinned_sha) or pinned_rows != spec["rows"]:
                    problems.append(
                        f"{spec['path']}: rebuilt sha256 {spec['sha256']} ({spec['rows']} rows),"
                        f" committed {committed_sha}, tasks.yaml {pinned_sha} ({pinned_rows} rows)"
                    )
    if problems:
        raise EvaluatorError("build-data --check failed:\n  " + "\n  ".join(problems))
    return {"checked_files": checked, "tasks": list(results), "ok": True}


def _build_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", action="append", default=None, help="task id (repeatable; default: all)")
    p.add_argument(
        "--sources", type=Path, default=None, help="directory of downloaded archives (default var/sources)"
    )
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")
    p.add_argument(
        "--check", action="store_true", help="rebuild into a temp dir and verify byte-identical output"
    )


@command("build-data", _build_args)
def run_build_data(args: argparse.Namespace) -> dict:
    from evaluator.builders import TASK_IDS, builder
    from evaluator.builders.sources import DEFAULT_SOURCES_DIR
    from evaluator.registry import default_root

    root = (args.registry or default_root()).resolve()
    sources_dir = args.sources or root / DEFAULT_SOURCES_DIR
    task_ids = args.task or list(TASK_IDS)
    for task_id in task_ids:
        builder(task_id)  # unknown ids fail here with "did you mean"
    if args.check:
        return check_tasks(task_ids, root=root, sources_dir=sources_dir)
    results = build_tasks(task_ids, root=root, out_root=root, sources_dir=sources_dir)
    update_tasks_yaml(root / "tasks.yaml", results)
    return {task_id: res["splits"] for task_id, res in results.items()}


def _baseline_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", action="append", default=None, help="task id (repeatable; default: all)")
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")


@command("data-baselines", _baseline_args)
def run_data_baselines(args: argparse.Namespace) -> dict:
    from evaluator.builders import TASK_IDS
    from evaluator.builders.baselines import task_baselines
    from evaluator.registry import default_root

    root = (args.registry or default_root()).resolve()
    return {task_id: task_baselines(root, task_id) for task_id in (args.task or TASK_IDS)}
