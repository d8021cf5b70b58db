"""Result bundles: a board's public entries in one signed, content-addressed file that anyone can
verify offline, with this module and a public key only (no database, no model).

A bundle is an uncompressed tar whose members are, in this order:

    manifest.json      canonical JSON (sorted keys, no spaces, UTF-8): the format, the publishing
                       board, when and at which commit it was written, the signer's public key, the
                       context every entry was measured in (protocols, weights specs, split and
                       model hashes), the entries, and ``parts``: every other member's SHA-256
                       and size
    manifest.sig       the Ed25519 signature of manifest.json's bytes, base64
    entries/...        the parts: per entry its artifact (``probe.safetensors``), ``entry.json``
                       (the probe, its version's metadata, the Score as published) and
                       ``runs.json.gz`` (every run its Score was computed from, with each run's
                       per-example scores and stored metrics)

The bundle's id is the SHA-256 of manifest.json: the signature covers the manifest, the manifest
covers every part, so one changed byte anywhere is found. :func:`bundle_read` checks all of it
before it returns anything, and refuses a bundle with every failure it found named
(:class:`BundleError`). It reads untrusted input: sizes are capped before bytes are read, only
regular files with plain relative names are accepted, a name may appear once, and the manifest is
parsed with the limits of :mod:`evaluator.strict_json`.

Keys are Ed25519 (``cryptography``), stored as PEM: the private key PKCS#8, the public key
SubjectPublicKeyInfo. A key's fingerprint is the first 16 hex digits of the SHA-256 of its raw 32
bytes.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.errors import EvaluatorError
from evaluator.strict_json import JsonRejected, json_loads_strict

FORMAT = "probebench-bundle/1"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
#: a part's name: entries/<slug>/v<number>/<file>, lower-case, no "..", no absolute path
PART_NAME = re.compile(
    r"^entries/[a-z0-9][a-z0-9-]{0,119}/v[1-9][0-9]{0,5}/(probe\.safetensors|entry\.json|runs\.json\.gz)$"
)
MAX_MANIFEST_BYTES = 16 << 20
#: a part once decompressed (runs.json.gz): what a reader inflates at most
MAX_INFLATED_BYTES = 256 << 20


class BundleError(EvaluatorError):
    """A bundle that is not accepted: ``problems`` names every check that failed."""

    def __init__(self, problems: Iterable[str]):
        self.problems = list(problems)
        super().__init__("bundle refused: " + "; ".join(self.problems))


def canonical_json(value: Any) -> bytes:
    """The one byte form of a JSON value this format writes (so equal values hash equally)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def gzip_json(value: Any) -> bytes:
    """``canonical_json(value)`` gzip-compressed with no timestamp: the same value, the same bytes."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(canonical_json(value))
    return buf.getvalue()


def gunzip_json(data: bytes, *, name: str) -> Any:
    """The JSON value of a gzip part, inflated to at most MAX_INFLATED_BYTES."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
            raw = gz.read(MAX_INFLATED_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise BundleError([f"{name}: not gzip ({exc})"]) from None
    if len(raw) > MAX_INFLATED_BYTES:
        raise BundleError([f"{name}: inflates to more than {MAX_INFLATED_BYTES} bytes"])
    return _json(raw, name=name, max_bytes=MAX_INFLATED_BYTES)


def _json(raw: bytes, *, name: str, max_bytes: int) -> Any:
    try:
        return json_loads_strict(raw, max_bytes=max_bytes)
    except (JsonRejected, UnicodeDecodeError) as exc:
        raise BundleError([f"{name}: {exc}"]) from None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- keys


def private_key_create() -> bytes:
    """A new Ed25519 private key, PEM (PKCS#8, unencrypted: keep the file private)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def private_key_file(path: Path) -> bytes:
    """The private key (PEM) kept at ``path``, made there with mode 0600 when there is none (two
    processes making it at once: the second reads the first's)."""
    path = Path(path)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_bytes()
        with os.fdopen(fd, "wb") as fh:
            fh.write(private_key_create())
    return path.read_bytes()


def _private_key(pem: bytes):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise EvaluatorError("the signing key is not an Ed25519 private key")
    return key


def public_key_pem(private_pem: bytes) -> bytes:
    """The public key (PEM) of a private key (PEM)."""
    from cryptography.hazmat.primitives import serialization

    return (
        _private_key(private_pem)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def public_key_raw(public_pem: bytes) -> bytes:
    """The raw 32 bytes of an Ed25519 public key (PEM); EvaluatorError for anything else."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(public_pem)
    except ValueError as exc:
        raise EvaluatorError(f"not a PEM public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise EvaluatorError("the public key is not an Ed25519 key")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(raw_public: bytes) -> str:
    return sha256_hex(raw_public)[:16]


def sign(private_pem: bytes, message: bytes) -> str:
    """The Ed25519 signature of ``message``, base64."""
    return base64.b64encode(_private_key(private_pem).sign(message)).decode()


def signature_valid(raw_public: bytes, message: bytes, signature_b64: str) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        signature = base64.b64decode(signature_b64.strip(), validate=True)
        Ed25519PublicKey.from_public_bytes(raw_public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def signer_of(private_pem: bytes) -> dict[str, str]:
    """The manifest's ``signer`` for a private key: algorithm, raw public key (base64), fingerprint."""
    raw = public_key_raw(public_key_pem(private_pem))
    return {
        "algorithm": "ed25519",
        "public_key": base64.b64encode(raw).decode(),
        "fingerprint": fingerprint(raw),
    }


# --------------------------------------------------------------------------- writing


def _member(name: str, data: bytes) -> tuple[tarfile.TarInfo, io.BytesIO]:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uid, info.gid = len(data), 0, 0o644, 0, 0
    info.uname = info.gname = ""
    return info, io.BytesIO(data)


def bundle_write(
    path: Path, *, manifest: Mapping[str, Any], parts: Mapping[str, bytes], private_pem: bytes
) -> str:
    """Write a bundle of ``parts`` (name → bytes) described by ``manifest`` (everything but
    ``format``, ``signer`` and ``parts``, which are filled in here), signed with ``private_pem``;
    written to a temporary name and renamed into place. Returns the bundle id."""
    bad = [name for name in parts if not PART_NAME.match(name)]
    if bad:
        raise EvaluatorError(f"part names this format does not accept: {', '.join(sorted(bad))}")
    doc = dict(manifest)
    doc["format"] = FORMAT
    doc["signer"] = signer_of(private_pem)
    doc["parts"] = {
        name: {"sha256": sha256_hex(data), "bytes": len(data)} for name, data in sorted(parts.items())
    }
    manifest_bytes = canonical_json(doc)
    if len(manifest_bytes) > MAX_MANIFEST_BYTES:
        raise EvaluatorError(f"the manifest is {len(manifest_bytes)} bytes, above {MAX_MANIFEST_BYTES}")
    signature = sign(private_pem, manifest_bytes).encode()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            for name, data in [(MANIFEST, manifest_bytes), (SIGNATURE, signature), *sorted(parts.items())]:
                tar.addfile(*_member(name, data))
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return sha256_hex(manifest_bytes)


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Bundle:
    """A bundle whose signature and every part's hash were checked."""

    id: str
    manifest: dict[str, Any]
    parts: dict[str, bytes] = field(repr=False)
    signature: str = field(repr=False)

    @property
    def signer_fingerprint(self) -> str:
        return self.manifest["signer"]["fingerprint"]

    def entry_json(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        return _json(self.parts[entry["entry"]], name=entry["entry"], max_bytes=MAX_MANIFEST_BYTES)

    def entry_runs(self, entry: Mapping[str, Any]) -> list[dict[str, Any]]:
        runs = gunzip_json(self.parts[entry["runs"]], name=entry["runs"])
        if not isinstance(runs, list):
            raise BundleError([f"{entry['runs']}: not a list of runs"])
        return runs


def _members(path: Path, max_bytes: int) -> tuple[dict[str, bytes], list[str]]:
    """Every member's bytes by name, in order of the file, and what was wrong with the file."""
    size = path.stat().st_size
    if size > max_bytes:
        raise BundleError([f"the file is {size} bytes; at most {max_bytes} are accepted"])
    members: dict[str, bytes] = {}
    order: list[str] = []
    try:
        with tarfile.open(path, "r:") as tar:
            for info in tar:
                if not info.isreg():
                    raise BundleError([f"{info.name!r}: not a regular file (links and folders are refused)"])
                if info.name in members:
                    raise BundleError([f"{info.name!r}: appears twice"])
                if info.name not in (MANIFEST, SIGNATURE) and not PART_NAME.match(info.name):
                    raise BundleError([f"{info.name!r}: not a part name this format accepts"])
                fh = tar.extractfile(info)
                assert fh is not None  # a regular file
                members[info.name] = fh.read()
                order.append(info.name)
    except tarfile.TarError as exc:
        raise BundleError([f"not a bundle (tar): {exc}"]) from None
    return members, order


def bundle_read(path: str | Path, *, trusted: Mapping[str, bytes], max_bytes: int) -> Bundle:
    """Read and check a bundle: its signature by a key in ``trusted`` (fingerprint → raw public
    key), then every part against the manifest. Raises BundleError naming every failure; returns
    the bundle only when nothing failed."""
    members, order = _members(Path(path), max_bytes)
    if order[:2] != [MANIFEST, SIGNATURE]:
        raise BundleError([f"the first two members must be {MANIFEST} and {SIGNATURE}, not {order[:2]}"])
    manifest_bytes = members.pop(MANIFEST)
    signature = members.pop(SIGNATURE).decode("ascii", errors="replace")
    # the signature first, on the raw bytes: nothing unauthenticated is parsed beyond its size
    signed_by = next(
        (fp for fp, raw in trusted.items() if signature_valid(raw, manifest_bytes, signature)), None
    )
    if signed_by is None:
        known = ", ".join(sorted(trusted)) or "none"
        raise BundleError(
            [f"{SIGNATURE}: the signature of {MANIFEST} does not verify with any key trusted here ({known})"]
        )
    manifest = _json(manifest_bytes, name=MANIFEST, max_bytes=MAX_MANIFEST_BYTES)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError([f"{MANIFEST}: not a {FORMAT} manifest"])
    signer = manifest.get("signer")
    if not isinstance(signer, dict) or signer.get("fingerprint") != signed_by:
        raise BundleError([f"{MANIFEST}: names another signer than the key {signed_by} that signed it"])
    declared = manifest.get("parts")
    if not isinstance(declared, dict):
        raise BundleError([f"{MANIFEST}: no parts"])
    problems = [f"{name}: in the file, not in the manifest" for name in sorted(set(members) - set(declared))]
    problems += [
        f"{name}: in the manifest, missing from the file" for name in sorted(set(declared) - set(members))
    ]
    for name in sorted(set(members) & set(declared)):
        want, data = declared[name], members[name]
        if (
            not isinstance(want, dict)
            or want.get("bytes") != len(data)
            or want.get("sha256") != sha256_hex(data)
        ):
            problems.append(f"{name}: its SHA-256 or size differs from the manifest's")
    if problems:
        raise BundleError(problems)
    return Bundle(id=sha256_hex(manifest_bytes), manifest=manifest, parts=members, signature=signature)


def trusted_keys(pems: Iterable[bytes]) -> dict[str, bytes]:
    """fingerprint → raw public key of each PEM public key."""
    out = {}
    for pem in pems:
        raw = public_key_raw(pem)
        out[fingerprint(raw)] = raw
    return out


# --------------------------------------------------------------------------- replication receipts

RECEIPT_FORMAT = "probebench-receipt/1"
#: what a receipt may list: its runs, and the characters of each run's label and reason
MAX_RECEIPT_RUNS = 2000
MAX_RECEIPT_TEXT = 300


def receipt_sign(private_pem: bytes, receipt: Mapping[str, Any]) -> str:
    """The signature (base64) of a receipt: Ed25519 over its canonical JSON."""
    return sign(private_pem, canonical_json(receipt))


def receipt_check(receipt: Any, signature: Any) -> str:
    """Check a receipt's shape and its signature by the key it names; returns that key's
    fingerprint. Raises BundleError naming the field at fault. A receipt ``agrees`` exactly when it
    compared at least one run and every run it lists agrees."""
    if not isinstance(receipt, dict) or receipt.get("format") != RECEIPT_FORMAT:
        raise BundleError([f"receipt: not a {RECEIPT_FORMAT} receipt"])
    for name in ("bundle", "artifact_sha256"):
        if not isinstance(receipt.get(name), str) or not re.fullmatch(r"[0-9a-f]{64}", receipt[name]):
            raise BundleError([f"receipt.{name}: 64 lower-case hex digits expected"])
    if not isinstance(receipt.get("probe"), str) or not re.fullmatch(
        r"[a-z0-9][a-z0-9-]{0,119}", receipt["probe"]
    ):
        raise BundleError(["receipt.probe: a probe slug expected"])
    if type(receipt.get("version")) is not int or not 1 <= receipt["version"] <= 999_999:
        raise BundleError(["receipt.version: an integer from 1 expected"])
    runs = receipt.get("runs")
    if not isinstance(runs, list) or not 1 <= len(runs) <= MAX_RECEIPT_RUNS:
        raise BundleError([f"receipt.runs: a list of 1 to {MAX_RECEIPT_RUNS} compared runs expected"])
    for i, run in enumerate(runs):
        where = f"receipt.runs[{i}]"
        if not isinstance(run, dict) or type(run.get("agrees")) is not bool:
            raise BundleError([f"{where}: an object with a boolean 'agrees' expected"])
        for name in ("run", "why"):
            if not isinstance(run.get(name, ""), str) or len(run.get(name, "")) > MAX_RECEIPT_TEXT:
                raise BundleError([f"{where}.{name}: text of at most {MAX_RECEIPT_TEXT} characters expected"])
        diff = run.get("max_abs_diff")
        if diff is not None and (type(diff) not in (int, float) or not 0 <= diff < float("inf")):
            raise BundleError([f"{where}.max_abs_diff: a finite number ≥ 0 or null expected"])
    agrees = all(r["agrees"] for r in runs)
    if receipt.get("verdict") != ("agrees" if agrees else "differs"):
        raise BundleError(["receipt.verdict: 'agrees' exactly when every run listed agrees, else 'differs'"])
    replicator = receipt.get("replicator")
    try:
        raw = base64.b64decode(str((replicator or {}).get("public_key", "")), validate=True)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise BundleError(
            ["receipt.replicator.public_key: a raw Ed25519 public key (32 bytes, base64) expected"]
        )
    if (
        not isinstance(signature, str)
        or len(signature) > 100
        or not signature_valid(raw, canonical_json(receipt), signature)
    ):
        raise BundleError(["signature: does not verify with the receipt's replicator key"])
    return fingerprint(raw)


# --------------------------------------------------------------------------- checks a reader makes


def context_problems(manifest: Mapping[str, Any], registry: Any) -> list[str]:
    """What of the context a bundle was measured in (``manifest["context"]``) ``registry`` does not
    have as it was: a protocol, a model's weights or a split file (by SHA-256); [] when nothing."""
    context = manifest.get("context") or {}
    problems = []
    for pid, sha in sorted((context.get("protocols") or {}).items()):
        if pid not in registry.protocols:
            problems.append(f"protocol {pid}: not in this registry")
        elif registry.protocols[pid].sha256 != sha:
            problems.append(f"protocol {pid}: its file differs here")
    for model, sha in sorted((context.get("models") or {}).items()):
        if model not in registry.models:
            problems.append(f"base model {model}: not in this registry")
        elif registry.models[model].weights_sha256 != sha:
            problems.append(f"base model {model}: its weights differ here")
    for task, pins in sorted((context.get("splits") or {}).items()):
        if task not in registry.tasks:
            problems.append(f"task {task}: not in this registry")
            continue
        for key, sha in sorted(pins.items()):
            split, _, model = key.partition("@")
            spec = registry.task(task).split_spec(split, model or None)
            if spec is None or spec.sha256 != sha:
                problems.append(f"task {task}: split {split} (on {model}) differs here from the bundle's")
    return problems


def example_diff(published: list[dict], here: list[dict], bound: Any) -> tuple[float | None, str]:
    """Two runs' per-example scores compared: the largest |Δs| (None when the rows or labels
    differ) and what disagrees ("" when every score is within ``bound(max |s| published)``, the
    protocol's per-example tolerance)."""
    a = {str(e["id"]): e for e in published}
    b = {str(e["id"]): e for e in here}
    if set(a) != set(b):
        return None, f"rows differ ({len(set(a) ^ set(b))} ids in one run only)"
    if any(int(a[i]["label"]) != int(b[i]["label"]) for i in a):
        return None, "labels differ"
    worst = max((abs(float(a[i]["score"]) - float(b[i]["score"])) for i in a), default=0.0)
    limit = bound(max((abs(float(e["score"])) for e in published), default=0.0))
    return worst, "" if worst <= limit else f"|Δs| {worst:.3g} above the tolerance {limit:.3g}"
