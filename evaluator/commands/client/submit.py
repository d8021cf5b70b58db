"""``submit`` and ``follow``: send a probe directory to a ProbeBench server and follow its runs.

``submit`` posts a probe directory (probe.safetensors + probe.json) to ``POST /api/v1/submissions``
and prints the submission's id, API URL, page and ``follow`` command; with ``--wait`` (or later,
``follow ID``) it polls ``GET /api/v1/submissions/<id>``, printing the status, the queue position
and the server's ETA, until the submission is scored (then prints its board row) or failed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from evaluator.commands.client.transport import (
    ClientError,
    api_error,
    get_json,
    http_request,
    ident,
    integer,
    is_json,
    multipart_encode,
    printable,
    same_origin_url,
    server_answer,
    server_args,
    server_connect,
)

FINAL_STATUSES = ("scored", "failed", "rejected")


def _follow_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--poll", type=float, default=2.0, help="seconds between status polls (default 2)")
    p.add_argument("--timeout", type=float, default=3600.0, help="give up waiting after this many seconds")


def submit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, help="probe directory: probe.safetensors + probe.json")
    server_args(p, token="API token (your account page; default $PROBEBENCH_TOKEN)")
    p.add_argument("--wait", action="store_true", help="follow the runs until scored or failed")
    _follow_options(p)


def follow_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", type=int, help="the submission's id (printed by submit)")
    server_args(p, token="API token of the submission's owner (default $PROBEBENCH_TOKEN)")
    _follow_options(p)


def probe_dir_read(directory: Path) -> tuple[bytes, str]:
    """The artifact bytes and the metadata text of a probe directory."""
    if not directory.is_dir():
        raise ClientError(f"{directory}: not a directory (expected probe.safetensors + probe.json)")
    artifact, meta = directory / "probe.safetensors", directory / "probe.json"
    missing = [p.name for p in (artifact, meta) if not p.is_file()]
    if missing:
        raise ClientError(f"{directory}: missing {', '.join(missing)}")
    text = meta.read_text(encoding="utf-8")
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClientError(f"{meta}: not valid JSON: {exc}") from None
    return artifact.read_bytes(), text


def eta_text(seconds: Any) -> str:
    """``4 min 10 s`` for a number of seconds; ``unknown`` for null (no measured run time yet)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return "unknown"
    total = int(round(max(seconds, 0.0)))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def submission_progress_line(detail: dict[str, Any]) -> str:
    """One line on where a submission stands: its status, queue position, runs done and ETA."""
    runs = detail.get("runs")
    runs = runs if isinstance(runs, list) else []
    done = sum(isinstance(r, dict) and r.get("status") in ("succeeded", "failed") for r in runs)
    status = str(detail.get("status") or "unknown")
    parts = [status]
    position = detail.get("queue_position")
    if isinstance(position, int) and not isinstance(position, bool):
        parts.append("next in the queue" if position == 1 else f"queue position {position}")
    if runs:
        parts.append(f"{done}/{len(runs)} runs done")
    step = detail.get("step")
    if isinstance(step, str) and step and status not in FINAL_STATUSES:
        parts.append(step[:60])
    if status not in FINAL_STATUSES:
        parts.append(f"ETA {eta_text(detail.get('eta_seconds'))}")
    return printable(" · ".join(parts))


class _StatusLine:
    """The submission's progress on stderr: one line rewritten in place on a terminal, a new line
    whenever the status, the queue position or the runs done change otherwise (logs, pipes)."""

    def __init__(self, label: str):
        self.label, self.tty = label, sys.stderr.isatty()
        self.last_key: tuple | None = None
        self.width = 0

    def show(self, detail: dict[str, Any]) -> None:
        line = f"{self.label}: {submission_progress_line(detail)}"
        if self.tty:
            print("\r" + line.ljust(self.width), end="", file=sys.stderr, flush=True)
            self.width = len(line)
            return
        runs = detail.get("runs")
        if not isinstance(runs, list):
            runs = []
        done = sum(isinstance(r, dict) and r.get("status") in ("succeeded", "failed") for r in runs)
        key = (detail.get("status"), detail.get("queue_position"), len(runs), done)
        if key != self.last_key:
            print(line, file=sys.stderr, flush=True)
            self.last_key = key

    def close(self) -> None:
        if self.tty and self.width:
            print(file=sys.stderr, flush=True)


def _settled(detail: dict[str, Any]) -> bool:
    """A scored submission is settled once its progress reaches 1 (its Score then holds the
    secondary axes too); a server that sends no usable progress is not waited on."""
    progress = detail.get("progress")
    if detail.get("status") != "scored" or isinstance(progress, bool):
        return True
    if not isinstance(progress, (int, float)) or not math.isfinite(progress):
        return True
    return progress >= 1.0


def submission_wait(
    *, server: str, token: str, submission_id: int, poll: float, timeout: float
) -> dict[str, Any]:
    """Poll the submission until it is final and, once scored, until its secondary runs have
    finished too; a progress bar on stderr shows its step."""
    url = f"{server}/api/v1/submissions/{submission_id}"
    line = _StatusLine(f"submission {submission_id}")
    deadline = time.monotonic() + timeout
    try:
        while True:
            resp = http_request("GET", url, token=token)
            if resp.status == 404 and is_json(resp):
                raise ClientError(
                    f"no submission {submission_id} of this token's user on {server}"
                    " (a submission is visible to its owner and to staff)"
                )
            if resp.status != 200:
                raise api_error(resp, f"submission {submission_id}")
            detail = resp.json_object(f"submission {submission_id}")
            line.show(detail)
            # a probe is scored once its primary runs are done; its secondary runs (transfer,
            # reproduce, steer) finish after: follow them too, so the printed row is complete (its
            # progress reaches 1 once the Score has been recomputed with the last of them)
            if detail.get("status") in FINAL_STATUSES and _settled(detail):
                return detail
            if time.monotonic() > deadline:
                raise ClientError(
                    f"submission {submission_id} still {detail.get('status')} after {timeout:.0f} s;"
                    f" follow it again with: python -m evaluator follow {submission_id} --server {server}"
                )
            time.sleep(poll)
    finally:
        line.close()


def board_row_get(*, server: str, probe: str, category: str) -> dict[str, Any] | None:
    """The probe's row on the public board (its category, the latest spec), or None."""
    query = urllib.parse.urlencode({"category": category, "q": probe, "limit": 1000})
    url = f"{server}/api/v1/leaderboard?{query}"
    board = get_json(url, what="the board")
    rows = board.get("results") if isinstance(board, dict) else None
    if not isinstance(rows, list):
        raise ClientError(f"the board: malformed answer from {url} (no results list)")
    return next((r for r in rows if isinstance(r, dict) and r.get("probe") == probe), None)


def submission_outcome(*, server: str, detail: dict[str, Any]) -> dict[str, Any]:
    """A final submission: its scored summary and board row, or a ClientError saying why not."""
    url = f"{server}/api/v1/submissions"
    with server_answer("the submission", url):
        sid = integer(detail["id"], "submission id")
        if detail["status"] != "scored":
            reason = detail.get("failure_reason") or detail.get("rejection_reason") or "no reason given"
            failed = [
                f"{r['kind']} {r['task']}/{r['split']}: {r['error']}"
                for r in detail.get("runs") or []
                if r.get("error")
            ]
            raise ClientError(
                f"submission {sid} {detail['status']}: {reason}" + (f" ({failed[0]})" if failed else "")
            )
        probe = ident(detail["probe"], "probe id")
        category = ident(detail.get("category") or "", "category") if detail.get("category") else None
        out = {
            "id": sid,
            "status": detail["status"],
            "probe": probe,
            "version": integer(detail["version"], "version"),
            "artifact_sha256": str(detail["artifact_sha256"]),
            "page": detail.get("page"),
            "reproduced": detail.get("reproduced"),
        }
    out["board_row"] = board_row_get(server=server, probe=probe, category=category) if category else None
    return out


def run_submit(args: argparse.Namespace) -> dict:
    server = server_connect(args, token_required=True)
    artifact, metadata = probe_dir_read(args.dir)
    body, content_type = multipart_encode(
        {"metadata": metadata}, {"artifact": ("probe.safetensors", artifact)}
    )
    url = f"{server}/api/v1/submissions"
    resp = http_request("POST", url, token=args.token, body=body, content_type=content_type)
    if resp.status != 201:
        raise api_error(resp, "submission refused")
    created = resp.json_object("the new submission")
    with server_answer("the new submission", url):
        sid = integer(created["id"], "submission id")
        follow = f"python -m evaluator follow {sid} --server {server}"
        out = {
            "id": sid,
            "status": str(created["status"]),
            "url": same_origin_url(
                server, created.get("url") or f"/api/v1/submissions/{sid}", what="its API URL"
            ),
            "page": same_origin_url(server, created["page"], what="its page")
            if created.get("page")
            else None,
            "follow": follow,
        }
    print(printable(f"submitted: submission {sid} ({out['status']})"), file=sys.stderr)
    print(printable(f"  API:    {out['url']}  (with the token)"), file=sys.stderr)
    if out["page"]:
        print(printable(f"  page:   {out['page']}  (signed in as its owner)"), file=sys.stderr)
    print(printable(f"  follow: {follow} --token …"), file=sys.stderr)
    if not args.wait:
        return out
    detail = submission_wait(
        server=server, token=args.token, submission_id=sid, poll=args.poll, timeout=args.timeout
    )
    return submission_outcome(server=server, detail=detail)


def run_follow(args: argparse.Namespace) -> dict:
    """Re-attach to a submission: its progress until it is final, then as ``submit --wait``."""
    server = server_connect(args, token_required=True)
    if args.id < 1:
        raise ClientError(f"submission id {args.id}: expected a positive integer")
    detail = submission_wait(
        server=server, token=args.token, submission_id=args.id, poll=args.poll, timeout=args.timeout
    )
    return submission_outcome(server=server, detail=detail)
