"""``follow`` and ``reproduce`` say where a submission stands, against a scripted server: the queue
position and the ETA while it waits, the reason when it failed (for the token's owner)."""

from __future__ import annotations

import json

import pytest

from evaluator.commands.client.submit import eta_text, submission_progress_line
from tests.security.test_client_hostile_server import (
    TOKEN,
    HostileServer,
    client,
    json_answer,
    one_line_error,
)


@pytest.fixture
def server():
    s = HostileServer()
    yield s
    s.close()


def runs(done: int, total: int) -> list[dict]:
    return [{"status": "succeeded" if i < done else "queued"} for i in range(total)]


def test_eta_and_progress_read_as_a_person_would_say_them():
    assert [eta_text(s) for s in (None, 7, 125, 4000)] == ["unknown", "7 s", "2 min 05 s", "1 h 06 min"]
    line = submission_progress_line(
        {"status": "queued", "queue_position": 4, "runs": runs(0, 3), "eta_seconds": 610.0}
    )
    assert line == "queued · queue position 4 · 0/3 runs done · ETA 10 min 10 s"
    assert submission_progress_line({"status": "scored", "runs": runs(3, 3)}) == "scored · 3/3 runs done"


def test_follow_reattaches_and_prints_each_change_until_scored(server):
    states = iter(
        [
            {"status": "queued", "queue_position": 3, "eta_seconds": None},
            {"status": "queued", "queue_position": 3, "eta_seconds": None},
            {"status": "queued", "queue_position": 1, "eta_seconds": 95.0},
            {"status": "running", "queue_position": None, "eta_seconds": 40.0, "done": 1},
        ]
    )
    last = {"status": "scored", "done": 3, "progress": 1.0}

    def detail(h):
        state = next(states, last)
        body = {
            "id": 7,
            "probe": "my-probe",
            "version": 1,
            "artifact_sha256": "0" * 64,
            "category": "hallucination",
            "runs": runs(state.pop("done", 0), 3),
        } | state
        json_answer(200, body)(h)

    server.routes["GET /api/v1/submissions/7"] = detail
    server.routes["GET /api/v1/leaderboard"] = json_answer(
        200, {"results": [{"probe": "my-probe", "total": 0.5}]}
    )
    proc = client("follow", "7", "--server", server.url, "--token", TOKEN, "--poll", "0.05")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "submission 7: queued · queue position 3 · 0/3 runs done · ETA unknown",
        "submission 7: queued · next in the queue · 0/3 runs done · ETA 1 min 35 s",
        "submission 7: running · 1/3 runs done · ETA 40 s",
        "submission 7: scored · 3/3 runs done",
    ]
    out = json.loads(proc.stdout)
    assert out["status"] == "scored" and out["board_row"] == {"probe": "my-probe", "total": 0.5}
    assert all(r["headers"]["Authorization"] == f"Token {TOKEN}" for r in server.requests[:-1])
    assert "Authorization" not in server.requests[-1]["headers"]  # the public board gets no token


def test_follow_of_a_submission_that_is_not_yours_says_so(server):
    proc = client("follow", "7", "--server", server.url, "--token", TOKEN)
    assert "no submission 7 of this token's user" in one_line_error(proc)


@pytest.mark.parametrize(
    "status,extra,expected",
    [
        ("failed", {"failure_reason": "the artifact's layer 40 is out of range"}, "submission 7 failed (the artifact's layer 40 is out of range)"),
        ("queued", {"queue_position": 2, "eta_seconds": 125.0}, "is not public yet: submission 7 is queued · queue position 2 · 0/3 runs done · ETA 2 min 05 s"),
    ],
)  # fmt: skip
def test_reproduce_says_how_far_the_owners_probe_has_got(server, status, extra, expected):
    server.routes["GET /api/v1/submissions"] = json_answer(
        200, {"results": [{"id": 7, "probe": "my-probe", "version": 1, "status": status}]}
    )
    server.routes["GET /api/v1/submissions/7"] = json_answer(
        200, {"id": 7, "status": status, "runs": runs(0, 3)} | extra
    )
    anonymous = client("reproduce", "--server", server.url, "--probe", "my-probe")
    assert "no public probe my-probe" in one_line_error(anonymous) and "pass --token" in anonymous.stderr
    assert not any(r["path"].startswith("/api/v1/submissions") for r in server.requests)
    owner = client("reproduce", "--server", server.url, "--probe", "my-probe@v1", "--token", TOKEN)
    assert expected in one_line_error(owner)
    probe_requests = [r for r in server.requests if r["path"].startswith("/api/v1/probes/")]
    assert not any("Authorization" in r["headers"] for r in probe_requests)  # downloads carry no token
