"""Files sealed at rest with the installation's local key: AES-256-GCM from ``cryptography``.

The quarterly holdouts' sealed pools and each cycle's drawn holdout files are written this way
under the data directory, so that a copy of that directory without the key (a backup, a volume
snapshot) does not give them away. The key is 32 random bytes kept, hex-encoded, in one file made
with mode 0600 on first use (``key_load_or_create``); whoever holds the key file can open every
sealed file, so keep it beside the database's credentials, not in a backup anyone can read.

A sealed file is ``MAGIC`` + a fresh 12-byte nonce + the ciphertext with its 16-byte tag. The
associated data names what the file holds (e.g. ``pool:cities-truth-v1``), so a sealed file
copied under another name does not open. A wrong key, a changed byte or a file renamed into
another slot is a :class:`SealError`, never garbage. Standard library and ``cryptography`` only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evaluator.errors import EvaluatorError

MAGIC = b"PBSEAL1\n"
KEY_BYTES = 32
NONCE_BYTES = 12


class SealError(EvaluatorError):
    """A sealed file could not be opened: wrong key, changed bytes, or not a sealed file."""


def key_load_or_create(path: Path) -> bytes:
    """The sealing key kept at ``path`` (64 hex digits), made there with mode 0600 when there is
    none. Two processes making it at once agree: the key is written to a private temporary file
    and linked into place, so the second one finds the first one's whole file and reads it."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_bytes(KEY_BYTES).hex() + "\n")
            with contextlib.suppress(FileExistsError):  # another process made it meanwhile: keep that one
                os.link(tmp, path)  # atomic, and never replaces an existing key
        finally:
            Path(tmp).unlink(missing_ok=True)
    return _key_read(path)


def _key_read(path: Path) -> bytes:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SealError(f"sealing key {path}: cannot be read ({exc})") from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise SealError(f"sealing key {path}: expected {KEY_BYTES * 2} hex digits")
    return key


def seal(data: bytes, *, key: bytes, label: str) -> bytes:
    """``data`` encrypted and authenticated under ``key``, bound to ``label``."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = secrets.token_bytes(NONCE_BYTES)
    return MAGIC + nonce + AESGCM(key).encrypt(nonce, data, label.encode("utf-8"))


def unseal(blob: bytes, *, key: bytes, label: str, where: str = "sealed file") -> bytes:
    """The plaintext of ``seal(data, key=key, label=label)``; SealError for anything else."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + NONCE_BYTES + 16:
        raise SealError(f"{where}: not a sealed file")
    nonce = blob[len(MAGIC) : len(MAGIC) + NONCE_BYTES]
    try:
        return AESGCM(key).decrypt(nonce, blob[len(MAGIC) + NONCE_BYTES :], label.encode("utf-8"))
    except InvalidTag:
        raise SealError(
            f"{where}: does not open with this installation's sealing key (another key, changed bytes,"
            f" or a file that is not the {label!r} one)"
        ) from None


def write_sealed(path: Path, data: bytes, *, key: bytes, label: str) -> None:
    """Seal ``data`` into ``path``: a private temporary file renamed into place (mode 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(seal(data, key=key, label=label))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_sealed(path: Path, *, key: bytes, label: str) -> bytes:
    try:
        blob = Path(path).read_bytes()
    except OSError as exc:
        raise SealError(f"{path}: cannot be read ({exc.strerror})") from None
    return unseal(blob, key=key, label=label, where=str(path))


@contextmanager
def unsealed_copy(path: Path, *, key: bytes, label: str) -> Iterator[Path]:
    """The plaintext of a sealed file as a private temporary file, removed on exit (for code that
    reads a path, such as a run's split file)."""
    data = read_sealed(path, key=key, label=label)
    with tempfile.TemporaryDirectory(prefix="pb-unsealed-") as tmp:  # mode 0700
        plain = Path(tmp) / Path(path).name.removesuffix(".sealed")
        plain.write_bytes(data)
        yield plain
