"""``python -m evaluator verify-bundle``: check a result bundle offline, with a public key and
this package only (no database, no model): the signature, then every part's hash."""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluator import bundles
from evaluator.errors import EvaluatorError

MAX_BYTES = 1 << 31


def verify_bundle_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=Path, help="the bundle file (.tar)")
    p.add_argument(
        "--key",
        type=Path,
        action="append",
        required=True,
        help="a trusted public key (PEM; a board serves its own at /.well-known/probebench-board-key.pem)",
    )
    p.add_argument("--json", action="store_true", help="print JSON even on a terminal")


def run_verify_bundle(args: argparse.Namespace) -> dict:
    if not args.path.is_file():
        raise EvaluatorError(f"{args.path}: no such file")
    pems = []
    for key in args.key:
        try:
            pems.append(key.read_bytes())
        except OSError as exc:
            raise EvaluatorError(f"--key {key}: {exc.strerror}") from None
    bundle = bundles.bundle_read(args.path, trusted=bundles.trusted_keys(pems), max_bytes=MAX_BYTES)
    m = bundle.manifest
    return {
        "bundle": bundle.id,
        "verified": True,
        "board": (m.get("board") or {}).get("name", ""),
        "signer": bundle.signer_fingerprint,
        "created_at": m.get("created_at"),
        "commit": m.get("commit"),
        "entries": [
            {"probe": e["probe"], "version": e["version"], "runs": e["run_count"]}
            for e in m.get("entries", [])
        ],
        "parts": len(m.get("parts", {})),
    }


def verify_bundle_summary(result: object) -> str:
    assert isinstance(result, dict)
    return (
        f"bundle {result['bundle']}: verified (signature by key {result['signer']}, {result['parts']} parts)\n"
        f"published by {result['board']} on {result['created_at']} at commit {result['commit'] or 'unknown'}:"
        f" {len(result['entries'])} entries\n"
    )
