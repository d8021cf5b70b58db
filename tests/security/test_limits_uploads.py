"""Upload limits are limits: a body is refused while it streams in (or before, from its declared
length), not after it is all on disk; every file part has a limit, the metadata sent as a file
too; a refusal is a 413 (or 400) naming the field, with nothing left behind.

The streaming cases talk HTTP over a socket to a live server and send only the beginning of the
body: the answer must come before the rest is sent.
"""

import json
import socket
from urllib.parse import urlsplit

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from tests.leaderboard.test_submission_validation import (
    linear_probe_bytes,
    metadata,
    nothing_left_behind,  # noqa: F401 - fixture
    post,
)

BOUNDARY = "----probebench-limits"
CSRF = "a" * 32
pytestmark = pytest.mark.django_db


@pytest.fixture
def api(registry, researcher):
    client = APIClient()
    client.force_authenticate(user=researcher)
    return client


def _part(name: str, value: bytes, *, filename: str | None = None) -> bytes:
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    head = f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n"
    if filename:
        head += "Content-Type: application/octet-stream\r\n"
    return head.encode() + b"\r\n" + value + b"\r\n"


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def _send_head_and_start(live_server, path: str, *, cookie: str, length: int, start: bytes) -> bytes:
    """Send the request line, the headers declaring ``length`` bytes, and only ``start`` of the body;
    return what the server answers within 20 s (b"" if it waits for the rest)."""
    url = urlsplit(live_server.url)
    with socket.create_connection((url.hostname, url.port), timeout=20) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {url.hostname}:{url.port}\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {length}\r\n"
            f"Cookie: sessionid={cookie}; csrftoken={CSRF}\r\nX-CSRFToken: {CSRF}\r\n"
            f"Referer: {live_server.url}/submit/\r\nConnection: close\r\n\r\n"
        )
        sock.sendall(head.encode() + start)
        answer = b""
        try:
            while not _complete(answer):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except TimeoutError:
            pass
        return answer


def _complete(answer: bytes) -> bool:
    """A whole response: the headers and as many body bytes as its Content-Length says."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return False


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/api/v1/submissions", "/submit/"])
def test_an_artifact_over_the_limit_is_refused_while_it_is_still_streaming(
    live_server, registry, researcher, settings, path
):
    settings.MAX_ARTIFACT_BYTES = 256 * 1024
    artifact_head = (
        _part("metadata", json.dumps(metadata()).encode())
        + (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="artifact"; filename="p.safetensors"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
    )
    declared = len(artifact_head) + 4 * 1024 * 1024  # a 4 MB artifact, within MAX_REQUEST_BYTES
    sent = artifact_head + b"\0" * (1024 * 1024)  # only the first megabyte is ever sent
    answer = _send_head_and_start(
        live_server, path, cookie=_session_cookie(researcher), length=declared, start=sent
    )
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"artifact" in answer and b"the limit is 262144 bytes" in answer


@pytest.mark.django_db(transaction=True)
def test_a_declared_length_over_the_limit_is_413_before_any_body_is_read(live_server, registry, researcher):
    answer = _send_head_and_start(
        live_server, "/api/v1/submissions", cookie=_session_cookie(researcher), length=10 * 1024**3, start=b""
    )
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["field"] == "artifact" and "10,737,418,240 bytes" in body["error"]


@pytest.mark.usefixtures("nothing_left_behind")
def test_metadata_sent_as_a_file_has_its_own_limit(api, settings):
    settings.MAX_METADATA_BYTES = 64 * 1024
    big = json.dumps(metadata(description="x" * 100_000)).encode()
    response = api.post(
        "/api/v1/submissions",
        {
            "artifact": SimpleUploadedFile("p.safetensors", linear_probe_bytes(seed=21)),
            "metadata": SimpleUploadedFile("probe.json", big, content_type="application/json"),
        },
        format="multipart",
    )
    assert response.status_code == 413
    assert response.json() == {
        "error": "metadata: the file 'metadata' is over the size limit; the limit is 65536 bytes"
        " (the upload was stopped there)",
        "field": "metadata",
    }


def test_metadata_within_its_limit_may_be_sent_as_a_file(api):
    response = api.post(
        "/api/v1/submissions",
        {
            "artifact": SimpleUploadedFile("p.safetensors", linear_probe_bytes(seed=22)),
            "metadata": SimpleUploadedFile("probe.json", json.dumps(metadata()).encode()),
        },
        format="multipart",
    )
    assert response.status_code == 201, response.content


@pytest.mark.usefixtures("nothing_left_behind")
def test_form_fields_over_their_limit_are_413_naming_the_metadata(api, settings):
    response = post(api, linear_probe_bytes(seed=23), "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1))
    assert response.status_code == 413
    body = response.json()
    assert body["field"] == "metadata" and f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,}" in body["error"]


@pytest.mark.usefixtures("nothing_left_behind")
def test_more_files_than_a_submission_holds_is_a_400(api, settings):
    files = {
        f"file{i}": SimpleUploadedFile(f"{i}.bin", b"x")
        for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FILES + 1)
    }
    response = api.post(
        "/api/v1/submissions",
        {"artifact": SimpleUploadedFile("p.safetensors", linear_probe_bytes(seed=24)), **files},
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "artifact" and "files" in response.json()["error"]


@pytest.mark.django_db
def test_the_web_form_answers_an_oversize_artifact_with_413(client, registry, researcher, settings):
    settings.MAX_ARTIFACT_BYTES = 1024
    client.force_login(researcher)
    response = client.post(
        "/submit/",
        {"artifact": SimpleUploadedFile("p.safetensors", linear_probe_bytes(seed=25)), "name": "x"},
    )
    assert response.status_code == 413
    assert (
        "artifact: the artifact is over the size limit; the limit is 1024 bytes" in response.content.decode()
    )
