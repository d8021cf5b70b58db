"""The settings find the secret ``make demo`` writes (``$PROBEBENCH_DATA_DIR/secret_key``) when no
SECRET_KEY or SECRET_KEY_FILE is given, so every ``manage.py`` command of the README works in the
demo's data directory as written; an explicit secret still wins, and no file still refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRINT_SECRET = "import django; django.setup()\nfrom django.conf import settings; print(settings.SECRET_KEY)"


def start(data_dir: Path, **env: str) -> subprocess.CompletedProcess:
    base = {
        "PATH": os.environ["PATH"],
        "PROBEBENCH_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "probebench.settings",
    }
    return subprocess.run(
        [sys.executable, "-c", PRINT_SECRET],
        env=base | env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_data_directorys_secret_is_found_without_naming_it(tmp_path):
    (tmp_path / "secret_key").write_text("written-by-make-demo\n")
    found = start(tmp_path)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "written-by-make-demo"


def test_a_secret_given_explicitly_wins_over_the_data_directorys(tmp_path):
    (tmp_path / "secret_key").write_text("written-by-make-demo\n")
    other = tmp_path / "other"
    other.write_text("from-the-file-named\n")
    assert start(tmp_path, SECRET_KEY="from-env").stdout.strip() == "from-env"
    assert start(tmp_path, SECRET_KEY_FILE=str(other)).stdout.strip() == "from-the-file-named"


def test_with_no_secret_anywhere_the_site_still_refuses_to_start(tmp_path):
    refused = start(tmp_path)
    assert refused.returncode != 0 and "SECRET_KEY" in refused.stderr


@pytest.mark.django_db(transaction=True)
def test_the_token_command_prints_only_the_token_on_stdout_and_fails_on_stderr(worker_env, tmp_path):
    """What ``TOKEN=$(python manage.py create_api_token ada --create-user | tail -1)`` relies on, in
    a data directory holding only the demo's secret."""
    (tmp_path / "secret_key").write_text("written-by-make-demo\n")
    env = {k: v for k, v in worker_env.items() if k not in ("SECRET_KEY", "SECRET_KEY_FILE")}
    env["PROBEBENCH_DATA_DIR"] = str(tmp_path)

    def manage(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", "create_api_token", *argv],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )

    made = manage("newcomer", "--create-user")
    assert made.returncode == 0, made.stderr
    assert len(made.stdout.splitlines()) == 1 and len(made.stdout.strip()) == 40
    assert "created user newcomer" in made.stderr
    missing = manage("nobody")
    assert missing.returncode != 0 and missing.stdout == ""
    assert "no user 'nobody'; pass --create-user" in missing.stderr
