"""Artifact storage: content-addressed files under ``settings.ARTIFACT_ROOT``.

A file is written to a temporary name in the same directory, fsynced, then renamed to
``<sha[:2]>/<sha>.safetensors``: a reader never sees a half-written artifact, and two uploads of
the same bytes end up as one file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from django.conf import settings

from leaderboard.errors import ArtifactTooLarge

CHUNK = 1 << 20


def artifact_relpath(sha256: str) -> str:
    return f"{sha256[:2]}/{sha256}.safetensors"


def artifact_abspath(relpath: str) -> Path:
    root = Path(settings.ARTIFACT_ROOT).resolve()
    path = (root / relpath).resolve()
    if root not in path.parents:
        raise ValueError(f"artifact path {relpath!r} escapes the artifact root")
    return path


def read_upload(upload, *, max_bytes: int) -> bytes:
    """Read an uploaded file (Django UploadedFile or file-like) into memory, refusing oversize
    uploads without reading more than ``max_bytes + 1`` bytes."""
    size = getattr(upload, "size", None)
    if size is not None and size > max_bytes:
        raise ArtifactTooLarge(
            f"artifact is {size} bytes; the limit is {max_bytes} bytes ({max_bytes // (1024 * 1024)} MB)",
            field="artifact",
        )
    chunks, total = [], 0
    for chunk in upload.chunks(CHUNK) if hasattr(upload, "chunks") else iter(lambda: upload.read(CHUNK), b""):
        total += len(chunk)
        if total > max_bytes:
            raise ArtifactTooLarge(
                f"artifact exceeds the limit of {max_bytes} bytes ({max_bytes // (1024 * 1024)} MB)",
                field="artifact",
            )
        chunks.append(chunk)
    return b"".join(chunks)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def artifact_store(data: bytes, sha256: str) -> tuple[str, bool]:
    """Write ``data`` under its content hash; return (relative path, created)."""
    relpath = artifact_relpath(sha256)
    final = artifact_abspath(relpath)
    if final.exists():
        return relpath, False
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=".upload-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return relpath, True


def artifact_remove(relpath: str) -> None:
    artifact_abspath(relpath).unlink(missing_ok=True)
