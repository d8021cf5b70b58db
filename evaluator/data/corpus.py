"""The generic-text corpus the sparse autoencoders are trained on, read from its pinned archive.

A corpus (``registry/saes.yaml``, :class:`evaluator.data.registry.saes.CorpusSpec`) is one JSON-lines
member of a package archive. The archive is fetched and hash-checked by the task builders' own
mechanism (:func:`evaluator.data.builders.sources.fetch`, pinned in ``registry/sources.yaml``); the
corpus entry pins the same archive again, and a difference between the two pins is refused rather
than guessed at.

Documents are kept in file order, exact duplicates dropped (the first copy kept). A document is
held out when the SHA-256 of its UTF-8 text is 0 modulo ``heldout_every``: the held-out set is the
same for every seed, model and SAE, and no SAE card is measured on a document its SAE was trained on.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from evaluator.data.builders.sources import fetch
from evaluator.data.registry.saes import CorpusSpec
from evaluator.errors import RegistryError


@dataclass(frozen=True)
class CorpusSplit:
    """A corpus's documents, split: ``train`` and ``heldout`` in file order."""

    corpus: CorpusSpec
    train: tuple[str, ...]
    heldout: tuple[str, ...]
    duplicates: int  # exact duplicates dropped

    def describe(self) -> dict[str, object]:
        return {
            **self.corpus.pin(),
            "member": self.corpus.member,
            "license": self.corpus.license,
            "documents": len(self.train) + len(self.heldout),
            "train_documents": len(self.train),
            "heldout_documents": len(self.heldout),
            "duplicates_dropped": self.duplicates,
            "heldout_rule": f"sha256(document) % {self.corpus.heldout_every} == 0",
        }


def is_heldout(text: str, every: int) -> bool:
    """Whether ``text`` is held out of training: its SHA-256 is 0 modulo ``every``."""
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) % every == 0


def corpus_split(corpus: CorpusSpec, documents: list[str]) -> CorpusSplit:
    """Drop exact duplicates and split ``documents`` by :func:`is_heldout`."""
    seen: set[str] = set()
    train: list[str] = []
    heldout: list[str] = []
    for text in documents:
        if text in seen:
            continue
        seen.add(text)
        (heldout if is_heldout(text, corpus.heldout_every) else train).append(text)
    return CorpusSplit(
        corpus=corpus, train=tuple(train), heldout=tuple(heldout), duplicates=len(documents) - len(seen)
    )


def corpus_documents(
    corpus: CorpusSpec, *, root: Path, sources_dir: Path, download: bool = True
) -> list[str]:
    """Every document of ``corpus``, in file order, from its verified archive (downloaded into
    ``sources_dir`` when absent and ``download``)."""
    archive = fetch(corpus.package, root=root, sources_dir=sources_dir, download=download)
    try:
        pinned = (archive.source.version, archive.source.filename, archive.source.sha256)
        if pinned != (corpus.version, corpus.filename, corpus.sha256):
            raise RegistryError(
                f"corpus {corpus.id}: registry/saes.yaml pins {corpus.package}=={corpus.version}"
                f" ({corpus.filename}, {corpus.sha256}) but registry/sources.yaml pins"
                f" {archive.source.requirement} ({archive.source.filename}, {archive.source.sha256})"
            )
        lines = archive.read_text(corpus.member).splitlines()
    finally:
        archive.close()
    documents: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            text = json.loads(line)[corpus.field]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise RegistryError(
                f"corpus {corpus.id}: {corpus.member} line {number} is not a JSON object with a"
                f" {corpus.field!r} field"
            ) from None
        if isinstance(text, str) and text.strip():
            documents.append(text.strip())
    return documents


def corpus_load(corpus: CorpusSpec, *, root: Path, sources_dir: Path, download: bool = True) -> CorpusSplit:
    """The corpus read from its archive and split into training and held-out documents."""
    return corpus_split(
        corpus, corpus_documents(corpus, root=root, sources_dir=sources_dir, download=download)
    )
