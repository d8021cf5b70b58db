"""The researcher's client: ``submit``, ``follow`` and ``reproduce`` against a ProbeBench server.

    python -m evaluator submit DIR --server URL --token T [--wait]
    python -m evaluator follow ID --server URL --token T
    python -m evaluator reproduce --server URL --probe SLUG[@vN] [--token T]

``submit`` posts a probe directory (probe.safetensors + probe.json) to ``POST /api/v1/submissions``
and prints the submission's id, API URL, page and ``follow`` command; with ``--wait`` (or later,
``follow ID``) it polls ``GET /api/v1/submissions/<id>``, printing the status, the queue position
and the server's ETA, until the submission is scored (then prints its board row) or failed.
``reproduce`` downloads a public probe's artifact and metadata from the public API, checks the
artifact's SHA-256 against the one the API publishes, re-runs it locally through the ``evaluate``
command (same protocol, same tasks, same transfer targets, the server's eval-awareness reference
probe when it publishes one) and judges every number the board shows against the local one within
the protocol's tolerances: exit status 1 on any disagreement, naming the task and the metric. For
the token owner's probe that is not public yet it says how far its submission has got.

The server is not trusted (see ``http_request``): size caps, one deadline per request, same-origin
redirects without the token, http(s) only, ids checked before use, its text printed escaped, and
a one-line ``error:`` on any malformed answer. Standard library HTTP only (urllib), no Django; the
model code is imported only by ``evaluate``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import json
import math
import os
import re
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.commands import train_cli
from evaluator.data.registry import load_registry
from evaluator.errors import EvaluatorError
from evaluator.metrics import metric_table

USER_AGENT = "probebench-client/1"
#: tolerances when the protocol file has none (the metric table's defaults, per judged metric;
#: the AUROC's interval is judged like the AUROC)
DEFAULT_TOLERANCES = metric_table.tolerances_for(metric_table.DEFAULT_TOLERANCES)
DEFAULT_TOLERANCES["auroc_ci"] = DEFAULT_TOLERANCES["auroc"]
FINAL_STATUSES = ("scored", "failed", "rejected")
#: what an id the server names may look like before the client uses it in a URL or an argument
IDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


class ClientError(EvaluatorError):
    """The server could not be reached, or it refused the request, or its answer is unusable.

    The message is printed as one line with every control character escaped: it may quote the
    server's text, which must not reach the terminal raw (escape sequences, line breaks)."""

    def __init__(self, message: str):
        super().__init__(printable(message))


class Disagreement(dict):
    """A command result printed as JSON whose exit status is 1 (see evaluator.commands.cli.main)."""

    exit_code = 1


def printable(text: str) -> str:
    """``text`` with every non-printable character (C0/C1 controls such as ESC, line breaks,
    bidirectional and other format characters) written as its Python escape, e.g. ``\x1b``."""
    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(text)
    )


# --------------------------------------------------------------------------- HTTP
#
# The client trusts no server: every answer is read in chunks up to a size cap, every request
# has an overall deadline (a server that drips one byte at a time still times out), a redirect
# is followed only within the same origin and never carries the token, only http(s) URLs are
# opened (no file:, ftp: or data: handler is installed), and a malformed answer is a one-line
# ClientError, never a traceback.

#: the most a JSON answer may hold (the board with 1000 rows is well under it)
MAX_JSON_BYTES = 16 * 2**20
#: the most a probe artifact download may hold (the server's own default limit is 50 MB)
MAX_ARTIFACT_BYTES = 256 * 2**20
#: seconds one request may take from connecting to the last byte of the answer
DEFAULT_REQUEST_TIMEOUT = 300.0
_CHUNK = 64 * 1024
#: this command's deadline per request (``--request-timeout``)
_request_timeout = DEFAULT_REQUEST_TIMEOUT


@dataclass
class HttpResponse:
    status: int
    body: bytes
    headers: dict[str, str]
    url: str

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            raise ClientError(
                f"{self.url} answered HTTP {self.status} with something other than JSON:"
                f" {_snippet(self.body)!r}; is --server the root URL of a ProbeBench server?"
            ) from None

    def json_object(self, what: str) -> dict[str, Any]:
        """The body as a JSON object; anything else is a malformed answer."""
        data = self.json()
        if not isinstance(data, dict):
            raise ClientError(f"{what}: malformed answer from {self.url}: expected a JSON object")
        return data


def _snippet(body: bytes, n: int = 80) -> str:
    return printable(" ".join(body[:n].decode("utf-8", errors="replace").split()))


def _origin(url: str) -> tuple[str, str, int | None]:
    parsed = urllib.parse.urlsplit(url)
    scheme = parsed.scheme.lower()
    try:
        port = parsed.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = None
    return scheme, (parsed.hostname or "").lower(), port


def server_url(raw: str) -> str:
    url = raw.strip().rstrip("/")
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ClientError(f"--server {raw!r} is not an http(s) URL (e.g. http://127.0.0.1:8000)")
    return url


def same_origin_url(server: str, link: Any, *, what: str) -> str:
    """A link the server gave (absolute or a path), resolved against ``server``; refused unless it
    is http(s) on the server's own origin (a ``file:`` URL, another scheme or another host)."""
    if not isinstance(link, str) or not link:
        raise ClientError(f"{what}: malformed answer from {server}: no link")
    url = urllib.parse.urljoin(server + "/", link)
    if _origin(url)[0] not in ("http", "https"):
        raise ClientError(
            f"{what}: the server names a {_origin(url)[0] or 'schemeless'}: URL; only http(s) is opened"
        )
    if _origin(url) != _origin(server):
        raise ClientError(f"{what}: the server names a URL on another origin ({_origin(url)[1]}); refused")
    return url


class _Deadline:
    """Shuts every socket of one request at the deadline, so that no read can outlive it."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                self._shut(sock)
        return sock

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    """http(s) only, every socket under ``deadline``, redirects within the origin without the token."""

    def connect(*args: Any, **kwargs: Any) -> socket.socket:
        return deadline.watch(socket.create_connection(*args, **kwargs))

    class Http(http.client.HTTPConnection):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self._create_connection = connect

    class Https(http.client.HTTPSConnection):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self._create_connection = connect

    class HttpHandler(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(Http, req)

    class HttpsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(Https, req, context=self._context)  # type: ignore[attr-defined]

    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        HttpHandler(),
        HttpsHandler(),
        _SameOriginRedirects(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the same origin (scheme, host, port), and without the token."""

    max_redirections = 5

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        target = urllib.parse.urljoin(req.full_url, newurl)
        if _origin(target) != _origin(req.full_url):
            fp.close()
            scheme, host, port = _origin(target)
            raise ClientError(
                f"{req.full_url} redirects to another origin ({scheme}://{host}:{port}); refused"
                " (the token is never sent elsewhere)"
            )
        new = super().redirect_request(req, fp, code, msg, headers, target)
        if new is not None:
            new.remove_header("Authorization")
        return new


def _read_capped(resp: Any, *, url: str, cap: int, deadline: _Deadline) -> bytes:
    """The body, read chunk by chunk; refused once it passes ``cap`` bytes."""
    declared = resp.headers.get("Content-Length") if resp.headers else None
    if declared and declared.isdigit() and int(declared) > cap:
        raise ClientError(f"{url}: the answer would be {int(declared):,} bytes, over the client's {cap:,}")
    out = bytearray()
    read = getattr(resp, "read1", None) or resp.read
    while True:
        chunk = read(_CHUNK)
        if not chunk:
            break
        out += chunk
        if len(out) > cap:
            raise ClientError(
                f"{url}: the answer is over the client's limit of {cap:,} bytes; stopped reading"
            )
    if deadline.expired:
        raise ClientError(f"{url}: no complete answer within {deadline.seconds:.0f} s")
    return bytes(out)


def http_request(
    method: str,
    url: str,
    *,
    token: str | None = None,
    body: bytes | None = None,
    content_type: str | None = None,
    timeout: float | None = None,
    max_bytes: int = MAX_JSON_BYTES,
) -> HttpResponse:
    """One request; any HTTP status comes back as a response, transport failures as ClientError.

    ``timeout`` bounds the whole request (connect, send, every byte of the answer), ``max_bytes``
    the answer's size; the default deadline is the command's ``--request-timeout``."""
    timeout = timeout or _request_timeout
    if _origin(url)[0] not in ("http", "https"):
        raise ClientError(f"{url}: only http(s) URLs are opened")
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    if content_type:
        headers["Content-Type"] = content_type
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    deadline = _Deadline(timeout)
    try:
        try:
            with _opener(deadline).open(req, timeout=timeout) as resp:
                data = _read_capped(resp, url=url, cap=max_bytes, deadline=deadline)
                return HttpResponse(resp.status, data, dict(resp.headers.items()), url)
        except urllib.error.HTTPError as exc:
            try:
                data = _read_capped(exc.fp, url=url, cap=max_bytes, deadline=deadline) if exc.fp else b""
            finally:
                exc.close()
            return HttpResponse(exc.code, data, dict((exc.headers or {}).items()), url)
    except ClientError:
        raise
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        if deadline.expired or isinstance(exc, TimeoutError):
            raise ClientError(f"{url}: no complete answer within {timeout:.0f} s") from None
        raise _transport_error(url, exc, body) from None
    finally:
        deadline.cancel()


def _transport_error(url: str, exc: Exception, body: bytes | None) -> ClientError:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ConnectionRefusedError):
        return ClientError(f"cannot connect to {url}: connection refused (is the server running?)")
    if isinstance(reason, socket.gaierror):
        return ClientError(f"cannot connect to {url}: unknown host")
    if isinstance(reason, TimeoutError):
        return ClientError(f"cannot connect to {url}: timed out")
    if (
        isinstance(reason, (BrokenPipeError, ConnectionResetError))
        and body is not None
        and len(body) > 1_000_000
    ):
        return ClientError(
            f"{url}: the server closed the connection while {len(body) / 1e6:.1f} MB were being"
            " sent (over its upload size limit?)"
        )
    if isinstance(exc, urllib.error.URLError):
        return ClientError(f"cannot connect to {url}: {reason}")
    return ClientError(f"{url}: connection failed: {exc}")


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
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return False
    return True


def _error_message(resp: HttpResponse) -> str | None:
    """``field: message`` from ``{"error", "field"}`` (ProbeBench) or DRF's ``{"detail"}`` /
    ``{"<field>": ["message"]}`` bodies; None when the body is not JSON."""
    try:
        data = json.loads(resp.body)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
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


@contextlib.contextmanager
def _server_answer(what: str, url: str) -> Iterator[None]:
    """Turns a malformed answer (a missing key, a wrong type) met while reading it into one line."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ClientError(f"{what}: malformed answer from {url} ({detail})") from None


def _ident(value: Any, what: str) -> str:
    """A name the server gave that the client passes on (a probe, task, model or spec id)."""
    if not isinstance(value, str) or not IDENT.fullmatch(value):
        raise ClientError(f"the server's {what} {value!r} is not an id (letters, digits, '-', '_', '.')")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClientError(f"the server's {what} {value!r} is not an integer")
    return value


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


def _server_args(p: argparse.ArgumentParser, *, token: str) -> None:
    p.add_argument("--server", required=True, help="root URL of the ProbeBench server")
    p.add_argument("--token", default=os.environ.get("PROBEBENCH_TOKEN"), help=token)
    p.add_argument(
        "--request-timeout",
        type=float,
        default=DEFAULT_REQUEST_TIMEOUT,
        help=f"seconds one HTTP request may take, whole answer included (default {DEFAULT_REQUEST_TIMEOUT:.0f})",
    )


def _follow_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--poll", type=float, default=2.0, help="seconds between status polls (default 2)")
    p.add_argument("--timeout", type=float, default=3600.0, help="give up waiting after this many seconds")


def submit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, help="probe directory: probe.safetensors + probe.json")
    _server_args(p, token="API token (your account page; default $PROBEBENCH_TOKEN)")
    p.add_argument("--wait", action="store_true", help="follow the runs until scored or failed")
    _follow_options(p)


def follow_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", type=int, help="the submission's id (printed by submit)")
    _server_args(p, token="API token of the submission's owner (default $PROBEBENCH_TOKEN)")
    _follow_options(p)


def _connect(args: argparse.Namespace, *, token_required: bool) -> str:
    """The server's root URL; the request deadline set for this command."""
    global _request_timeout
    if not args.request_timeout > 0:
        raise ClientError("--request-timeout must be a positive number of seconds")
    _request_timeout = args.request_timeout
    server = server_url(args.server)
    if token_required and not args.token:
        raise ClientError("no API token: pass --token or set PROBEBENCH_TOKEN (your account page makes one)")
    return server


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


def eta_text(seconds: Any) -> str:
    """``4 min 10 s`` for a number of seconds; ``unknown`` for null (no measured run time yet)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return "unknown"
    total = int(round(max(seconds, 0.0)))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def submission_progress_line(detail: dict[str, Any]) -> str:
    """One line on where a submission stands: its status, queue position, runs done and ETA."""
    runs = detail.get("runs")
    runs = runs if isinstance(runs, list) else []
    done = sum(isinstance(r, dict) and r.get("status") in ("succeeded", "failed") for r in runs)
    status = str(detail.get("status") or "unknown")
    parts = [status]
    position = detail.get("queue_position")
    if isinstance(position, int) and not isinstance(position, bool):
        parts.append("next in the queue" if position == 1 else f"queue position {position}")
    if runs:
        parts.append(f"{done}/{len(runs)} runs done")
    step = detail.get("step")
    if isinstance(step, str) and step and status not in FINAL_STATUSES:
        parts.append(step[:60])
    if status not in FINAL_STATUSES:
        parts.append(f"ETA {eta_text(detail.get('eta_seconds'))}")
    return printable(" · ".join(parts))


class _StatusLine:
    """The submission's progress on stderr: one line rewritten in place on a terminal, a new line
    whenever the status, the queue position or the runs done change otherwise (logs, pipes)."""

    def __init__(self, label: str):
        self.label, self.tty = label, sys.stderr.isatty()
        self.last_key: tuple | None = None
        self.width = 0

    def show(self, detail: dict[str, Any]) -> None:
        line = f"{self.label}: {submission_progress_line(detail)}"
        if self.tty:
            print("\r" + line.ljust(self.width), end="", file=sys.stderr, flush=True)
            self.width = len(line)
            return
        runs = detail.get("runs")
        if not isinstance(runs, list):
            runs = []
        done = sum(isinstance(r, dict) and r.get("status") in ("succeeded", "failed") for r in runs)
        key = (detail.get("status"), detail.get("queue_position"), len(runs), done)
        if key != self.last_key:
            print(line, file=sys.stderr, flush=True)
            self.last_key = key

    def close(self) -> None:
        if self.tty and self.width:
            print(file=sys.stderr, flush=True)


def _settled(detail: dict[str, Any]) -> bool:
    """A scored submission is settled once its progress reaches 1 (its Score then holds the
    secondary axes too); a server that sends no usable progress is not waited on."""
    progress = detail.get("progress")
    if detail.get("status") != "scored" or isinstance(progress, bool):
        return True
    if not isinstance(progress, (int, float)) or not math.isfinite(progress):
        return True
    return progress >= 1.0


def submission_wait(
    *, server: str, token: str, submission_id: int, poll: float, timeout: float
) -> dict[str, Any]:
    """Poll the submission until it is final and, once scored, until its secondary runs have
    finished too; a progress bar on stderr shows its step."""
    url = f"{server}/api/v1/submissions/{submission_id}"
    line = _StatusLine(f"submission {submission_id}")
    deadline = time.monotonic() + timeout
    try:
        while True:
            resp = http_request("GET", url, token=token)
            if resp.status == 404 and _is_json(resp):
                raise ClientError(
                    f"no submission {submission_id} of this token's user on {server}"
                    " (a submission is visible to its owner and to staff)"
                )
            if resp.status != 200:
                raise _api_error(resp, f"submission {submission_id}")
            detail = resp.json_object(f"submission {submission_id}")
            line.show(detail)
            # a probe is scored once its primary runs are done; its secondary runs (transfer,
            # reproduce, steer) finish after: follow them too, so the printed row is complete (its
            # progress reaches 1 once the Score has been recomputed with the last of them)
            if detail.get("status") in FINAL_STATUSES and _settled(detail):
                return detail
            if time.monotonic() > deadline:
                raise ClientError(
                    f"submission {submission_id} still {detail.get('status')} after {timeout:.0f} s;"
                    f" follow it again with: python -m evaluator follow {submission_id} --server {server}"
                )
            time.sleep(poll)
    finally:
        line.close()


def board_row_get(*, server: str, probe: str, category: str) -> dict[str, Any] | None:
    """The probe's row on the public board (its category, the latest spec), or None."""
    query = urllib.parse.urlencode({"category": category, "q": probe, "limit": 1000})
    url = f"{server}/api/v1/leaderboard?{query}"
    board = _get_json(url, what="the board")
    rows = board.get("results") if isinstance(board, dict) else None
    if not isinstance(rows, list):
        raise ClientError(f"the board: malformed answer from {url} (no results list)")
    return next((r for r in rows if isinstance(r, dict) and r.get("probe") == probe), None)


def submission_outcome(*, server: str, detail: dict[str, Any]) -> dict[str, Any]:
    """A final submission: its scored summary and board row, or a ClientError saying why not."""
    url = f"{server}/api/v1/submissions"
    with _server_answer("the submission", url):
        sid = _int(detail["id"], "submission id")
        if detail["status"] != "scored":
            reason = detail.get("failure_reason") or detail.get("rejection_reason") or "no reason given"
            failed = [
                f"{r['kind']} {r['task']}/{r['split']}: {r['error']}"
                for r in detail.get("runs") or []
                if r.get("error")
            ]
            raise ClientError(
                f"submission {sid} {detail['status']}: {reason}" + (f" ({failed[0]})" if failed else "")
            )
        probe = _ident(detail["probe"], "probe id")
        category = _ident(detail.get("category") or "", "category") if detail.get("category") else None
        out = {
            "id": sid,
            "status": detail["status"],
            "probe": probe,
            "version": _int(detail["version"], "version"),
            "artifact_sha256": str(detail["artifact_sha256"]),
            "page": detail.get("page"),
            "reproduced": detail.get("reproduced"),
        }
    out["board_row"] = board_row_get(server=server, probe=probe, category=category) if category else None
    return out


def run_submit(args: argparse.Namespace) -> dict:
    server = _connect(args, token_required=True)
    artifact, metadata = probe_dir_read(args.dir)
    body, content_type = multipart_encode(
        {"metadata": metadata}, {"artifact": ("probe.safetensors", artifact)}
    )
    url = f"{server}/api/v1/submissions"
    resp = http_request("POST", url, token=args.token, body=body, content_type=content_type)
    if resp.status != 201:
        raise _api_error(resp, "submission refused")
    created = resp.json_object("the new submission")
    with _server_answer("the new submission", url):
        sid = _int(created["id"], "submission id")
        follow = f"python -m evaluator follow {sid} --server {server}"
        out = {
            "id": sid,
            "status": str(created["status"]),
            "url": same_origin_url(
                server, created.get("url") or f"/api/v1/submissions/{sid}", what="its API URL"
            ),
            "page": same_origin_url(server, created["page"], what="its page")
            if created.get("page")
            else None,
            "follow": follow,
        }
    print(printable(f"submitted: submission {sid} ({out['status']})"), file=sys.stderr)
    print(printable(f"  API:    {out['url']}  (with the token)"), file=sys.stderr)
    if out["page"]:
        print(printable(f"  page:   {out['page']}  (signed in as its owner)"), file=sys.stderr)
    print(printable(f"  follow: {follow} --token …"), file=sys.stderr)
    if not args.wait:
        return out
    detail = submission_wait(
        server=server, token=args.token, submission_id=sid, poll=args.poll, timeout=args.timeout
    )
    return submission_outcome(server=server, detail=detail)


def run_follow(args: argparse.Namespace) -> dict:
    """Re-attach to a submission: its progress until it is final, then as ``submit --wait``."""
    server = _connect(args, token_required=True)
    if args.id < 1:
        raise ClientError(f"submission id {args.id}: expected a positive integer")
    detail = submission_wait(
        server=server, token=args.token, submission_id=args.id, poll=args.poll, timeout=args.timeout
    )
    return submission_outcome(server=server, detail=detail)


# --------------------------------------------------------------------------- reproduce


def reproduce_args(p: argparse.ArgumentParser) -> None:
    _server_args(
        p,
        token="optional API token (default $PROBEBENCH_TOKEN): only used to say how far your own"
        " probe that is not public yet has got; downloads never carry it",
    )
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
    if not slug or not IDENT.fullmatch(slug):
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


def artifact_download(*, server: str, path: Any, expected_sha256: Any, what: str) -> bytes:
    """The artifact's bytes, checked against the SHA-256 the API publishes; only from the server's
    own origin over http(s)."""
    if not isinstance(expected_sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", expected_sha256):
        raise ClientError(f"{what}: malformed answer from {server}: no artifact SHA-256")
    url = same_origin_url(server, path, what=f"{what}'s artifact")
    resp = http_request("GET", url, max_bytes=MAX_ARTIFACT_BYTES)
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


def probe_not_public(*, server: str, slug: str, number: int | None, token: str | None) -> ClientError:
    """Why there is no public version: with the owner's token, how far its submission has got."""
    wanted = f"{slug}@v{number}" if number is not None else slug
    if not token:
        return ClientError(
            f"no public probe {wanted} on {server} (if it is yours and still being evaluated,"
            " pass --token to see how far it has got)"
        )
    query = urllib.parse.urlencode({"probe": slug, "limit": 50})
    url = f"{server}/api/v1/submissions?{query}"
    listing = _get_json(url, what="your submissions", token=token)
    with _server_answer("your submissions", url):
        subs = [s for s in listing["results"] if s["probe"] == slug]
        if number is not None:
            subs = [s for s in subs if s["version"] == number]
        if not subs:
            return ClientError(f"no public probe {wanted} on {server}, and no submission of it by you")
        sub = max(subs, key=lambda s: _int(s["id"], "submission id"))
        sid = _int(sub["id"], "submission id")
    detail = _get_json(f"{server}/api/v1/submissions/{sid}", what=f"submission {sid}", token=token)
    if not isinstance(detail, dict):
        raise ClientError(f"submission {sid}: malformed answer from {server}")
    status = str(detail.get("status") or "unknown")
    version = f"{slug}@v{sub['version']}"
    if status in ("failed", "rejected"):
        reason = detail.get("failure_reason") or detail.get("rejection_reason") or "no reason given"
        return ClientError(f"{version} is not public: submission {sid} {status} ({reason})")
    if status == "scored":
        return ClientError(f"{version} is scored (submission {sid}) but not public on {server}")
    return ClientError(
        f"{version} is not public yet: submission {sid} is {submission_progress_line(detail)};"
        f" follow it with: python -m evaluator follow {sid} --server {server}"
    )


def probe_download(
    *, server: str, slug: str, number: int | None, dest: Path, token: str | None = None
) -> dict[str, Any]:
    """Download a public version into ``dest`` (probe.safetensors + probe.json); its API detail."""
    query = f"?version={number}" if number is not None else ""
    url = f"{server}/api/v1/probes/{urllib.parse.quote(slug, safe='')}{query}"
    resp = http_request("GET", url)
    if resp.status == 404 and _is_json(resp):
        raise probe_not_public(server=server, slug=slug, number=number, token=token)
    if resp.status != 200:
        raise _api_error(resp, f"probe {slug}")
    detail = resp.json_object(f"probe {slug}")
    with _server_answer(f"probe {slug}", url):
        version = detail["version"]
        what = f"{slug} v{_int(version['number'], 'version number')}"
        metadata = probe_metadata_from_api(detail)
        artifact_url, sha256 = version["artifact_url"], version["artifact_sha256"]
    data = artifact_download(server=server, path=artifact_url, expected_sha256=sha256, what=what)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "probe.safetensors").write_bytes(data)
    (dest / "probe.json").write_text(json.dumps(metadata, indent=2) + "\n")
    return detail


def protocol_tolerances(registry: Path | None, protocol: str | None) -> tuple[str | None, dict[str, float]]:
    """The protocol id and its tolerances (``registry/protocols/<id>.yaml``, keys ``tolerances`` or
    ``tolerance``), over the defaults; (None, defaults) when no protocol is named and there is no
    protocol file.

    A named protocol must be one of the registry's protocol files (the project's own when the
    registry has no ``registry/protocols/``): the id is looked up among the files, never made
    into a path, so a server cannot point the client at another file."""
    import yaml

    root = registry or Path(__file__).resolve().parents[2]
    folder = root / "registry" / "protocols"
    if protocol is not None:
        if not folder.is_dir():
            folder = Path(__file__).resolve().parents[2] / "registry" / "protocols"
        known = {path.stem: path for path in sorted(folder.glob("p*.yaml"))}
        if not isinstance(protocol, str) or protocol not in known:
            raise ClientError(
                f"the server names measurement protocol {protocol!r}, not one of your registry's"
                f" ({', '.join(known) or 'none'}): update your registry"
            )
        candidates = [known[protocol]]
    else:
        candidates = sorted(folder.glob("p*.yaml"))[-1:]
    tolerances = dict(DEFAULT_TOLERANCES)
    for path in candidates:
        data = yaml.safe_load(path.read_text()) or {}
        block = data.get("tolerances") or data.get("tolerance") or {}
        for key, value in block.items() if isinstance(block, dict) else ():
            name = str({"auroc_abs": "auroc", "ece_abs": "ece"}.get(key, key))
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                tolerances[name] = float(value)
        named = set(block) if isinstance(block, dict) else set()
        # a metric the protocol does not name is judged by its family's tolerance (metric table)
        families = {m.name: m.tolerance for m in metric_table.metrics() if m.tolerance}
        for metric, family in [("auroc_ci", "auroc"), *families.items()]:
            if metric not in named:
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


def _task_metrics() -> tuple[str, ...]:
    """What is judged per task (board ``tasks[]`` vs local ``tasks[t].metrics``): the metric
    table's per-task metrics, the AUROC's interval after the AUROC."""
    names = metric_table.judged_task_names()
    return names[:1] + ("auroc_ci",) + names[1:]


def numbers_compare(
    detail: dict[str, Any], local: dict[str, Any], tolerances: dict[str, float]
) -> list[dict]:
    """Every number the board shows for the version next to the local run's, with a verdict."""
    rows = []
    local_tasks = local.get("tasks") or {}
    for task in detail.get("tasks") or []:
        tid = task["task"]
        mine = (local_tasks.get(tid) or {}).get("metrics") or {}
        for metric in _task_metrics():
            board_v, local_v = task.get(metric), mine.get(metric)
            if metric == "auroc_ci":
                board_ci, local_ci = board_v or [None, None], local_v or [None, None]
                rows.append(_judge(tid, "auroc_ci_lo", board_ci[0], local_ci[0], tolerances))
                rows.append(_judge(tid, "auroc_ci_hi", board_ci[1], local_ci[1], tolerances))
            else:
                rows.append(_judge(tid, metric, board_v, local_v, tolerances))
    measured = ((detail.get("score") or {}).get("measurements")) or {}
    aggregate = local.get("aggregate") or {}
    for metric in metric_table.judged_aggregate_names():
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

    reg = load_registry(registry)
    url = f"{server}/api/v1/tasks?{urllib.parse.urlencode({'category': category})}"
    listing = _get_json(url, what="the task list")
    with _server_answer("the task list", url):
        _splits_match(reg, {t["slug"]: t for t in listing}, tasks)


def _splits_match(reg: Any, published: dict[str, Any], tasks: list[str]) -> None:
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


def _evaluate_parser() -> argparse.ArgumentParser:
    """The ``evaluate`` command's parser, as ``python -m evaluator evaluate`` builds it."""
    parser = argparse.ArgumentParser(prog="python -m evaluator evaluate")
    train_cli.evaluate_args(parser)
    parser.set_defaults(command="evaluate", verbose=False)
    return parser


def _evaluate_locally(argv: list[str]) -> dict[str, Any]:
    """Run the ``evaluate`` command (the one the CLI runs, with its defaults) on ``argv``."""
    args = _evaluate_parser().parse_args(argv)
    result = train_cli.run_evaluate(args)
    assert isinstance(result, dict)  # the evaluate command returns its result as a dict
    return result


def _evaluate_option_names() -> set[str]:
    return {opt for action in _evaluate_parser()._actions for opt in action.option_strings}  # noqa: SLF001


def _print_table(rows: list[dict[str, Any]]) -> None:
    def fmt(v):
        if v is None:
            return "—"
        return str(v) if isinstance(v, bool) or not isinstance(v, (int, float)) else f"{v:.4f}"

    print(f"{'task':<28} {'metric':<20} {'board':>8} {'local':>8}  verdict", file=sys.stderr)
    for r in rows:
        line = f"{r['task'][:28]:<28} {r['metric']:<20} {fmt(r['board']):>8} {fmt(r['local']):>8}  {r['verdict']}"
        print(printable(line), file=sys.stderr)


def _reference_download(*, server: str, ref_info: Any, dest: Path, token: str | None) -> dict[str, Any]:
    """The eval-awareness reference probe the board used, downloaded and checked like the probe."""
    slug = _ident(ref_info["probe"], "reference probe id")
    number = ref_info.get("version")
    number = None if number is None else _int(number, "reference probe version")
    ref_detail = probe_download(server=server, slug=slug, number=number, dest=dest, token=token)
    with _server_answer(f"probe {slug}", server):
        sha = ref_detail["version"]["artifact_sha256"]
        published = ref_info.get("artifact_sha256")
        if published and published != sha:
            raise ClientError(
                f"the server names reference probe {slug} with SHA-256 {published},"
                f" its probe page publishes {sha}"
            )
        return {"probe": slug, "version": ref_detail["version"]["number"], "artifact_sha256": sha}


def _evaluate_argv(
    args: argparse.Namespace, *, detail: dict[str, Any], probe_dir: Path, protocol: str | None
) -> tuple[list[str], list[str]]:
    """The ``evaluate`` arguments that measure as the board did, and the board's task ids; every
    id the server gives is checked to be an id before it becomes an argument."""
    options = _evaluate_option_names()
    argv = ["--probe", str(probe_dir), f"--spec={_ident(detail['spec'], 'weights spec')}"]
    tasks = [_ident(t["task"], "task id") for t in detail.get("tasks") or []]
    if tasks:
        argv.append("--tasks=" + ",".join(tasks))
    if args.registry:
        argv += ["--registry", str(args.registry)]
    if args.cache_dir:
        argv += ["--cache-dir", str(args.cache_dir)]
    if args.device:
        argv += ["--device", args.device]
    if "--protocol" in options and protocol:
        argv.append(f"--protocol={protocol}")
    # otherwise evaluate's defaults are the workers' defaults (no dtype given on either side)
    targets = [_ident(t["model"], "transfer model") for t in detail.get("transfer") or []]
    argv += ["--transfer-targets=" + ",".join(targets)] if targets else ["--no-transfer"]
    if detail["version"].get("reproduced") is None:
        argv += ["--no-reproduce"]
    if "--latency-reps" in options:
        argv += ["--latency-reps", "20"]  # latency is the machine's, shown but never judged
    return argv, tasks


def run_reproduce(args: argparse.Namespace) -> dict:
    server = _connect(args, token_required=False)
    slug, number = probe_spec_parse(args.probe)
    url = f"{server}/api/v1/probes/{slug}"
    with tempfile.TemporaryDirectory(prefix="probebench-reproduce-") as tmp:
        work = args.keep or Path(tmp)
        probe_dir = work / "probe"
        detail = probe_download(server=server, slug=slug, number=number, dest=probe_dir, token=args.token)
        with _server_answer(f"probe {slug}", url):
            version = detail["version"]
            score = detail.get("score") or {}
            measured = score.get("measurements") or {}
            protocol, tolerances = protocol_tolerances(
                args.registry, score.get("protocol") or measured.get("protocol")
            )
            argv, tasks = _evaluate_argv(args, detail=detail, probe_dir=probe_dir, protocol=protocol)
            category = _ident(detail["category"], "category")
            ref_info = detail.get("ea_reference")
        splits_check(server=server, registry=args.registry, category=category, tasks=tasks)
        reference = args.reference_probe
        if reference is None and ref_info:
            reference = work / "reference"
            ref_info = _reference_download(server=server, ref_info=ref_info, dest=reference, token=args.token)
        if reference is not None:
            argv += ["--reference-probe", str(reference)]
        elif "ea_reference" in detail and "--no-reference-probe" in _evaluate_option_names():
            argv += ["--no-reference-probe"]  # the board had none: its auroc_ea is imputed
        local = _evaluate_locally(argv)

    with _server_answer(f"probe {slug}", url):
        rows = numbers_compare(detail, local, tolerances)
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
            "comparisons": rows,
            "board_total": score.get("total"),
            "local_total": (local.get("probe_score") or {}).get("total"),
            "latency_ms": {
                "board": measured.get("latency_ms"),
                "local": (local.get("aggregate") or {}).get("latency_ms"),
            },
        }
    bad = [r for r in rows if r["verdict"] == "disagree"]
    _print_table(rows)
    result["verdict"] = "agree" if not bad else "disagree"
    result["disagreements"] = [
        f"{r['metric']} on {r['task']}: board {r['board']}, local {r['local']} (tolerance {r['tolerance']})"
        for r in bad
    ]
    if bad:
        first = bad[0]
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        message = (
            f"error: the board and the local run disagree: {first['metric']} on {first['task']}"
            f" (board {first['board']}, local {first['local']}, tolerance {first['tolerance']}){more}"
        )
        print(printable(message), file=sys.stderr)
        return Disagreement(result)
    return result
