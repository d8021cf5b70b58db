"""The researcher's client: ``submit`` and ``reproduce`` against a ProbeBench server.

    python -m evaluator submit DIR --server URL --token T [--wait]
    python -m evaluator reproduce --server URL --probe SLUG[@vN]

``submit`` posts a probe directory (probe.safetensors + probe.json) to ``POST /api/v1/submissions``
and, with ``--wait``, follows ``GET /api/v1/submissions/<id>`` with a progress bar until the
submission is scored (then prints its board row) or failed. ``reproduce`` downloads a public
probe's artifact and metadata from the public API, checks the artifact's SHA-256 against the one
the API publishes, re-runs it locally through the ``evaluate`` command (same protocol, same tasks,
same transfer targets, the server's eval-awareness reference probe when it publishes one) and
judges every number the board shows against the local one within the protocol's tolerances:
exit status 1 on any disagreement, naming the task and the metric.

Standard library HTTP only (urllib), no Django; the model code is imported only by ``evaluate``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.cli import COMMANDS, command
from evaluator.errors import EvaluatorError

USER_AGENT = "probebench-client/1"
#: tolerances when the protocol file has none (SPEC issue 12: AUROC 0.002, ECE 0.005)
DEFAULT_TOLERANCES = {
    "auroc": 0.002,
    "auroc_ci": 0.002,
    "auroc_ea": 0.002,
    "auroc_ds": 0.002,
    "ece": 0.005,
    "brier": 0.005,
    "recall_at_1pct_fpr": 0.002,
    "rho_ce": 0.01,
}
#: what is compared per task (board ``tasks[]`` vs local ``tasks[t].metrics``)
TASK_METRICS = ("auroc", "auroc_ci", "auroc_ea", "auroc_ds", "ece", "brier", "recall_at_1pct_fpr")
#: what is compared on the aggregate (board ``score.measurements`` vs local ``aggregate``);
#: latency depends on the machine and is shown, never judged
AGGREGATE_METRICS = ("auroc", "auroc_ea", "auroc_ds", "ece", "brier", "recall_at_1pct_fpr", "rho_ce")
FINAL_STATUSES = ("scored", "failed", "rejected")


class ClientError(EvaluatorError):
    """The server could not be reached, or it refused the request."""


class Disagreement(dict):
    """A command result printed as JSON whose exit status is 1 (see evaluator.cli.main)."""

    exit_code = 1


# --------------------------------------------------------------------------- HTTP


@dataclass
class HttpResponse:
    status: int
    body: bytes
    headers: dict[str, str]
    url: str

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ClientError(
                f"{self.url} answered HTTP {self.status} with something other than JSON:"
                f" {_snippet(self.body)!r}; is --server the root URL of a ProbeBench server?"
            ) from None


def _snippet(body: bytes, n: int = 80) -> str:
    return " ".join(body[:n].decode("utf-8", errors="replace").split())


def server_url(raw: str) -> str:
    url = raw.strip().rstrip("/")
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ClientError(f"--server {raw!r} is not an http(s) URL (e.g. http://127.0.0.1:8000)")
    return url


def http_request(
    method: str,
    url: str,
    *,
    token: str | None = None,
    body: bytes | None = None,
    content_type: str | None = None,
    timeout: float = 60.0,
) -> HttpResponse:
    """One request; any HTTP status comes back as a response, transport failures as ClientError."""
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    if content_type:
        headers["Content-Type"] = content_type
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return HttpResponse(resp.status, resp.read(), dict(resp.headers.items()), url)
    except urllib.error.HTTPError as exc:
        return HttpResponse(exc.code, exc.read() or b"", dict((exc.headers or {}).items()), url)
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            raise ClientError(
                f"cannot connect to {url}: connection refused (is the server running?)"
            ) from None
        if isinstance(reason, socket.gaierror):
            raise ClientError(f"cannot connect to {url}: unknown host") from None
        raise ClientError(f"cannot connect to {url}: {reason}") from None
    except TimeoutError:
        raise ClientError(f"{url}: no answer within {timeout:.0f} s") from None
    except (BrokenPipeError, ConnectionResetError) as exc:
        if body is not None and len(body) > 1_000_000:
            raise ClientError(
                f"{url}: the server closed the connection while {len(body) / 1e6:.1f} MB were being"
                " sent (over its upload size limit?)"
            ) from None
        raise ClientError(f"{url}: connection failed: {exc}") from None
    except (ConnectionError, OSError) as exc:
        raise ClientError(f"{url}: connection failed: {exc}") from None


def _api_error(resp: HttpResponse, what: str) -> ClientError:
    """A one-line error for a non-2xx answer, with the server's field and message when it sent them."""
    if resp.status == 401:
        detail = _error_message(resp) or "authentication failed"
        return ClientError(f"{what}: the server refused the token (HTTP 401: {detail}); check --token")
    if resp.status == 403:
        return ClientError(f"{what}: forbidden (HTTP 403: {_error_message(resp) or 'no permission'})")
    if resp.status == 404 and not _is_json(resp):
        return ClientError(
            f"{what}: {resp.url} does not exist (HTTP 404); is --server the root URL of a ProbeBench server?"
        )
    message = _error_message(resp)
    if message is None:
        return ClientError(f"{what}: HTTP {resp.status} from {resp.url}: {_snippet(resp.body)!r}")
    return ClientError(f"{what} (HTTP {resp.status}): {message}")


def _is_json(resp: HttpResponse) -> bool:
    try:
        json.loads(resp.body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return True


def _error_message(resp: HttpResponse) -> str | None:
    """``field: message`` from ``{"error", "field"}`` (ProbeBench) or DRF's ``{"detail"}`` /
    ``{"<field>": ["message"]}`` bodies; None when the body is not JSON."""
    try:
        data = json.loads(resp.body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if isinstance(data, dict):
        if "error" in data:
            field = data.get("field")
            return f"field {field}: {data['error']}" if field else str(data["error"])
        if "detail" in data:
            return str(data["detail"])
        parts = [f"field {k}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in data.items()]
        return "; ".join(parts) or None
    return str(data)


def _get_json(url: str, *, what: str, token: str | None = None) -> Any:
    resp = http_request("GET", url, token=token)
    if resp.status != 200:
        raise _api_error(resp, what)
    return resp.json()


def multipart_encode(fields: dict[str, str], files: dict[str, tuple[str, bytes]]) -> tuple[bytes, str]:
    """``multipart/form-data`` body and its content type."""
    boundary = f"probebench-{uuid.uuid4().hex}"
    out = bytearray()
    for name, value in fields.items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n'.encode()
        out += b"Content-Type: text/plain; charset=utf-8\r\n\r\n" + value.encode() + b"\r\n"
    for name, (filename, data) in files.items():
        out += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        out += data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


# --------------------------------------------------------------------------- submit


def _submit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, help="probe directory: probe.safetensors + probe.json")
    p.add_argument("--server", required=True, help="root URL of the ProbeBench server")
    p.add_argument(
        "--token",
        default=os.environ.get("PROBEBENCH_TOKEN"),
        help="API token (your account page; default $PROBEBENCH_TOKEN)",
    )
    p.add_argument("--wait", action="store_true", help="follow the runs until scored or failed")
    p.add_argument("--poll", type=float, default=2.0, help="seconds between status polls (default 2)")
    p.add_argument("--timeout", type=float, default=3600.0, help="give up waiting after this many seconds")


def probe_dir_read(directory: Path) -> tuple[bytes, str]:
    """The artifact bytes and the metadata text of a probe directory."""
    if not directory.is_dir():
        raise ClientError(f"{directory}: not a directory (expected probe.safetensors + probe.json)")
    artifact, meta = directory / "probe.safetensors", directory / "probe.json"
    missing = [p.name for p in (artifact, meta) if not p.is_file()]
    if missing:
        raise ClientError(f"{directory}: missing {', '.join(missing)}")
    text = meta.read_text(encoding="utf-8")
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClientError(f"{meta}: not valid JSON: {exc}") from None
    return artifact.read_bytes(), text


def submission_wait(
    *, server: str, token: str, submission_id: int, poll: float, timeout: float
) -> dict[str, Any]:
    """Poll the submission until it is final; a progress bar on stderr shows its step."""
    url = f"{server}/api/v1/submissions/{submission_id}"
    from evaluator.train_cli import ProgressBar

    bar = ProgressBar(f"submission {submission_id}")
    deadline = time.monotonic() + timeout
    try:
        while True:
            detail = _get_json(url, what=f"submission {submission_id}", token=token)
            runs = detail.get("runs") or []
            done = sum(r.get("status") in ("succeeded", "failed") for r in runs)
            step = detail.get("step") or detail.get("status", "")
            bar(float(detail.get("progress") or 0.0), f"{step} ({done}/{len(runs)} runs)" if runs else step)
            if detail.get("status") in FINAL_STATUSES:
                return detail
            if time.monotonic() > deadline:
                raise ClientError(
                    f"submission {submission_id} still {detail.get('status')} after {timeout:.0f} s; follow it at {url}"
                )
            time.sleep(poll)
    finally:
        bar.close()


def board_row_get(*, server: str, probe: str, category: str) -> dict[str, Any] | None:
    """The probe's row on the public board (its category, the latest spec), or None."""
    query = urllib.parse.urlencode({"category": category, "q": probe, "limit": 1000})
    board = _get_json(f"{server}/api/v1/leaderboard?{query}", what="the board")
    return next((r for r in board.get("results", []) if r.get("probe") == probe), None)


@command("submit", _submit_args)
def run_submit(args: argparse.Namespace) -> dict:
    server = server_url(args.server)
    if not args.token:
        raise ClientError("no API token: pass --token or set PROBEBENCH_TOKEN (your account page makes one)")
    artifact, metadata = probe_dir_read(args.dir)
    body, content_type = multipart_encode(
        {"metadata": metadata}, {"artifact": ("probe.safetensors", artifact)}
    )
    resp = http_request(
        "POST", f"{server}/api/v1/submissions", token=args.token, body=body, content_type=content_type
    )
    if resp.status != 201:
        raise _api_error(resp, "submission refused")
    created = resp.json()
    if not args.wait:
        return created
    detail = submission_wait(
        server=server, token=args.token, submission_id=created["id"], poll=args.poll, timeout=args.timeout
    )
    if detail["status"] != "scored":
        reason = detail.get("failure_reason") or detail.get("rejection_reason") or "no reason given"
        failed = [
            f"{r['kind']} {r['task']}/{r['split']}: {r['error']}"
            for r in detail.get("runs", [])
            if r.get("error")
        ]
        raise ClientError(
            f"submission {created['id']} {detail['status']}: {reason}" + (f" ({failed[0]})" if failed else "")
        )
    category = json.loads(metadata).get("category", "")
    return {
        "id": detail["id"],
        "status": detail["status"],
        "probe": detail["probe"],
        "version": detail["version"],
        "artifact_sha256": detail["artifact_sha256"],
        "page": detail.get("page"),
        "reproduced": detail.get("reproduced"),
        "board_row": board_row_get(server=server, probe=detail["probe"], category=category),
    }


# --------------------------------------------------------------------------- reproduce


def _reproduce_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", required=True, help="root URL of the ProbeBench server")
    p.add_argument("--probe", required=True, help="probe id, optionally @vN for a version (default: latest)")
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")
    p.add_argument("--cache-dir", type=Path, default=None, help="model + activation cache")
    p.add_argument("--device", default=None, help="cpu, cuda, … (default: CUDA when available)")
    p.add_argument(
        "--reference-probe",
        type=Path,
        default=None,
        help="eval-awareness reference probe directory (default: the one the server publishes)",
    )
    p.add_argument("--keep", type=Path, default=None, help="keep the downloaded probe in this directory")


def probe_spec_parse(raw: str) -> tuple[str, int | None]:
    slug, _, version = raw.partition("@")
    number = None
    if version:
        digits = version[1:] if version[:1] in ("v", "V") else version
        if not digits.isdigit():
            raise ClientError(f"--probe {raw!r}: expected SLUG or SLUG@vN (e.g. my-probe@v2)")
        number = int(digits)
    if not slug:
        raise ClientError(f"--probe {raw!r}: expected SLUG or SLUG@vN")
    return slug, number


def probe_metadata_from_api(detail: dict[str, Any]) -> dict[str, Any]:
    """probe.json of the public version, from the probe API's fields."""
    v = detail["version"]
    return {
        "name": detail["name"],
        "category": detail["category"],
        "base_model": detail["base_model"],
        "layer": v["layer"],
        "position": v["position"],
        "input": v["input"],
        "output": v["output"],
        "license": v["license"],
        "authors": v.get("authors") or [],
        "paper_url": v.get("paper_url") or "",
        "description": v.get("description") or "",
        "training_data": v.get("training_data") or {},
        "declared_metrics": v.get("declared_metrics") or {},
        "recipe": v.get("recipe"),
    }


def artifact_download(*, server: str, path: str, expected_sha256: str, what: str) -> bytes:
    """The artifact's bytes, checked against the SHA-256 the API publishes."""
    resp = http_request("GET", urllib.parse.urljoin(server + "/", path.lstrip("/")), timeout=300)
    if resp.status != 200:
        raise _api_error(resp, f"downloading {what}")
    actual = hashlib.sha256(resp.body).hexdigest()
    if actual != expected_sha256:
        raise ClientError(
            f"{what}: the downloaded artifact's SHA-256 {actual} is not the published {expected_sha256}"
        )
    header = resp.headers.get("X-Artifact-SHA256")
    if header and header != expected_sha256:
        raise ClientError(
            f"{what}: the server sent X-Artifact-SHA256 {header}, the API publishes {expected_sha256}"
        )
    return resp.body


def probe_download(*, server: str, slug: str, number: int | None, dest: Path) -> dict[str, Any]:
    """Download a public version into ``dest`` (probe.safetensors + probe.json); its API detail."""
    query = f"?version={number}" if number is not None else ""
    resp = http_request("GET", f"{server}/api/v1/probes/{urllib.parse.quote(slug)}{query}")
    if resp.status == 404 and _is_json(resp):
        wanted = f"{slug}@v{number}" if number is not None else slug
        raise ClientError(f"no public probe {wanted} on {server}")
    if resp.status != 200:
        raise _api_error(resp, f"probe {slug}")
    detail = resp.json()
    version = detail["version"]
    data = artifact_download(
        server=server,
        path=version["artifact_url"],
        expected_sha256=version["artifact_sha256"],
        what=f"{slug} v{version['number']}",
    )
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "probe.safetensors").write_bytes(data)
    (dest / "probe.json").write_text(json.dumps(probe_metadata_from_api(detail), indent=2) + "\n")
    return detail


def protocol_tolerances(registry: Path | None, protocol: str | None) -> tuple[str | None, dict[str, float]]:
    """The protocol id and its tolerances (``registry/protocols/<id>.yaml``, keys ``tolerances`` or
    ``tolerance``), over the defaults; (None, defaults) when there is no protocol file."""
    import yaml

    root = registry or Path(__file__).resolve().parents[1]
    folder = root / "registry" / "protocols"
    candidates = [folder / f"{protocol}.yaml"] if protocol else sorted(folder.glob("p*.yaml"))[-1:]
    tolerances = dict(DEFAULT_TOLERANCES)
    for path in candidates:
        if not path.is_file():
            continue
        data = yaml.safe_load(path.read_text()) or {}
        block = data.get("tolerances") or data.get("tolerance") or {}
        for key, value in block.items() if isinstance(block, dict) else ():
            name = {"auroc_abs": "auroc", "ece_abs": "ece"}.get(key, key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                tolerances[name] = float(value)
        named = set(block) if isinstance(block, dict) else set()
        for metric, family in (
            ("auroc_ci", "auroc"),
            ("auroc_ea", "auroc"),
            ("auroc_ds", "auroc"),
            ("brier", "ece"),
        ):
            if metric not in named:  # an AUROC is judged like the AUROC, Brier like the ECE
                tolerances[metric] = tolerances[family]
        return str(data.get("id") or path.stem), tolerances
    return protocol, tolerances


def _tolerance(metric: str, tolerances: dict[str, float]) -> float:
    if metric in tolerances:
        return tolerances[metric]
    return tolerances["auroc"] if metric.startswith("auroc") else tolerances["ece"]


def _judge(task: str, metric: str, board: Any, local: Any, tolerances: dict[str, float]) -> dict[str, Any]:
    tol = _tolerance(metric, tolerances)
    row = {"task": task, "metric": metric, "board": board, "local": local, "tolerance": tol}
    if board is None and local is None:
        return row | {"diff": None, "verdict": "n/a"}
    if isinstance(board, bool) or isinstance(local, bool):
        return row | {"diff": None, "verdict": "agree" if board == local else "disagree"}
    if board is None or local is None or not all(isinstance(x, (int, float)) for x in (board, local)):
        return row | {"diff": None, "verdict": "disagree"}
    diff = abs(float(board) - float(local))
    ok = math.isfinite(diff) and diff <= tol + 1e-12
    return row | {"diff": diff, "verdict": "agree" if ok else "disagree"}


def numbers_compare(
    detail: dict[str, Any], local: dict[str, Any], tolerances: dict[str, float]
) -> list[dict]:
    """Every number the board shows for the version next to the local run's, with a verdict."""
    rows = []
    local_tasks = local.get("tasks") or {}
    for task in detail.get("tasks") or []:
        tid = task["task"]
        mine = (local_tasks.get(tid) or {}).get("metrics") or {}
        for metric in TASK_METRICS:
            board_v, local_v = task.get(metric), mine.get(metric)
            if metric == "auroc_ci":
                board_ci, local_ci = board_v or [None, None], local_v or [None, None]
                rows.append(_judge(tid, "auroc_ci_lo", board_ci[0], local_ci[0], tolerances))
                rows.append(_judge(tid, "auroc_ci_hi", board_ci[1], local_ci[1], tolerances))
            else:
                rows.append(_judge(tid, metric, board_v, local_v, tolerances))
    measured = ((detail.get("score") or {}).get("measurements")) or {}
    aggregate = local.get("aggregate") or {}
    for metric in AGGREGATE_METRICS:
        if metric in measured:
            rows.append(_judge("aggregate", metric, measured.get(metric), aggregate.get(metric), tolerances))
    board_repro = detail["version"].get("reproduced")
    local_repro = (local.get("reproduction") or {}).get("reproduced") if local.get("reproduction") else None
    if board_repro is not None or local_repro is not None:
        rows.append(_judge("aggregate", "reproduced", board_repro, local_repro, tolerances))
    return rows


def splits_check(*, server: str, registry: Path | None, category: str, tasks: list[str]) -> None:
    """The local registry's split files of ``tasks`` are the server's (same SHA-256), else a local
    run would measure other rows and every difference would look like a wrong board number."""
    from evaluator.registry import load_registry

    reg = load_registry(registry)
    query = urllib.parse.urlencode({"category": category})
    published = {t["slug"]: t for t in _get_json(f"{server}/api/v1/tasks?{query}", what="the task list")}
    for task_id in tasks:
        if task_id not in reg.tasks:
            raise ClientError(f"task {task_id} of the board is not in your registry ({reg.root}): update it")
        task = reg.task(task_id)
        for split in (published.get(task_id) or {}).get("splits") or []:
            # an on-policy task pins one set of files per base model
            mine = (
                task.splits_for(split.get("base_model")).get(split["name"])
                if task.on_policy or not split.get("base_model")
                else None
            )
            if mine is not None and mine.sha256 != split["sha256"]:
                raise ClientError(
                    f"task {task_id}: your {split['name']} split (SHA-256 {mine.sha256[:12]}…) is not the"
                    f" server's ({split['sha256'][:12]}…): use the registry the server measures with"
                )


def _evaluate_locally(argv: list[str]) -> dict[str, Any]:
    """Run the ``evaluate`` command (the one the CLI runs, with its defaults) on ``argv``."""
    from evaluator.cli import build_parser

    args = build_parser().parse_args(["evaluate", *argv])
    _, run = COMMANDS["evaluate"]
    return run(args)


def _evaluate_option_names() -> set[str]:
    from evaluator.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return {opt for action in sub.choices["evaluate"]._actions for opt in action.option_strings}  # noqa: SLF001


def _print_table(rows: list[dict[str, Any]]) -> None:
    def fmt(v):
        return "—" if v is None else (str(v) if isinstance(v, bool) else f"{v:.4f}")

    print(f"{'task':<28} {'metric':<20} {'board':>8} {'local':>8}  verdict", file=sys.stderr)
    for r in rows:
        print(
            f"{r['task'][:28]:<28} {r['metric']:<20} {fmt(r['board']):>8} {fmt(r['local']):>8}  {r['verdict']}",
            file=sys.stderr,
        )


@command("reproduce", _reproduce_args)
def run_reproduce(args: argparse.Namespace) -> dict:
    server = server_url(args.server)
    slug, number = probe_spec_parse(args.probe)
    with tempfile.TemporaryDirectory(prefix="probebench-reproduce-") as tmp:
        work = args.keep or Path(tmp)
        probe_dir = work / "probe"
        detail = probe_download(server=server, slug=slug, number=number, dest=probe_dir)
        version = detail["version"]
        measured = (detail.get("score") or {}).get("measurements") or {}
        protocol, tolerances = protocol_tolerances(
            args.registry, (detail.get("score") or {}).get("protocol") or measured.get("protocol")
        )
        options = _evaluate_option_names()
        argv = ["--probe", str(probe_dir), "--spec", detail["spec"]]
        tasks = [t["task"] for t in detail.get("tasks") or []]
        splits_check(server=server, registry=args.registry, category=detail["category"], tasks=tasks)
        if tasks:
            argv += ["--tasks", ",".join(tasks)]
        if args.registry:
            argv += ["--registry", str(args.registry)]
        if args.cache_dir:
            argv += ["--cache-dir", str(args.cache_dir)]
        if args.device:
            argv += ["--device", args.device]
        if "--protocol" in options and protocol:
            argv += ["--protocol", protocol]
        # otherwise evaluate's defaults are the workers' defaults (no dtype given on either side)
        targets = [t["model"] for t in detail.get("transfer") or []]
        argv += ["--transfer-targets", ",".join(targets)] if targets else ["--no-transfer"]
        if version.get("reproduced") is None:
            argv += ["--no-reproduce"]
        if "--latency-reps" in options:
            argv += ["--latency-reps", "20"]  # latency is the machine's, shown but never judged
        reference = args.reference_probe
        ref_info = detail.get("ea_reference")
        if reference is None and ref_info:
            reference = work / "reference"
            ref_detail = probe_download(
                server=server, slug=ref_info["probe"], number=ref_info.get("version"), dest=reference
            )
            published = ref_info.get("artifact_sha256")
            if published and published != ref_detail["version"]["artifact_sha256"]:
                raise ClientError(
                    f"the server names reference probe {ref_info['probe']} with SHA-256 {published},"
                    f" its probe page publishes {ref_detail['version']['artifact_sha256']}"
                )
            ref_info = {
                "probe": ref_info["probe"],
                "version": ref_detail["version"]["number"],
                "artifact_sha256": ref_detail["version"]["artifact_sha256"],
            }
        if reference is not None:
            argv += ["--reference-probe", str(reference)]
        elif "ea_reference" in detail and "--no-reference-probe" in options:
            argv += ["--no-reference-probe"]  # the board had none: its auroc_ea is imputed
        local = _evaluate_locally(argv)

    rows = numbers_compare(detail, local, tolerances)
    bad = [r for r in rows if r["verdict"] == "disagree"]
    _print_table(rows)
    result = {
        "server": server,
        "probe": slug,
        "version": version["number"],
        "artifact_sha256": version["artifact_sha256"],
        "artifact_verified": True,
        "spec": detail["spec"],
        "protocol": protocol,
        "tolerances": tolerances,
        "ea_reference": ref_info if args.reference_probe is None else str(args.reference_probe),
        "verdict": "agree" if not bad else "disagree",
        "disagreements": [
            f"{r['metric']} on {r['task']}: board {r['board']}, local {r['local']} (tolerance {r['tolerance']})"
            for r in bad
        ],
        "comparisons": rows,
        "board_total": (detail.get("score") or {}).get("total"),
        "local_total": (local.get("probe_score") or {}).get("total"),
        "latency_ms": {
            "board": measured.get("latency_ms"),
            "local": (local.get("aggregate") or {}).get("latency_ms"),
        },
    }
    if bad:
        first = bad[0]
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        print(
            f"error: the board and the local run disagree: {first['metric']} on {first['task']}"
            f" (board {first['board']}, local {first['local']}, tolerance {first['tolerance']}){more}",
            file=sys.stderr,
        )
        return Disagreement(result)
    return result
