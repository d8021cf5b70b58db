"""Text normalisation and hashing shared by leakage checks and holdout minting: two texts match when
they are equal after Unicode NFKC, case folding, every punctuation character replaced by a space,
whitespace collapsed to single spaces, ends stripped; a text is compared by the SHA-256 of its
normalised UTF-8 bytes (docs/ARCHITECTURE.md). Standard library only.
"""

from __future__ import annotations

import hashlib
import unicodedata


def normalize_text(text: str) -> str:
    """The canonical form two texts are compared in (case, whitespace and punctuation ignored)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    return " ".join(text.split())


def text_hash(text: str) -> str:
    """SHA-256 (64 lowercase hex) of the normalised text."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()
