"""Artifact storage: content-addressed files under ``settings.ARTIFACT_ROOT``.

A file is written to a temporary name in the same directory, fsynced, then renamed to
``<sha[:2]>/<sha>.safetensors``: a reader never sees a half-written artifact, and two uploads of
the same bytes end up as one file.

A stored file is never deleted by a request: two identical uploads sent at once share one path,
and the one that loses (409) must not remove the file the winner's row points to. Files that no
row references (an upload whose transaction failed after the write) are removed only by
:func:`artifacts_orphaned_remove`, and only once they are older than any upload in flight.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path

from django.conf import settings

from leaderboard.errors import ArtifactTooLarge

CHUNK = 1 << 20
TEMP_PREFIX = ".upload-"
#: An unreferenced file younger than this may belong to an upload still in its transaction.
ORPHAN_MIN_AGE_S = 24 * 3600


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


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def artifact_store(data: bytes, sha256: str) -> tuple[str, bool]:
    """Write ``data`` under its content hash; return (relative path, created).

    Idempotent and safe under concurrency: the bytes go to a private temporary file that is
    atomically renamed onto the final path, so a concurrent writer of the same content either
    finds the complete file or replaces it with identical bytes. A file found at the path is
    reused only if its content hashes to its name (a file damaged on disk is rewritten).
    """
    relpath = artifact_relpath(sha256)
    final = artifact_abspath(relpath)
    try:
        if final.stat().st_size == len(data) and _file_sha256(final) == sha256:
            return relpath, False
    except FileNotFoundError:
        pass
    # absent, or changed on disk since it was stored: (re)write the right bytes
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=TEMP_PREFIX, suffix=".tmp")
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


def artifacts_orphaned_remove(*, min_age_s: float = ORPHAN_MIN_AGE_S, now: float | None = None) -> list[str]:
    """Remove stored files that no probe version references, and abandoned temporary files, once
    they are older than ``min_age_s`` (an upload still in its transaction is never touched).
    Returns the relative paths removed. Safe to run any time (``manage.py artifacts_cleanup``)."""
    from leaderboard.models import ProbeVersion

    root = Path(settings.ARTIFACT_ROOT)
    if not root.exists():
        return []
    cutoff = (time.time() if now is None else now) - min_age_s
    candidates = [path for path in root.glob("*/*") if path.is_file() and path.stat().st_mtime < cutoff]
    referenced = set(
        ProbeVersion.objects.filter(
            artifact_path__in=[str(path.relative_to(root)) for path in candidates]
        ).values_list("artifact_path", flat=True)
    )
    removed = []
    for path in candidates:
        relpath = str(path.relative_to(root))
        if relpath in referenced:
            continue
        # re-check right before unlinking: a row committed since the query keeps its file
        if (
            not path.name.startswith(TEMP_PREFIX)
            and ProbeVersion.objects.filter(artifact_path=relpath).exists()
        ):
            continue
        path.unlink(missing_ok=True)
        removed.append(relpath)
    return removed
