"""``python -m evaluator verify-holdout QUARTER``: check a completed quarter's revealed seed and
holdouts against the commitment its board published before any run (``evaluator.data.reveal``).

The reveal comes from the board (``--server URL``: ``/api/v1/reevaluations/QUARTER/reveal``, read
with the client's capped, deadlined, same-origin HTTP) or from a file (``--reveal FILE``).
``--commitment FILE`` checks against a copy saved while the cycle ran (the cycle's API answer, or
its ``commitment``) instead of the one the reveal carries. Each holdout's pool is rebuilt from
this checkout: a sealed pool from the pinned source archives under ``--sources`` (``--download``
fetches missing ones with pip), a public one from the committed file; ``--pool TASK=FILE``
(``TASK@MODEL=FILE`` for an on-policy task) gives a pool file instead. Exit status 0 when every
check passes (a check this checkout cannot make is skipped, and said so), 1 naming each failure,
2 with one line for input it cannot read.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

from evaluator.commands.client.transport import (
    DEFAULT_REQUEST_TIMEOUT,
    ClientError,
    api_error,
    http_request,
    printable,
    server_url,
)
from evaluator.data.builders.pools import POOL_BUILDERS
from evaluator.data.builders.sources import DEFAULT_SOURCES_DIR, SourceError
from evaluator.data.holdouts import quarter_validate
from evaluator.data.pools import (
    PUBLIC,
    SEALED,
    Pool,
    forbidden_texts,
    pool_bytes,
    public_pool,
    read_rows_bytes,
    sealed_pool_build,
    source_context,
)
from evaluator.data.registry.load import Registry, load_registry
from evaluator.data.reveal import (
    FAIL,
    PASS,
    SKIP,
    Check,
    PoolFound,
    RevealedHoldout,
    RevealError,
    commitment_parse,
    reveal_check,
    reveal_parse,
)
from evaluator.errors import EvaluatorError
from evaluator.strict_json import JsonRejected, json_loads_strict

#: the most a reveal may hold (every holdout's rows; a few MB in practice)
MAX_REVEAL_BYTES = 64 * 2**20
MAX_DEPTH = 24


class VerifyResult(dict):
    """The command's JSON; ``exit_code`` 1 when a check fails."""

    exit_code = 0


def verify_holdout_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("quarter", help="the quarter, e.g. 2026Q4")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--server", help="root URL of the ProbeBench server that ran the cycle")
    source.add_argument("--reveal", type=Path, help="the reveal as a JSON file")
    p.add_argument("--commitment", type=Path, default=None, help="the commitment saved while the cycle ran")
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")
    p.add_argument(
        "--sources", type=Path, default=None, help="the pinned source archives (default: var/sources)"
    )
    p.add_argument("--download", action="store_true", help="fetch missing source archives with pip")
    p.add_argument(
        "--pool",
        action="append",
        default=[],
        metavar="TASK[@MODEL]=FILE",
        help="a pool file to check against instead of rebuilding it (repeatable)",
    )
    p.add_argument(
        "--request-timeout",
        type=float,
        default=DEFAULT_REQUEST_TIMEOUT,
        help=f"seconds the request may take (default {DEFAULT_REQUEST_TIMEOUT:.0f})",
    )
    p.add_argument("--json", action="store_true", help="print JSON even on a terminal")


def _json(data: bytes, what: str) -> Any:
    try:
        return json_loads_strict(data, max_bytes=MAX_REVEAL_BYTES, max_depth=MAX_DEPTH)
    except JsonRejected as exc:
        raise RevealError(f"{what}: {exc}") from None


def _read_file(path: Path, what: str) -> Any:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_REVEAL_BYTES + 1)
    except OSError as exc:
        raise EvaluatorError(f"{what} {path}: {exc.strerror or exc}") from None
    return _json(data, f"{what} {path}")


def _fetch(server: str, quarter: str, timeout: float) -> Any:
    url = f"{server_url(server)}/api/v1/reevaluations/{quarter}/reveal"
    if not timeout > 0:
        raise ClientError("--request-timeout must be a positive number of seconds")
    resp = http_request("GET", url, max_bytes=MAX_REVEAL_BYTES, timeout=timeout)
    if resp.status != 200:
        raise api_error(resp, f"the reveal of {quarter}")
    return _json(resp.body, f"the reveal from {url}")


def _pool_files(specs: list[str]) -> dict[tuple[str, str], Path]:
    out = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        task, _, model = name.partition("@")
        if not sep or not task or not path:
            raise EvaluatorError(f"--pool {spec!r}: expected TASK=FILE or TASK@MODEL=FILE")
        out[(task, model)] = Path(path)
    return out


class _Pools:
    """Rebuilds each holdout's pool once (a sealed pool serves every model of its task)."""

    def __init__(
        self, registry: Registry, sources_dir: Path, download: bool, files: dict[tuple[str, str], Path]
    ):
        self.registry, self.sources_dir, self.download, self.files = registry, sources_dir, download, files
        self._sealed: dict[str, list[dict] | str] = {}

    def __call__(self, h: RevealedHoldout) -> PoolFound:
        if h.task not in self.registry.tasks:
            return PoolFound(skip=f"{h.task} is not in this checkout's tasks.yaml")
        if (h.task, h.model) in self.files:
            return self._file(h, self.files[(h.task, h.model)])
        if h.pool == PUBLIC:
            try:
                pool = public_pool(self.registry, h.task, h.model, note="")
            except (EvaluatorError, OSError) as exc:
                return PoolFound(skip=f"the committed pool cannot be read here: {exc}")
            return self._found(pool)
        rows = self._sealed_rows(h.task)
        if isinstance(rows, str):
            return PoolFound(skip=rows)
        sha256 = hashlib.sha256(pool_bytes(rows)).hexdigest()
        return self._found(Pool(h.task, h.model, SEALED, rows, sha256))

    def _sealed_rows(self, task: str) -> list[dict] | str:
        if task not in self._sealed:
            if task not in POOL_BUILDERS:
                self._sealed[task] = f"this checkout has no sealed-pool builder for {task}"
            else:
                ctx = source_context(self.registry, self.sources_dir, download=self.download)
                try:
                    self._sealed[task] = sealed_pool_build(self.registry, task, ctx)
                except SourceError as exc:
                    hint = "" if self.download else " (--download fetches the pinned archives with pip)"
                    self._sealed[task] = f"the sealed pool cannot be rebuilt here: {exc}{hint}"
        return self._sealed[task]

    def _file(self, h: RevealedHoldout, path: Path) -> PoolFound:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise EvaluatorError(f"--pool {path}: {exc.strerror or exc}") from None
        rows = read_rows_bytes(data, where=str(path))
        kind = h.pool if h.pool in (PUBLIC, SEALED) else PUBLIC
        return self._found(Pool(h.task, h.model, kind, rows, hashlib.sha256(data).hexdigest()))

    def _found(self, pool: Pool) -> PoolFound:
        return PoolFound(
            rows=pool.rows, sha256=pool.sha256, forbidden_texts=forbidden_texts(self.registry, pool)
        )


def run_verify_holdout(args: argparse.Namespace) -> VerifyResult:
    quarter = quarter_validate(args.quarter)
    if args.server:
        doc = _fetch(args.server, quarter, args.request_timeout)
        source = f"{server_url(args.server)}/api/v1/reevaluations/{quarter}/reveal"
    else:
        doc = _read_file(args.reveal, "--reveal")
        source = str(args.reveal)
    reveal = reveal_parse(doc, quarter=quarter)
    saved = None
    if args.commitment is not None:
        saved = commitment_parse(
            _read_file(args.commitment, "--commitment"), f"--commitment {args.commitment}"
        )
    registry = load_registry(args.registry)
    sources = args.sources or registry.root / DEFAULT_SOURCES_DIR
    pools = _Pools(registry, sources, args.download, _pool_files(args.pool))
    checks = reveal_check(reveal, pool_for=pools, commitment=saved)
    if saved is not None and saved != reveal.commitment:
        checks.insert(0, _commitment_differs(saved, reveal.commitment))
    result = VerifyResult(
        quarter=quarter,
        source=source,
        ok=not any(c.status == FAIL for c in checks),
        counts={s: sum(c.status == s for c in checks) for s in (PASS, FAIL, SKIP)},
        checks=[c.to_dict() for c in checks],
    )
    result.exit_code = 0 if result["ok"] else 1
    return result


def _commitment_differs(saved: dict, carried: dict) -> Check:
    keys = sorted(k for k in set(saved) | set(carried) if saved.get(k) != carried.get(k))
    return Check(
        "commitment",
        "",
        FAIL,
        f"the reveal carries another commitment than the one saved (differs in: {', '.join(keys)});"
        " the checks below use the saved one",
    )


def verify_holdout_summary(result: object) -> str:
    assert isinstance(result, dict)
    lines = [f"verify-holdout {result['quarter']} ({printable(result['source'])})"]
    for c in result["checks"]:
        mark = {PASS: "pass", FAIL: "FAIL", SKIP: "skip"}[c["status"]]
        target = f" {c['target']}" if c["target"] else ""
        # task names and reasons may quote the untrusted reveal: never printed raw to a terminal
        lines.append(printable(f"  {mark}  {c['check']}{target}: {c['detail']}"))
    n = result["counts"]
    verdict = "every check passes" if result["ok"] else f"{n[FAIL]} check(s) FAIL"
    lines.append(f"{verdict} ({n[PASS]} passed, {n[FAIL]} failed, {n[SKIP]} skipped)")
    return "\n".join(lines) + "\n"
