"""A consistent copy of a filled board's database, for the bench scripts that read a board (the
original is left as it was, even while a demo still writes to it)."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path


def board_copy(data_dir: Path, *, secret: str) -> tuple[Path, dict[str, str]]:
    """(a temporary data directory holding a copy of ``data_dir``'s probebench.sqlite3, the
    environment that points Django at it). Raises FileNotFoundError when there is no database."""
    source = Path(data_dir).resolve() / "probebench.sqlite3"
    if not source.is_file():
        raise FileNotFoundError(f"{source.parent} holds no probebench.sqlite3")
    copy = Path(tempfile.mkdtemp(prefix="probebench-board-"))
    with sqlite3.connect(source) as src, sqlite3.connect(copy / "probebench.sqlite3") as dst:
        src.backup(dst)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")}
    env.update(PROBEBENCH_DATA_DIR=str(copy), SECRET_KEY=secret)
    return copy, env


def board_django(data_dir: Path, *, secret: str) -> Path:
    """Copy ``data_dir``'s board (:func:`board_copy`), point this process's Django at the copy and
    set it up; returns the copy's directory, for the caller to remove. Raises FileNotFoundError
    when there is no database."""
    copy, env = board_copy(data_dir, secret=secret)
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "probebench.settings")
    import django

    django.setup()
    return copy
