"""Orphaned artifact files (written, then their upload's transaction failed) are removed only by the
cleanup, only when old, and never while a row references them."""

import os
import time

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from leaderboard.artifacts import artifact_abspath, artifact_store, sha256_bytes
from leaderboard.models import ProbeVersion
from tests.leaderboard.test_submission_validation import linear_probe_bytes, metadata, post

pytestmark = pytest.mark.django_db
DAY = 24 * 3600


def _age(relpath: str, seconds: float) -> None:
    path = artifact_abspath(relpath)
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_the_cleanup_removes_only_old_files_no_row_references(registry, researcher, capsys):
    client = APIClient()
    client.force_authenticate(user=researcher)
    assert post(client, linear_probe_bytes(seed=41), metadata()).status_code == 201
    kept = ProbeVersion.objects.get().artifact_path
    orphan_data = linear_probe_bytes(seed=42)
    old_orphan, _ = artifact_store(orphan_data, sha256_bytes(orphan_data))
    young_data = linear_probe_bytes(seed=43)
    young_orphan, _ = artifact_store(young_data, sha256_bytes(young_data))
    _age(kept, 2 * DAY)
    _age(old_orphan, 2 * DAY)

    call_command("artifacts_cleanup")

    assert artifact_abspath(kept).is_file()  # referenced: never removed, however old
    assert not artifact_abspath(old_orphan).exists()
    assert artifact_abspath(young_orphan).is_file()  # may belong to an upload still in flight
    assert f"removed {old_orphan}" in capsys.readouterr().out


def test_storing_the_same_bytes_twice_keeps_one_intact_file(settings):
    data = linear_probe_bytes(seed=44)
    first, created = artifact_store(data, sha256_bytes(data))
    second, created_again = artifact_store(data, sha256_bytes(data))
    assert (first, created, created_again) == (second, True, False)
    assert artifact_abspath(first).read_bytes() == data
    assert not [p for p in artifact_abspath(first).parent.iterdir() if p.name.startswith(".upload-")]


def test_a_stored_file_damaged_on_disk_is_rewritten_by_the_next_upload_of_its_bytes(settings):
    data = linear_probe_bytes(seed=45)
    relpath, _ = artifact_store(data, sha256_bytes(data))
    damaged = bytearray(data)
    damaged[-1] ^= 0x01  # same size, other content
    artifact_abspath(relpath).write_bytes(bytes(damaged))

    again, created = artifact_store(data, sha256_bytes(data))
    assert (again, created) == (relpath, True)
    assert artifact_abspath(relpath).read_bytes() == data
