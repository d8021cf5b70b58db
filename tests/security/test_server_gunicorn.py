"""The production web server (gunicorn with docker/gunicorn.conf.py, as docker/entrypoint.sh starts
it) survives slow clients: a body sent a byte at a time, for longer than the worker timeout, does not
block another request and is answered, not killed; a body that stops arriving is dropped after the
idle limit, freeing its thread."""

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).with_name("gunicorn")
WORKER_TIMEOUT_S = 2
BODY_IDLE_TIMEOUT_S = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One worker process with 4 threads: with sync workers, one slow client would take it all."""
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "probebench.settings",
        "PROBEBENCH_DATA_DIR": str(tmp_path_factory.mktemp("gunicorn")),
        "WEB_BIND": f"127.0.0.1:{port}",
        "WEB_WORKERS": "1",
        "WEB_THREADS": "4",
        "WEB_TIMEOUT": str(WORKER_TIMEOUT_S),
        "WEB_BODY_IDLE_TIMEOUT": str(BODY_IDLE_TIMEOUT_S),
        "WEB_ACCESS_LOG": "",
    }
    env.pop("DATABASE_URL", None)  # the pages used here read no database
    log = open(env["PROBEBENCH_DATA_DIR"] + "/gunicorn.log", "w")  # noqa: SIM115 - open while it runs
    proc = subprocess.Popen(
        [str(GUNICORN), "-c", "docker/gunicorn.conf.py", "probebench.wsgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if _get(port, "/accounts/login/").startswith("HTTP/1.1 200"):
                break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail(f"gunicorn did not start: {Path(log.name).read_text()[-2000:]}")
    yield port, Path(log.name)
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def _get(port: int, path: str, timeout: float = 5) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        return _read_all(s)


def _read_all(s: socket.socket) -> str:
    chunks = []
    while chunk := s.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks).decode("latin-1")


def _post_head(port: int, body_length: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(
        (
            "POST /accounts/login/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {body_length}\r\n\r\n"
        ).encode()
    )
    return s


def test_a_slow_upload_is_answered_and_does_not_block_other_requests(server):
    port, log = server
    body = b"username=ada&password=" + b"x" * 18  # 40 bytes, one every 0.15 s: 6 s > worker timeout
    result = {}

    def slow_client():
        start = time.monotonic()
        with _post_head(port, len(body)) as s:
            for byte in body:
                s.sendall(bytes([byte]))
                time.sleep(0.15)
            result["response"] = _read_all(s)
        result["seconds"] = time.monotonic() - start

    thread = threading.Thread(target=slow_client)
    thread.start()
    time.sleep(1.0)
    fast_latencies = []
    while thread.is_alive():
        started = time.monotonic()
        assert _get(port, "/accounts/login/", timeout=2).startswith("HTTP/1.1 200")
        fast_latencies.append(time.monotonic() - started)
        time.sleep(0.5)
    thread.join()
    assert result["seconds"] > 2 * WORKER_TIMEOUT_S
    # answered by the application (CSRF refuses a login without its token), after the whole body
    assert result["response"].startswith("HTTP/1.1 403"), result["response"][:200]
    assert len(fast_latencies) >= 5 and max(fast_latencies) < 1.5
    assert "WORKER TIMEOUT" not in log.read_text()


def test_a_stalled_upload_is_dropped_after_the_idle_limit_and_frees_its_thread(server):
    port, log = server
    answers = []

    def stalled_client():
        with _post_head(port, 1000) as s:
            s.sendall(b"username=ada&pass")  # and then nothing more
            started = time.monotonic()
            answers.append((_read_all(s), time.monotonic() - started))

    # as many stalled uploads as the worker has threads
    clients = [threading.Thread(target=stalled_client) for _ in range(4)]
    for client in clients:
        client.start()
    time.sleep(0.5)
    started = time.monotonic()
    # the threads are busy waiting for the bodies; past the idle limit they are freed
    assert _get(port, "/accounts/login/", timeout=BODY_IDLE_TIMEOUT_S + 10).startswith("HTTP/1.1 200")
    assert time.monotonic() - started < BODY_IDLE_TIMEOUT_S + 3
    for client in clients:
        client.join(timeout=30)
    assert len(answers) == 4
    for response, seconds in answers:
        assert response.startswith("HTTP/1.1 408"), response[:200]
        assert BODY_IDLE_TIMEOUT_S - 0.5 < seconds < BODY_IDLE_TIMEOUT_S + 3
    assert "WORKER TIMEOUT" not in log.read_text()
