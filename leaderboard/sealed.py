"""The quarterly cycles' sealed files: the installation's sealing key (``HOLDOUT_SEALING_KEY_FILE``,
made on first use) and each drawn holdout file, kept under ``DATA_DIR/holdouts/<quarter>/``
encrypted with it (``evaluator.data.sealing``). The services write them, the holdout runs and
the reveal of a completed cycle read them; a cycle minted before sealed holdouts has plain files,
read as they are."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from django.conf import settings

from evaluator.data import sealing

SEALED_SUFFIX = ".sealed"


def sealing_key() -> bytes:
    return sealing.key_load_or_create(settings.HOLDOUT_SEALING_KEY_FILE)


def holdout_relpath(quarter: str, task_id: str, base_model_id: str = "") -> str:
    """holdouts/<quarter>/<task>.jsonl.sealed; an on-policy task's per model: <task>/<model>.jsonl.sealed"""
    name = f"{task_id}/{base_model_id}.jsonl" if base_model_id else f"{task_id}.jsonl"
    return f"holdouts/{quarter}/{name}{SEALED_SUFFIX}"


def holdout_label(quarter: str, task_id: str, base_model_id: str = "") -> str:
    """What a holdout file is sealed to: a file copied into another quarter's or task's slot does
    not open there."""
    return f"probebench-holdout:{quarter}:{task_id}:{base_model_id}"


def holdout_write(quarter: str, task_id: str, base_model_id: str, data: bytes) -> str:
    """Seal one drawn holdout under DATA_DIR; returns its path relative to DATA_DIR."""
    rel = holdout_relpath(quarter, task_id, base_model_id)
    sealing.write_sealed(
        Path(settings.DATA_DIR) / rel,
        data,
        key=sealing_key(),
        label=holdout_label(quarter, task_id, base_model_id),
    )
    return rel


def holdout_read(quarter: str, task_id: str, base_model_id: str, rel: str) -> bytes:
    """The bytes of a cycle's holdout file (a plain file of a cycle minted before sealing)."""
    path = Path(settings.DATA_DIR) / rel
    if not rel.endswith(SEALED_SUFFIX):
        return path.read_bytes()
    return sealing.read_sealed(path, key=sealing_key(), label=holdout_label(quarter, task_id, base_model_id))


def holdout_file(quarter: str, task_id: str, base_model_id: str, rel: str) -> AbstractContextManager[Path]:
    """A path to the holdout's plain bytes for as long as the ``with`` block runs (a private
    temporary copy of a sealed file, removed afterwards)."""
    path = Path(settings.DATA_DIR) / rel
    if not rel.endswith(SEALED_SUFFIX):
        return nullcontext(path)
    return sealing.unsealed_copy(
        path, key=sealing_key(), label=holdout_label(quarter, task_id, base_model_id)
    )
