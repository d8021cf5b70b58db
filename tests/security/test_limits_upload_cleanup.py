"""A refused upload leaves nothing in the temporary upload directory.

An upload over ``FILE_UPLOAD_MAX_MEMORY_SIZE`` is spooled to a temporary file while it streams in.
The size limit stopped the parse with an ordinary exception, which Django's multipart parser does
not clean up after: the partial file stayed on disk until the garbage collector happened to find
it (315 MB after six refused requests against gunicorn). Each case below counts the files in the
temporary upload directory before and after a refused upload, anonymous and signed in, through the
API and through the web form, while the response (and so the request) is still held: nothing may
depend on the garbage collector.
"""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from tests.leaderboard.test_submission_validation import metadata

pytestmark = pytest.mark.django_db

MB = 1024 * 1024


@pytest.fixture
def upload_dir(settings, tmp_path):
    """A temporary upload directory of this test's own, and limits that spool to it."""
    directory = tmp_path / "uploads"
    directory.mkdir()
    settings.FILE_UPLOAD_TEMP_DIR = str(directory)
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024  # spool every file of these requests
    settings.MAX_ARTIFACT_BYTES = MB
    settings.MAX_METADATA_BYTES = MB
    return directory


def _files(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _oversize_artifact() -> SimpleUploadedFile:
    return SimpleUploadedFile("p.safetensors", b"\0" * (3 * MB), content_type="application/octet-stream")


def _spooled_metadata() -> SimpleUploadedFile:
    """A probe.json sent as a file, within its limit and large enough to be spooled to disk."""
    meta = metadata(description="x" * 4000, training_data={"text_sha256": ["0" * 64] * 3000})
    return SimpleUploadedFile("probe.json", json.dumps(meta).encode(), content_type="application/json")


def _api_client(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user=user)
    return client


def _web_client(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.mark.parametrize("signed_in", [False, True], ids=["anonymous", "signed-in"])
@pytest.mark.parametrize("metadata_as_file", [False, True], ids=["metadata-field", "metadata-file"])
def test_an_oversize_api_upload_leaves_no_temporary_file(
    upload_dir, registry, researcher, signed_in, metadata_as_file
):
    client = _api_client(researcher if signed_in else None)
    meta = _spooled_metadata() if metadata_as_file else json.dumps(metadata())
    before = _files(upload_dir)
    response = client.post(
        "/api/v1/submissions", {"metadata": meta, "artifact": _oversize_artifact()}, format="multipart"
    )
    assert response.status_code in ((413,) if signed_in else (401, 413)), response.content[:300]
    assert _files(upload_dir) == before


@pytest.mark.parametrize("signed_in", [False, True], ids=["anonymous", "signed-in"])
def test_an_oversize_web_form_upload_leaves_no_temporary_file(upload_dir, registry, researcher, signed_in):
    client = _web_client(researcher if signed_in else None)
    before = _files(upload_dir)
    response = client.post(
        "/submit/", {"metadata": _spooled_metadata(), "artifact": _oversize_artifact(), "name": "x"}
    )
    assert response.status_code == 413, response.content[:300]
    assert _files(upload_dir) == before


def test_a_metadata_file_over_its_limit_leaves_no_temporary_file(upload_dir, registry, researcher):
    big = SimpleUploadedFile("probe.json", b" " * (2 * MB), content_type="application/json")
    before = _files(upload_dir)
    response = _api_client(researcher).post("/api/v1/submissions", {"metadata": big}, format="multipart")
    assert response.status_code == 413
    assert response.json()["field"] == "metadata"
    assert _files(upload_dir) == before


def test_too_many_files_leave_no_temporary_file(upload_dir, registry, researcher, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 2
    files = {f"f{i}": SimpleUploadedFile(f"{i}.bin", b"\1" * (200 * 1024)) for i in range(4)}
    before = _files(upload_dir)
    response = _api_client(researcher).post("/api/v1/submissions", files, format="multipart")
    assert response.status_code == 400
    assert _files(upload_dir) == before


def test_an_upload_refused_after_it_was_received_leaves_no_temporary_file(upload_dir, registry, researcher):
    """The whole body arrived, then the service refused it (a 400): Django's own request cleanup."""
    artifact = SimpleUploadedFile("p.safetensors", b"\0" * (512 * 1024))
    before = _files(upload_dir)
    response = _api_client(researcher).post(
        "/api/v1/submissions", {"metadata": _spooled_metadata(), "artifact": artifact}, format="multipart"
    )
    assert response.status_code == 400
    assert _files(upload_dir) == before
