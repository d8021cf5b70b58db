"""What every command module shares: the ``Command`` record the parser is built from, the common
options and the default cache directory. ``evaluator/commands/cli.py`` lists the commands; a
command module imports this module, never the parser."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Command:
    """One subcommand: ``add_arguments`` fills its parser; ``run`` returns the JSON-serialisable
    result or raises an EvaluatorError; ``summary`` (if any) turns the result into a short text for
    a terminal (``--json``, or a stdout that is not a terminal, prints the JSON instead)."""

    name: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], object]
    summary: Callable[[object], str] | None = None


def cache_registry_json_args(p: argparse.ArgumentParser) -> None:
    """The options every command that loads a model shares: the cache, the registry, JSON output."""
    p.add_argument(
        "--cache-dir", type=Path, default=None, help="model and activation cache (default: var/cache)"
    )
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")
    p.add_argument("--json", action="store_true", help="print JSON even on a terminal")


def default_cache_dir() -> Path:
    data_dir = os.environ.get("PROBEBENCH_DATA_DIR")
    return Path(data_dir) / "cache" if data_dir else Path("var") / "cache"
