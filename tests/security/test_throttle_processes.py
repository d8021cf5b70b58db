"""In the embedded mode (no Redis) a limit holds in total across the site's processes.

The throttles counted in each process's own memory, so every gunicorn worker had its own budget:
45 of 65 submissions went through against a limit of 20, and every sign-up was accepted. Here two
real ``manage.py shell`` processes on one data directory (one SQLite file, no ``REDIS_URL``) send
requests at the same moment through Django's request handler: sign-ups, submissions and failed
logins together may not pass the limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 4
PER_PROCESS = 4  # two processes: twice the limit is tried

#: Run in each process: wait for the start signal, send PER_PROCESS requests of each kind, print
#: the status codes as JSON.
CLIENT = textwrap.dedent(
    """
    import json, os, time
    from pathlib import Path
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()
    me, n = os.environ["WHO"], int(os.environ["PER_PROCESS"])
    start = Path(os.environ["START_FILE"])
    while not start.exists():
        time.sleep(0.01)
    codes = {"signup": [], "submit": [], "login": []}
    for i in range(n):
        anonymous = Client(REMOTE_ADDR="203.0.113.9")
        data = {"username": f"{me}{i}", "email": f"{me}{i}@example.org",
                "password1": "correct horse battery staple", "password2": "correct horse battery staple"}
        codes["signup"].append(anonymous.post("/signup/", data).status_code)
        researcher = Client(REMOTE_ADDR="203.0.113.10")
        researcher.force_login(get_user_model().objects.get(username="ada"))
        codes["submit"].append(researcher.post("/api/v1/submissions", {"metadata": "{}"}).status_code)
        guesser = Client(REMOTE_ADDR="203.0.113.11")
        login = {"username": "ada", "password": f"wrong {me} {i}"}
        codes["login"].append(guesser.post("/accounts/login/", login).status_code)
    print("CODES " + json.dumps(codes))
    """
)


def _manage(env: dict, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def _run(env: dict, *args: str) -> str:
    proc = _manage(env, *args)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    return out


@pytest.fixture
def embedded_env(tmp_path) -> dict:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "PROBEBENCH_DB_NAME")
    }
    env.update(
        PROBEBENCH_DATA_DIR=str(tmp_path / "data"),
        PROBEBENCH_RATE_SIGNUP=f"{LIMIT}/hour",
        PROBEBENCH_RATE_SUBMISSIONS=f"{LIMIT}/hour",
        PROBEBENCH_LOGIN_FAILURE_LIMIT=str(LIMIT),
        PER_PROCESS=str(PER_PROCESS),
        START_FILE=str(tmp_path / "start"),
        DJANGO_SETTINGS_MODULE="probebench.settings",
    )
    _run(env, "migrate", "--no-input", "-v", "0")
    _run(
        env,
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model;"
        " get_user_model().objects.create_user('ada', 'ada@example.org', 'correct horse battery staple')",
    )
    return env


def test_the_limits_hold_in_total_across_two_processes(embedded_env, tmp_path):
    procs = [_manage({**embedded_env, "WHO": who}, "shell", "-c", CLIENT) for who in ("p", "q")]
    (tmp_path / "start").touch()  # both processes are up: go
    codes: dict[str, list[int]] = {"signup": [], "submit": [], "login": []}
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-3000:]
        line = next(line for line in out.splitlines() if line.startswith("CODES "))
        for kind, seen in json.loads(line.removeprefix("CODES ")).items():
            codes[kind] += seen

    total = 2 * PER_PROCESS
    assert codes["signup"].count(302) == LIMIT, codes  # a sign-up redirects to the submit page
    assert codes["signup"].count(429) == total - LIMIT, codes
    assert codes["submit"].count(400) == LIMIT, codes  # accepted for checking (and refused: "{}")
    assert codes["submit"].count(429) == total - LIMIT, codes
    # the lockout counts in the database: the failures after the limit are locked out
    assert codes["login"].count(429) >= total - LIMIT, codes
