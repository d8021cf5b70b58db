"""The researcher's client against the real dev server: ``python -m evaluator submit`` and
``reproduce`` run as separate processes, talking HTTP to a live server (pytest-django's
``live_server`` on loopback) whose runs a real Celery worker evaluates on SmolLM2."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from leaderboard.models import Score, Submission
from leaderboard.services.tokens import api_token_create
from tests.integration.conftest import settled, submit_dir, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def client(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [sys.executable, "-m", "evaluator", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.model
def test_submit_refuses_clearly_a_bad_token_a_wrong_url_a_down_server_and_an_invalid_probe(
    live_server, mini, trained, researcher, tmp_path, settings
):
    token = api_token_create(user=researcher)
    probe = str(trained["truth"])

    bad_token = client("submit", probe, "--server", live_server.url, "--token", "not-a-token")
    assert bad_token.returncode != 0 and bad_token.stdout == ""
    assert "refused the token (HTTP 401" in one_line_error(bad_token)

    wrong_url = client("submit", probe, "--server", f"{live_server.url}/nowhere", "--token", token)
    assert wrong_url.returncode != 0
    assert "HTTP 404" in one_line_error(wrong_url) and "/nowhere/api/v1/submissions" in wrong_url.stderr

    down = client("submit", probe, "--server", f"http://127.0.0.1:{free_port()}", "--token", token)
    assert down.returncode != 0
    assert "connection refused (is the server running?)" in one_line_error(down)

    # a layer out of range: the server's field and message come back, nothing is created
    invalid = tmp_path / "invalid"
    shutil.copytree(trained["truth"], invalid)
    meta = json.loads((invalid / "probe.json").read_text())
    (invalid / "probe.json").write_text(json.dumps(meta | {"layer": 99}))
    refused = client("submit", str(invalid), "--server", live_server.url, "--token", token)
    assert refused.returncode != 0
    message = one_line_error(refused)
    assert "submission refused (HTTP 400): field layer:" in message and "out of range" in message
    assert Submission.objects.count() == 0

    # an artifact over the server's size limit: 413, with the field and the limit
    settings.MAX_REQUEST_BYTES = 2048
    too_big = client("submit", probe, "--server", live_server.url, "--token", token)
    assert too_big.returncode != 0
    message = one_line_error(too_big)
    assert "submission refused (HTTP 413): field artifact:" in message and "at most 2,048 bytes" in message
    assert Submission.objects.count() == 0

    unknown = client("reproduce", "--server", live_server.url, "--probe", "no-such-probe@v1")
    assert unknown.returncode != 0
    assert "no public probe no-such-probe@v1" in one_line_error(unknown)


@pytest.mark.model
def test_waiting_on_a_submission_that_is_rejected_ends_with_the_public_reason(
    live_server, mini, trained, worker_env, researcher, maintainer
):
    from leaderboard.services.submissions import submission_reject

    # no worker: the runs stay queued until a maintainer rejects the submission
    token = api_token_create(user=researcher)
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    argv = ["submit", str(trained["truth"]), "--server", live_server.url, "--token", token, "--wait"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaluator", *argv, "--poll", "0.3"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_for(lambda: Submission.objects.exists(), timeout=60, what="the submission")
        submission_reject(
            submission=Submission.objects.get(), by=maintainer, reason="duplicates an existing probe"
        )
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0 and stdout == ""
    message = one_line_error(subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr))
    assert message.endswith("rejected: duplicates an existing probe")


@pytest.mark.model
def test_a_submission_followed_until_scored_is_reproduced_and_a_tampered_score_is_caught(
    live_server, mini, trained, start_worker, researcher, system_account, settings, tmp_path
):
    from evaluator.data.registry.load import load_registry

    worker = start_worker("client")
    # the base model's eval-awareness reference probe is on the board first
    ref = submit_dir(
        system_account, trained["reference"], via="seed", is_reference=True, reference_role="eval_awareness"
    )
    wait_for(
        lambda: settled(ref.pk),
        timeout=900,
        what="the reference probe to be scored",
        workers=[worker],
    )
    token = api_token_create(user=researcher)

    submitted = client(
        "submit",
        str(trained["truth"]),
        "--server",
        live_server.url,
        "--token",
        token,
        "--wait",
        "--poll",
        "0.5",
    )
    assert submitted.returncode == 0, submitted.stderr[-3000:] + worker.output()[-3000:]
    out = json.loads(submitted.stdout)
    sub = Submission.objects.select_related("probe_version__probe").get(pk=out["id"])
    assert out["status"] == sub.status == "scored"
    score = Score.objects.get(probe_version=sub.probe_version, spec_id="v0.0.3")
    row = out["board_row"]
    assert row["probe"] == out["probe"] == sub.probe_version.probe.slug
    assert row["version"] == out["version"] == 1
    assert row["total"] == pytest.approx(score.total)
    assert row["components"]["auroc"]["raw"] == pytest.approx(score.measurements["auroc"])

    reproduce = (
        "reproduce",
        "--server",
        live_server.url,
        "--probe",
        f"{out['probe']}@v1",
        "--registry",
        str(mini),
        "--cache-dir",
        str(settings.CACHE_DIR),
    )
    agreed = client(*reproduce)
    assert agreed.returncode == 0, agreed.stderr[-3000:]
    report = json.loads(agreed.stdout)
    assert report["verdict"] == "agree" and report["artifact_verified"]
    assert report["artifact_sha256"] == sub.probe_version.artifact_sha256
    judged = {(c["task"], c["metric"]) for c in report["comparisons"] if c["verdict"] == "agree"}
    for task in score.per_task:
        assert {(task, m) for m in ("auroc", "auroc_ci_lo", "auroc_ea", "ece", "brier")} <= judged
    assert ("aggregate", "reproduced") in judged
    auroc_ea = next(c for c in report["comparisons"] if c["metric"] == "auroc_ea")
    assert auroc_ea["board"] is not None  # measured with the server's reference probe
    assert report["ea_reference"]["probe"] == ref.probe_version.probe.slug
    assert report["protocol"] == score.protocol == "p2"
    assert report["tolerances"]["auroc"] == 0.002 and report["tolerances"]["ece"] == 0.005

    # a registry whose test rows are not the server's is refused before anything is measured
    other = tmp_path / "other-registry"
    shutil.copytree(mini, other)
    tasks_yaml = other / "tasks.yaml"
    test_sha = load_registry(mini).task(sorted(score.per_task)[0]).splits["test"].sha256
    tasks_yaml.write_text(tasks_yaml.read_text().replace(test_sha, "ab" * 32))
    elsewhere = client(*reproduce[:-4], "--registry", str(other), "--cache-dir", str(settings.CACHE_DIR))
    assert elsewhere.returncode != 0
    assert "split (SHA-256 abababababab…) is not the server's" in one_line_error(elsewhere)

    # someone changes one stored number: the receipt no longer matches
    task = sorted(score.per_task)[0]
    per_task = score.per_task
    per_task[task]["ece"] += 0.03
    Score.objects.filter(pk=score.pk).update(per_task=per_task)
    caught = client(*reproduce)
    assert caught.returncode == 1, caught.stderr[-3000:]
    assert f"disagree: ece on {task}" in one_line_error(caught)
    report = json.loads(caught.stdout)
    assert report["verdict"] == "disagree"
    assert [(c["task"], c["metric"]) for c in report["comparisons"] if c["verdict"] == "disagree"] == [
        (task, "ece")
    ]

    # an artifact changed on the server's disk is not the one the API publishes: refused
    stored = Path(settings.ARTIFACT_ROOT) / sub.probe_version.artifact_path
    data = bytearray(stored.read_bytes())
    data[-1] ^= 0x01
    stored.write_bytes(bytes(data))
    swapped = client(*reproduce)
    assert swapped.returncode != 0
    message = one_line_error(swapped)
    assert "the downloaded artifact's SHA-256" in message
    assert f"is not the published {sub.probe_version.artifact_sha256}" in message
