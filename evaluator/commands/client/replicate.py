"""``python -m evaluator replicate --server URL [--probe SLUG]``: replicate a board's published
entries on this machine and post a signed receipt of what was found.

1. takes the newest bundle the server published (``/api/v1/bundles``; ``--bundle ID`` another) and
   checks it with the board's public key (``--board-key PEM``, else the server's
   ``/.well-known/probebench-board-key.pem``): the signature and every part's hash;
2. refuses when this checkout's split files, models or protocols are not the ones the bundle was
   measured on (a difference there is not a replication);
3. reruns, from each entry's artifact under the named protocol, every run the bundle published per
   example (the score and reference runs) and compares each example with the protocol's tolerance;
4. signs one receipt per entry with your key (``--key-file``, made on first use) and posts it to
   ``/api/v1/replications`` (token auth), unless ``--no-post``. A receipt is verdict ``differs``
   when any compared run disagrees; the board shows it as a disagreement.

The server is not trusted: every answer is size-capped and deadlined, redirects never leave its
origin, and nothing it sends is printed raw.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from evaluator import bundles
from evaluator.axes.run import MeasureSetup, measure_split
from evaluator.commands.base import cache_registry_json_args, default_cache_dir
from evaluator.commands.client.transport import (
    ClientError,
    api_error,
    get_json,
    http_request,
    printable,
    same_origin_url,
    server_args,
    server_connect,
)
from evaluator.core.harvest import HarvestConfig
from evaluator.core.models import load_model
from evaluator.core.probes import probe_from_tensors, read_artifact
from evaluator.data.registry.load import load_registry

#: what a replication reruns: the runs published with per-example scores
RERUN_KINDS = ("score", "reference")
KEY_BYTES = 16 * 1024


def replicate_args(p: argparse.ArgumentParser) -> None:
    server_args(p, token="API token: posting a receipt needs one (PROBEBENCH_TOKEN)")
    cache_registry_json_args(p)
    p.add_argument(
        "--probe", action="append", default=[], help="a probe slug (repeatable; default: every entry)"
    )
    p.add_argument("--bundle", default=None, help="a bundle id (default: the newest the server published)")
    p.add_argument("--board-key", type=Path, default=None, help="the board's public key (PEM)")
    p.add_argument(
        "--key-file",
        type=Path,
        default=None,
        help="your Ed25519 signing key (PEM; made on first use; default: var/replicator_ed25519.pem)",
    )
    p.add_argument("--no-post", action="store_true", help="compare and print, post nothing")
    p.add_argument("--device", default=None, help="cpu or cuda (default: CUDA when available)")
    p.add_argument("--max-bundle-mb", type=int, default=512, help="the largest bundle downloaded")


def _replicator_key(path: Path | None) -> bytes:
    return bundles.private_key_file(
        path or Path(os.environ.get("PROBEBENCH_DATA_DIR", "var")) / "replicator_ed25519.pem"
    )


def _bundle_fetch(server: str, args: argparse.Namespace, dest: Path) -> bundles.Bundle:
    listing = get_json(f"{server}/api/v1/bundles", what="the bundles")
    if not isinstance(listing, dict) or not isinstance(listing.get("results"), list):
        raise ClientError("the server's /api/v1/bundles is not a bundle list")
    published = [b for b in listing["results"] if isinstance(b, dict) and b.get("url")]
    chosen = next((b for b in published if not args.bundle or b.get("id") == args.bundle), None)
    if chosen is None:
        raise ClientError(f"the server lists no published bundle{f' {args.bundle}' if args.bundle else ''}")
    if args.board_key is not None:
        pem = args.board_key.read_bytes()[:KEY_BYTES]
    else:
        key_url = same_origin_url(server, listing.get("public_key_url"), what="the board's key")
        resp = http_request("GET", key_url, max_bytes=KEY_BYTES)
        if resp.status != 200:
            raise api_error(resp, "the board's key")
        pem = resp.body
    url = same_origin_url(server, chosen["url"], what="the bundle")
    resp = http_request("GET", url, max_bytes=args.max_bundle_mb << 20, timeout=600)
    if resp.status != 200:
        raise api_error(resp, "the bundle")
    dest.write_bytes(resp.body)
    return bundles.bundle_read(dest, trusted=bundles.trusted_keys([pem]), max_bytes=args.max_bundle_mb << 20)


def _context_check(bundle: bundles.Bundle, reg: Any) -> None:
    problems = bundles.context_problems(bundle.manifest, reg)
    if problems:
        raise ClientError(
            "this checkout differs from what the bundle was measured on ("
            + "; ".join(problems[:10])
            + "): check out the bundle's commit "
            + printable(str(bundle.manifest.get("commit", "")))[:40]
        )


def _entry_replicate(
    bundle: bundles.Bundle, entry: dict, reg: Any, args: argparse.Namespace, models: dict
) -> list[dict]:
    doc = bundle.entry_json(entry)
    data = bundle.parts[entry["artifact"]]
    metadata = {k: v for k, v in (doc["version"].get("metadata") or {}).items() if k != "probe"}
    if doc["version"].get("recipe") is not None:
        metadata["recipe"] = doc["version"]["recipe"]
    tensors, header = read_artifact(data, max_bytes=len(data) + 1)
    probe = probe_from_tensors(
        tensors,
        metadata,
        registry=reg,
        sha256=entry["artifact_sha256"],
        path=entry["artifact"],
        artifact_metadata=header,
    )
    cache_dir = args.cache_dir or default_cache_dir()
    out = []
    for run in bundle.entry_runs(entry):
        label = f"{run['kind']} {run['task']}/{run['split']} on {run['base_model']}"
        if run["kind"] not in RERUN_KINDS or not run.get("example_scores"):
            continue
        protocol = reg.protocol(run.get("protocol") or None)
        key = (run["base_model"], protocol.id)
        if key not in models:
            models[key] = load_model(
                run["base_model"], registry=reg, cache_dir=cache_dir, device=args.device, protocol=protocol
            )
        setup = MeasureSetup(reg, cache_dir, None, None, HarvestConfig.from_protocol(protocol), protocol)
        measured = measure_split(
            probe,
            task_id=run["task"],
            split=run["split"],
            setup=setup,
            lm=models[key],
            progress=lambda f, m: None,
        )
        diff, why = bundles.example_diff(
            run["example_scores"], measured.run.examples.to_records(), protocol.tolerances.score_bound
        )
        agrees = not why
        out.append({"run": label, "agrees": agrees, "max_abs_diff": diff, "why": why})
    return out


def run_replicate(args: argparse.Namespace) -> dict[str, Any]:
    server = server_connect(args, token_required=not args.no_post)
    reg = load_registry(args.registry)
    with tempfile.TemporaryDirectory(prefix="probebench-replicate-") as tmp:
        bundle = _bundle_fetch(server, args, Path(tmp) / "bundle.tar")
    _context_check(bundle, reg)
    entries = [e for e in bundle.manifest.get("entries") or [] if not args.probe or e["probe"] in args.probe]
    if not entries:
        raise ClientError(f"the bundle holds none of {', '.join(args.probe)}")
    private = _replicator_key(args.key_file)
    signer = bundles.signer_of(private)
    models: dict = {}
    done: list[dict[str, Any]] = []
    report = {"server": server, "bundle": bundle.id, "replicator": signer["fingerprint"], "entries": done}
    for entry in entries:
        runs = _entry_replicate(bundle, entry, reg, args, models)
        if not runs:
            done.append({"probe": entry["probe"], "verdict": "not compared", "posted": False})
            continue
        receipt = {
            "format": bundles.RECEIPT_FORMAT,
            "bundle": bundle.id,
            "probe": entry["probe"],
            "version": entry["version"],
            "artifact_sha256": entry["artifact_sha256"],
            "replicator": {"public_key": signer["public_key"]},
            "verdict": "agrees" if all(r["agrees"] for r in runs) else "differs",
            "runs": runs,
        }
        signature = bundles.receipt_sign(private, receipt)
        posted = None
        if not args.no_post:
            body = json.dumps({"receipt": receipt, "signature": signature}).encode()
            resp = http_request(
                "POST",
                f"{server}/api/v1/replications",
                token=args.token,
                body=body,
                content_type="application/json",
            )
            if resp.status != 201:
                raise api_error(resp, f"the receipt of {entry['probe']}")
            posted = True
        done.append(
            {
                "probe": entry["probe"],
                "verdict": receipt["verdict"],
                "runs": runs,
                "posted": bool(posted),
                "receipt": receipt,
                "signature": signature,
            }
        )
    return report


def replicate_summary(result: object) -> str:
    assert isinstance(result, dict)  # run_replicate returns its report
    lines = [
        f"bundle {result['bundle'][:16]} of {printable(result['server'])}, your key {result['replicator']}"
    ]
    for e in result["entries"]:
        runs = e.get("runs") or []
        worst = max((r["max_abs_diff"] for r in runs if r["max_abs_diff"] is not None), default=None)
        detail = f"{len(runs)} runs compared" + (f", largest |Δs| {worst:.2g}" if worst is not None else "")
        lines.append(
            f"{printable(e['probe'])}: {e['verdict']} ({detail}){'; receipt posted' if e['posted'] else ''}"
        )
        lines += [f"  {printable(r['run'])}: {printable(r['why'])}" for r in runs if not r["agrees"]]
    return "\n".join(lines) + "\n"
