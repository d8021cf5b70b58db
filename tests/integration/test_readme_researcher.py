"""The README's researcher block, run as written against a live server and a real worker, as a
token-only user: the block is read from README.md, so the test breaks when the README changes.

Each command of the block runs in bash from the project root, with the README's placeholders
filled in (TASK_ID, SUBMISSION_ID, PROBE_ID[@vN]) and, for the evaluator's model commands, the
test's small registry and the shared cache appended. ``PORT`` is the live server's. The token
command runs with no SECRET_KEY in the environment, against a data directory holding the
``secret_key`` that ``make demo`` writes, as a fresh clone would. ``evaluate`` is the measurement
the worker makes and ``reproduce`` repeats; it is not run a third time here (it has its own
tests). The worker starts only after ``follow`` has shown the submission waiting in the queue.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from leaderboard.models import ApiToken, Submission

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.model]
ROOT = Path(__file__).resolve().parents[2]
HEADING = "### The researcher's path"


def readme_block() -> list[str]:
    """The commands of the first ``sh`` block under the researcher's heading (continuations joined)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(HEADING) :]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, "the researcher's section has no sh block"
    joined = match.group(1).replace("\\\n", " ")
    return [" ".join(line.split()) for line in joined.splitlines() if line.strip()]


def command_of(line: str) -> str:
    """What a line of the block does: the evaluator subcommand, the token step or a variable."""
    if m := re.match(r"\.venv/bin/python -m evaluator (\w+) ", line):
        return m.group(1)
    if "create_api_token" in line:
        return "token"
    if m := re.match(r"(\w+)=\S+(\s+#.*)?$", line):
        return f"set {m.group(1)}"
    return line


def test_the_block_is_the_one_this_test_runs():
    assert [command_of(line) for line in readme_block()] == [
        "set PORT",
        "train",
        "evaluate",
        "token",
        "submit",
        "follow",
        "reproduce",
    ]


def test_the_readme_researcher_block_works_as_written_for_a_token_only_user(
    live_server, mini, worker_env, start_worker, tmp_path, settings
):
    lines = {command_of(line): line for line in readme_block()}
    port = re.search(r":(\d+)$", live_server.url).group(1)
    local = f" --registry {mini} --cache-dir {settings.CACHE_DIR}"

    # a fresh clone's data directory: `make demo` wrote the secret there; nothing names it
    data_dir = tmp_path / "var"
    data_dir.mkdir()
    (data_dir / "secret_key").write_text("a-secret-make-demo-wrote\n")
    env = {
        k: v for k, v in worker_env.items() if k not in ("SECRET_KEY", "SECRET_KEY_FILE", "PROBEBENCH_TOKEN")
    }
    env |= {"PROBEBENCH_DATA_DIR": str(data_dir), "PORT": port}
    env.pop("DJANGO_SETTINGS_MODULE")

    def sh(line: str, *, extra_env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "-c", line],
            cwd=tmp_path / "work",
            env=env | (extra_env or {}),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    # run from a copy of the clone's entry points: `.venv/bin/python`, manage.py, my-probe/ here
    work = tmp_path / "work"
    work.mkdir()
    for name in ("manage.py", "probebench", "leaderboard", "evaluator", "tasks.yaml", "registry", ".venv"):
        (work / name).symlink_to(ROOT / name)

    trained = sh(lines["train"].replace("TASK_ID", "cities-truth-v1") + local)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (work / "my-probe" / "probe.safetensors").is_file()

    token_step = sh(lines["token"] + '\nprintf "TOKEN=%s\\n" "$TOKEN"')
    assert token_step.returncode == 0, token_step.stderr
    token = token_step.stdout.strip().removeprefix("TOKEN=")
    assert len(token) > 20 and "created user ada" in token_step.stderr
    assert ApiToken.objects.get(user__username="ada")
    env["TOKEN"] = token  # the block's later lines read $TOKEN as the shell would

    submitted = sh(lines["submit"])
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    out = json.loads(submitted.stdout)
    sid = out["id"]
    sub = Submission.objects.select_related("probe_version__probe", "submitter").get(pk=sid)
    assert sub.submitter.username == "ada" and not sub.submitter.has_usable_password()
    assert f"submitted: submission {sid} (queued)" in submitted.stderr
    assert f"/my/submissions/{sid}/" in submitted.stderr and f"evaluator follow {sid}" in submitted.stderr
    slug = sub.probe_version.probe.slug

    # before any worker: reproduce says how far the owner's probe has got
    reproduce = lines["reproduce"].replace("PROBE_ID[@vN]", f"{slug}@v1") + local
    early = sh(reproduce, extra_env={"PROBEBENCH_TOKEN": token}, timeout=120)
    assert early.returncode != 0 and "Traceback" not in early.stderr
    assert f"{slug}@v1 is not public yet: submission {sid} is queued" in early.stderr

    follow = subprocess.Popen(
        ["bash", "-c", lines["follow"].replace("SUBMISSION_ID", str(sid)) + " --poll 0.5"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # each pipe read by its own thread (communicate() would read stderr too, racing the reader)
    progress: list[str] = []
    output: list[str] = []
    reader = threading.Thread(target=lambda: progress.extend(follow.stderr), daemon=True)
    out_reader = threading.Thread(target=lambda: output.extend(follow.stdout), daemon=True)
    reader.start()
    out_reader.start()
    worker = None
    try:
        deadline = time.monotonic() + 120
        while not progress and time.monotonic() < deadline:
            time.sleep(0.2)
        assert progress, "follow printed nothing"
        assert progress[0].startswith(f"submission {sid}: queued · next in the queue · 0/")
        assert "ETA unknown" in progress[0]  # no run has finished yet: nothing measured
        worker = start_worker("readme")
        follow.wait(timeout=1500)
    finally:
        follow.kill()
    reader.join(timeout=10)
    out_reader.join(timeout=10)
    stdout = "".join(output)
    assert follow.returncode == 0, "".join(progress)[-3000:] + (worker.output()[-3000:] if worker else "")
    followed = json.loads(stdout)
    assert followed["id"] == sid and followed["status"] == "scored"
    assert followed["board_row"]["probe"] == slug
    # follow reports the runs as they finish (whether it catches one running depends on the timing)
    assert any(" runs done" in line for line in progress[1:]), progress

    reproduced = sh(reproduce)
    assert reproduced.returncode == 0, reproduced.stderr[-3000:]
    report = json.loads(reproduced.stdout)
    assert report["verdict"] == "agree" and report["probe"] == slug and report["version"] == 1
    shutil.rmtree(work / "my-probe", ignore_errors=True)
