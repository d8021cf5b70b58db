"""The client's HTTP: the one request path (``http_request``), the server's answers read as JSON,
the errors as one line, and the server options each client command shares.

The server is not trusted (see ``http_request``): size caps, one deadline per request, same-origin
redirects without the token, http(s) only, ids checked before use, its text printed escaped, and
a one-line ``error:`` on any malformed answer. Standard library HTTP only (urllib), no Django.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from evaluator.errors import EvaluatorError

USER_AGENT = "probebench-client/1"
#: what an id the server names may look like before the client uses it in a URL or an argument
IDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


class ClientError(EvaluatorError):
    """The server could not be reached, or it refused the request, or its answer is unusable.

    The message is printed as one line with every control character escaped: it may quote the
    server's text, which must not reach the terminal raw (escape sequences, line breaks)."""

    def __init__(self, message: str):
        super().__init__(printable(message))


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


def api_error(resp: HttpResponse, what: str) -> ClientError:
    """A one-line error for a non-2xx answer, with the server's field and message when it sent them."""
    if resp.status == 401:
        detail = _error_message(resp) or "authentication failed"
        return ClientError(f"{what}: the server refused the token (HTTP 401: {detail}); check --token")
    if resp.status == 403:
        return ClientError(f"{what}: forbidden (HTTP 403: {_error_message(resp) or 'no permission'})")
    if resp.status == 404 and not is_json(resp):
        return ClientError(
            f"{what}: {resp.url} does not exist (HTTP 404); is --server the root URL of a ProbeBench server?"
        )
    message = _error_message(resp)
    if message is None:
        return ClientError(f"{what}: HTTP {resp.status} from {resp.url}: {_snippet(resp.body)!r}")
    return ClientError(f"{what} (HTTP {resp.status}): {message}")


def is_json(resp: HttpResponse) -> bool:
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


def get_json(url: str, *, what: str, token: str | None = None) -> Any:
    resp = http_request("GET", url, token=token)
    if resp.status != 200:
        raise api_error(resp, what)
    return resp.json()


@contextlib.contextmanager
def server_answer(what: str, url: str) -> Iterator[None]:
    """Turns a malformed answer (a missing key, a wrong type) met while reading it into one line."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ClientError(f"{what}: malformed answer from {url} ({detail})") from None


def ident(value: Any, what: str) -> str:
    """A name the server gave that the client passes on (a probe, task, model or spec id)."""
    if not isinstance(value, str) or not IDENT.fullmatch(value):
        raise ClientError(f"the server's {what} {value!r} is not an id (letters, digits, '-', '_', '.')")
    return value


def integer(value: Any, what: str) -> int:
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


def server_args(p: argparse.ArgumentParser, *, token: str) -> None:
    p.add_argument("--server", required=True, help="root URL of the ProbeBench server")
    p.add_argument("--token", default=os.environ.get("PROBEBENCH_TOKEN"), help=token)
    p.add_argument(
        "--request-timeout",
        type=float,
        default=DEFAULT_REQUEST_TIMEOUT,
        help=f"seconds one HTTP request may take, whole answer included (default {DEFAULT_REQUEST_TIMEOUT:.0f})",
    )


def server_connect(args: argparse.Namespace, *, token_required: bool) -> str:
    """The server's root URL; the request deadline set for this command."""
    global _request_timeout
    if not args.request_timeout > 0:
        raise ClientError("--request-timeout must be a positive number of seconds")
    _request_timeout = args.request_timeout
    server = server_url(args.server)
    if token_required and not args.token:
        raise ClientError("no API token: pass --token or set PROBEBENCH_TOKEN (your account page makes one)")
    return server
