"""The researcher's client (``python -m evaluator submit/follow/reproduce``) against a hostile
server written here: an endless answer, a slow drip, a redirect to another host, a ``file:`` link,
terminal escape sequences, malformed answers and a protocol id that names a path. The client must
stop at its size cap and its deadline, never send the token elsewhere, open only http(s) on the
server's own origin, print the server's text escaped, and end every refusal with one
``error: …`` line (non-zero exit, no traceback)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "hostile-test-token-0123456789"

Route = Callable[[BaseHTTPRequestHandler], None]


class HostileServer:
    """An HTTP server on loopback whose answers the test writes: ``routes`` maps
    ``"METHOD /path"`` to a function of the request handler; every request is recorded."""

    def __init__(self, host: str = "127.0.0.1"):
        self.routes: dict[str, Route] = {}
        self.requests: list[dict] = []
        self.sent = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                server.requests.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers.items())}
                )
                route = server.routes.get(f"{self.command} {self.path.split('?')[0]}")
                if route is None:
                    json_answer(404, {"error": "not here", "field": None})(self)
                    return
                with contextlib.suppress(OSError):  # the client hung up: what it should do here
                    route(self)

            do_GET = do_POST = _handle

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def json_answer(status: int, data, headers: dict | None = None) -> Route:
    body = data if isinstance(data, bytes) else json.dumps(data).encode()

    def route(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    return route


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    server = HostileServer()
    yield server
    server.close()


@pytest.fixture
def probe_dir(tmp_path) -> Path:
    d = tmp_path / "probe"
    d.mkdir()
    (d / "probe.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (d / "probe.json").write_text(json.dumps({"name": "p", "category": "hallucination"}))
    return d


def client(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.pop("PROBEBENCH_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "evaluator", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def created(sid: int = 1) -> Route:
    return json_answer(201, {"id": sid, "status": "queued", "url": f"/api/v1/submissions/{sid}"})


def submit(server: HostileServer, probe_dir: Path, *extra: str, timeout: float = 60):
    return client(
        "submit",
        str(probe_dir),
        "--server",
        server.url,
        "--token",
        TOKEN,
        *extra,
        "--poll",
        "0.1",
        timeout=timeout,
    )


# --------------------------------------------------------------------------- size and time


def test_an_endless_answer_is_cut_at_the_clients_cap(hostile, probe_dir):
    def endless(h):
        h.send_response(201)
        h.send_header("Content-Type", "application/json")
        h.end_headers()  # no Content-Length, no end
        chunk = b"[" * 65536
        while hostile.sent < 256 * 2**20:
            h.wfile.write(chunk)
            hostile.sent += len(chunk)

    hostile.routes["POST /api/v1/submissions"] = endless
    started = time.monotonic()
    proc = submit(hostile, probe_dir)
    assert "over the client's limit of 16,777,216 bytes" in one_line_error(proc)
    assert time.monotonic() - started < 30
    time.sleep(0.5)
    assert hostile.sent < 64 * 2**20  # it hung up at the cap, not at the server's end


def test_a_declared_length_over_the_cap_is_refused_before_reading(hostile, probe_dir):
    def huge(h):
        h.send_response(201)
        h.send_header("Content-Length", str(2**40))
        h.end_headers()
        h.wfile.write(b"{")

    hostile.routes["POST /api/v1/submissions"] = huge
    assert "over the client's 16,777,216" in one_line_error(submit(hostile, probe_dir))


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_slow_drip_times_out_at_the_overall_deadline(hostile, probe_dir, where):
    def drip(h):
        h.wfile.write(b"HTTP/1.1 201 Created\r\n")
        if where == "body":
            h.wfile.write(b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
        for _ in range(600):  # one byte every 0.1 s: each read succeeds, the whole never ends
            h.wfile.write(b"X" if where == "headers" else b" ")
            h.wfile.flush()
            time.sleep(0.1)

    hostile.routes["POST /api/v1/submissions"] = drip
    started = time.monotonic()
    proc = submit(hostile, probe_dir, "--request-timeout", "2", timeout=50)
    assert "no complete answer within 2 s" in one_line_error(proc)
    assert time.monotonic() - started < 15


# --------------------------------------------------------------------------- redirects and links


def test_a_redirect_to_another_host_is_refused_and_never_carries_the_token(hostile, probe_dir):
    other = HostileServer(host="127.0.0.2")
    try:
        other.routes["GET /steal"] = json_answer(200, {"id": 1, "status": "scored"})
        hostile.routes["POST /api/v1/submissions"] = created()
        hostile.routes["GET /api/v1/submissions/1"] = json_answer(302, {}, {"Location": f"{other.url}/steal"})
        proc = submit(hostile, probe_dir, "--wait")
        assert "redirects to another origin" in one_line_error(proc)
        assert hostile.requests[-1]["headers"]["Authorization"] == f"Token {TOKEN}"
        assert not any("Authorization" in r["headers"] for r in other.requests)
        assert other.requests == []
    finally:
        other.close()


def test_a_redirect_within_the_server_is_followed_without_the_token(hostile, probe_dir):
    hostile.routes["POST /api/v1/submissions"] = created()
    hostile.routes["GET /api/v1/submissions/1"] = json_answer(301, {}, {"Location": "/moved/1"})
    hostile.routes["GET /moved/1"] = json_answer(
        200, {"id": 1, "status": "rejected", "rejection_reason": "moved along", "runs": []}
    )
    proc = submit(hostile, probe_dir, "--wait")
    assert one_line_error(proc).endswith("rejected: moved along")
    moved = [r for r in hostile.requests if r["path"] == "/moved/1"]
    assert moved and not any("Authorization" in r["headers"] for r in moved)


def _probe_detail(**version) -> dict:
    return {
        "name": "p",
        "category": "hallucination",
        "base_model": "smollm2-135m-instruct",
        "spec": "v0.0.1",
        "tasks": [],
        "version": {
            "number": 1,
            "layer": 1,
            "position": "last",
            "input": "residual",
            "output": "logit",
            "license": "mit",
            "reproduced": None,
        }
        | version,
    }


@pytest.mark.parametrize(
    "link", ["file://{secret}", "ftp://127.0.0.1/x", "http://127.0.0.2:1/probe.safetensors", "data:,hello"]
)
def test_a_link_to_a_local_file_another_scheme_or_host_is_never_opened(hostile, tmp_path, link):
    secret = tmp_path / "local-secret.txt"
    secret.write_text("LOCAL-SECRET-BYTES")
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    detail = _probe_detail(artifact_url=link.format(secret=secret), artifact_sha256=digest)
    hostile.routes["GET /api/v1/probes/p"] = json_answer(200, detail)
    proc = client("reproduce", "--server", hostile.url, "--probe", "p")
    message = one_line_error(proc)
    assert "LOCAL-SECRET" not in proc.stderr + proc.stdout
    assert "only http(s) is opened" in message or "another origin" in message


# --------------------------------------------------------------------------- what reaches the terminal


def test_the_servers_escape_sequences_reach_the_terminal_escaped(hostile, probe_dir):
    hostile.routes["POST /api/v1/submissions"] = json_answer(
        400, {"error": "\x1b]0;owned\x07\x1b[2Jbad\nerror: forged line", "field": "metadata"}
    )
    proc = submit(hostile, probe_dir)
    message = one_line_error(proc)  # the forged second line stays on the first
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    assert "\\x1b]0;owned\\x07\\x1b[2Jbad\\nerror: forged line" in message


def test_a_failure_reason_and_a_progress_step_with_escapes_are_printed_escaped(hostile, probe_dir):
    hostile.routes["POST /api/v1/submissions"] = created()
    hostile.routes["GET /api/v1/submissions/1"] = json_answer(
        200,
        {
            "id": 1,
            "status": "failed",
            "step": "\x1b[31mred",
            "failure_reason": "\x1b[1;1H\x1b[2Jwiped",
            "runs": [{"kind": "score", "task": "t", "split": "test", "status": "failed", "error": "\x9bX"}],
        },
    )
    proc = submit(hostile, probe_dir, "--wait")
    assert "\\x1b[1;1H\\x1b[2Jwiped" in one_line_error(proc)
    assert not any(c in proc.stderr for c in ("\x1b", "\x9b"))


MALFORMED = {
    "a list": b"[1, 2]",
    "a string id": json.dumps({"id": "../../admin", "status": "queued"}).encode(),
    "no id": json.dumps({"status": "queued"}).encode(),
    "deep nesting": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_answer_to_submit_is_one_error_line(hostile, probe_dir, answer):
    hostile.routes["POST /api/v1/submissions"] = json_answer(201, answer)
    one_line_error(submit(hostile, probe_dir, "--wait"))
    assert [r["path"] for r in hostile.requests] == ["/api/v1/submissions"]  # nothing built from it


MALFORMED_DETAIL = {
    "runs a string": {"id": 1, "status": "failed", "runs": "nope"},
    "a run a number": {"id": 1, "status": "failed", "runs": [7]},
    "no probe": {"id": 1, "status": "scored"},
}


@pytest.mark.parametrize("detail", MALFORMED_DETAIL.values(), ids=MALFORMED_DETAIL.keys())
def test_a_malformed_submission_detail_is_one_error_line(hostile, probe_dir, detail):
    hostile.routes["POST /api/v1/submissions"] = created()
    hostile.routes["GET /api/v1/submissions/1"] = json_answer(200, detail)
    one_line_error(submit(hostile, probe_dir, "--wait"))


MALFORMED_PROBE = {
    "version a number": {"version": 5},
    "no artifact": _probe_detail(),
    "a list": [1],
}


@pytest.mark.parametrize("detail", MALFORMED_PROBE.values(), ids=MALFORMED_PROBE.keys())
def test_a_malformed_probe_answer_to_reproduce_is_one_error_line(hostile, detail):
    hostile.routes["GET /api/v1/probes/p"] = json_answer(200, detail)
    one_line_error(client("reproduce", "--server", hostile.url, "--probe", "p"))


# --------------------------------------------------------------------------- ids the server names


def test_a_protocol_id_that_names_a_path_is_refused(hostile, tmp_path):
    # a registry without protocols, and next to it a file the server's id would reach
    registry = tmp_path / "reg"
    (registry / "registry" / "protocols").mkdir(parents=True)
    (registry / "registry" / "protocols" / "p1.yaml").write_text("id: p1\ntolerances: {auroc: 0.002}\n")
    (registry / "x.yaml").write_text("id: x\ntolerances: {auroc: 1.0, ece: 1.0}\n")
    artifact = b"probe-bytes"
    detail = _probe_detail(artifact_url="/artifact", artifact_sha256=hashlib.sha256(artifact).hexdigest())
    detail["score"] = {"protocol": "../../x", "measurements": {}}
    hostile.routes["GET /api/v1/probes/p"] = json_answer(200, detail)
    hostile.routes["GET /artifact"] = json_answer(200, artifact)
    proc = client("reproduce", "--server", hostile.url, "--probe", "p", "--registry", str(registry))
    message = one_line_error(proc)
    assert "measurement protocol '../../x', not one of your registry's (p1)" in message


@pytest.mark.parametrize("field,value", [("spec", "--device=cuda"), ("spec", "../v1"), ("category", "../x")])
def test_ids_the_server_names_are_checked_before_they_become_arguments(hostile, field, value):
    artifact = b"probe-bytes"
    detail = _probe_detail(artifact_url="/artifact", artifact_sha256=hashlib.sha256(artifact).hexdigest())
    detail[field] = value
    hostile.routes["GET /api/v1/probes/p"] = json_answer(200, detail)
    hostile.routes["GET /artifact"] = json_answer(200, artifact)
    message = one_line_error(client("reproduce", "--server", hostile.url, "--probe", "p"))
    assert "is not an id" in message
