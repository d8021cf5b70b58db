"""A bounded load test of the production configuration on loopback (BENCHMARKS.md, "Load test").

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/pb_d REDIS_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python bench/load_test.py [--clients 50] [--seconds 60] [--drain 50] [--valid 12]

It starts what docker/ runs, on this machine: gunicorn with docker/gunicorn.conf.py, one Celery
worker (concurrency 1), PostgreSQL and Redis given by the environment (the database named
``<name>_loadtest`` is recreated and the Redis database flushed: use disposable ones). As in
docker/, the migrations run as the role of ``DATABASE_URL`` (which owns the tables) and gunicorn and
the worker as a role that owns nothing (``<name>_loadtest_app``, recreated), granted row access by
docker/postgres/grants.sql. The registry is
the small real one of the integration tests (real split rows, fewer of them) and the base model the
smallest one, all-MiniLM-L6-v2, so that valid submissions are really evaluated in the time.

``--clients`` threads, each a researcher with its own API token, for ``--seconds`` mix: board pages,
API reads, invalid submissions (four kinds), and ``--valid`` real probes in all (a probe trained with
the evaluator's CLI, each with its own weights and name). Then it waits up to ``--drain`` seconds for
every accepted submission to reach a terminal state, and prints: requests served, p50/p95 latency
(all and by kind), status counts, 5xx (goal: zero), submissions accepted vs. terminal vs. stored
("nothing lost": every 201 is a row, and every row reached scored/failed/rejected). Everything
stops by itself; the whole run is bounded by ``--seconds + --drain`` plus start-up.

The anonymous API rate limit is raised for the run (``PROBEBENCH_RATE_ANON``): fifty clients on one
loopback address would otherwise be one anonymous client. Per-researcher limits stay as configured.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODEL = "all-minilm-l6-v2"
TASK = "cities-truth-v1"
TERMINAL = {"scored", "failed", "rejected"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fresh_database(url: str) -> str:
    """Recreate ``<name>_loadtest`` on the server of ``url``; return its URL."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/") + "_loadtest"
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def site_role(url: str) -> str:
    """Recreate the role ``<name>_app`` of the database of ``url`` (made by ``fresh_database``),
    give it the grants of docker/postgres/grants.sql, run as the owner; return its URL."""
    import psycopg

    parts = urlsplit(url)
    role = parts.path.lstrip("/") + "_app"
    password = secrets.token_hex(16)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')  # its database was dropped: no grants left
        conn.execute(
            f"CREATE ROLE \"{role}\" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '{password}'"
        )
        conn.execute("SELECT set_config('probebench.app_role', %s, false)", [role])
        conn.execute((ROOT / "docker" / "postgres" / "grants.sql").read_text().encode())
    host = parts.hostname or "127.0.0.1"
    return urlunsplit(parts._replace(netloc=f"{role}:{password}@{host}:{parts.port or 5432}"))


def run(cmd: list[str], env: dict, **kw) -> str:
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def probe_train(env: dict, registry: Path, out: Path) -> Path:
    run(
        [sys.executable, "-m", "evaluator", "train", "--registry", str(registry), "--cache-dir",
         env["PROBEBENCH_CACHE_DIR"], "--task", TASK, "--model", MODEL, "--layer", "4",
         "--method", "logistic_regression", "--out", str(out)],
        env,
        timeout=600,
    )  # fmt: skip
    return out


def probe_variants(probe_dir: Path, n: int, tag: str) -> list[tuple[bytes, str]]:
    """``n`` distinct valid probes: the trained weights nudged (a different artifact each) and a
    name of their own."""
    import numpy as np
    from safetensors.numpy import load_file, save

    tensors = load_file(str(probe_dir / "probe.safetensors"))
    metadata = json.loads((probe_dir / "probe.json").read_text())
    out = []
    for i in range(n):
        nudged = {k: (v + np.float32(1e-4 * (i + 1)) if k == "bias" else v) for k, v in tensors.items()}
        out.append((save(nudged), json.dumps({**metadata, "name": f"Load test {tag} probe {i}"})))
    return out


def invalid_submissions(valid: tuple[bytes, str]) -> list[tuple[str, dict, dict]]:
    artifact, metadata = valid
    meta = json.loads(metadata)
    return [
        ("not-json", {"metadata": "{not json"}, {"artifact": ("probe.safetensors", artifact)}),
        ("no-artifact", {"metadata": metadata}, {}),
        ("not-safetensors", {"metadata": metadata}, {"artifact": ("probe.safetensors", b"\x00" * 64)}),
        (
            "unknown-model",
            {"metadata": json.dumps({**meta, "base_model": "gpt-17"})},
            {"artifact": ("probe.safetensors", artifact)},
        ),
    ]


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.status: Counter = Counter()
        self.by_kind_status: Counter = Counter()
        self.errors: Counter = Counter()
        self.accepted: dict[str, list[int]] = defaultdict(list)  # username -> submission ids
        self.samples: dict[tuple[str, int], str] = {}  # one response body per (kind, 429 or 5xx)

    def record(self, kind: str, seconds: float, status: int | None, error: str = "") -> None:
        with self.lock:
            self.latency[kind].append(seconds)
            if status is None:
                self.errors[error] += 1
            else:
                self.status[status] += 1
                self.by_kind_status[(kind, status)] += 1


def client_loop(
    *,
    base: str,
    username: str,
    token: str,
    until: float,
    rec: Recorder,
    valid_queue: list,
    queue_lock: threading.Lock,
    invalid: list,
    seed: int,
) -> None:
    rnd = random.Random(seed)
    session = requests.Session()
    auth = {"Authorization": f"Token {token}"}
    reads_board = ["/", "/tasks/", "/queue/", "/category/hallucination/"]
    reads_api = ["/api/v1/leaderboard?category=hallucination", "/api/v1/categories", "/api/v1/tasks",
                 "/api/v1/queue", "/api/v1/models"]  # fmt: skip
    while time.monotonic() < until:
        roll = rnd.random()
        kwargs: dict = {"timeout": 30}
        if roll < 0.40:
            kind, method, url = "board page", "GET", rnd.choice(reads_board)
        elif roll < 0.75:
            kind, method, url = "API read", "GET", rnd.choice(reads_api)
        elif roll < 0.85:
            kind, method, url = "own submissions (API)", "GET", "/api/v1/submissions"
            kwargs["headers"] = auth
        else:
            with queue_lock:
                item = valid_queue.pop() if valid_queue and rnd.random() < 0.5 else None
            method, url = "POST", "/api/v1/submissions"
            kwargs["headers"] = auth
            if item is not None:
                kind = "valid submission"
                artifact, metadata = item
                kwargs["data"] = {"metadata": metadata}
                kwargs["files"] = {"artifact": ("probe.safetensors", io.BytesIO(artifact))}
            else:
                name, data, files = rnd.choice(invalid)
                kind = "invalid submission"
                kwargs["data"] = data
                kwargs["files"] = {k: (fn, io.BytesIO(b)) for k, (fn, b) in files.items()}
        started = time.monotonic()
        try:
            response = session.request(method, base + url, **kwargs)
        except requests.RequestException as exc:
            rec.record(kind, time.monotonic() - started, None, type(exc).__name__)
            continue
        rec.record(kind, time.monotonic() - started, response.status_code)
        if response.status_code == 429 or response.status_code >= 500:
            with rec.lock:
                rec.samples.setdefault((kind, response.status_code), f"{method} {url}: {response.text[:200]}")
        if kind == "valid submission" and response.status_code == 201:
            with rec.lock:
                rec.accepted[username].append(response.json()["id"])
        elif kind == "valid submission":
            print(f"valid submission refused: {response.status_code} {response.text[:300]}", flush=True)
        time.sleep(rnd.uniform(0.0, 0.2))  # a person or a script, not a tight loop


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=60, help="length of the load phase")
    parser.add_argument("--drain", type=int, default=50, help="seconds to wait for accepted submissions")
    parser.add_argument("--valid", type=int, default=12, help="valid probes submitted in all")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres") or not os.environ.get("REDIS_URL"):
        raise SystemExit("set DATABASE_URL (PostgreSQL) and REDIS_URL (disposable: they are reset)")

    from tests.integration.mini_registry import build_mini_registry

    work = Path(tempfile.mkdtemp(prefix="probebench-load-"))
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": fresh_database(os.environ["DATABASE_URL"]),
        "PROBEBENCH_DATA_DIR": str(work / "data"),
        "PROBEBENCH_CACHE_DIR": os.environ.get("PROBEBENCH_CACHE_DIR", str(ROOT / "var" / "cache")),
        "PROBEBENCH_REGISTRY_ROOT": str(build_mini_registry(work / "registry")),
        "PROBEBENCH_MODELS": MODEL,
        # the mini registry's split files are slices: the committed canary does not describe them
        "PROBEBENCH_CANARY": "False",
        "SECRET_KEY": secrets.token_urlsafe(32),
        "DJANGO_SETTINGS_MODULE": "probebench.settings",
        "PROBEBENCH_RATE_ANON": "1000000/min",
        "WEB_BIND": f"127.0.0.1:{port}",
        "WEB_ACCESS_LOG": "",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    import redis

    redis.Redis.from_url(env["REDIS_URL"]).flushdb()
    t0 = time.monotonic()
    run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], env)
    run([sys.executable, "manage.py", "sync_registry"], env)
    users = json.loads(
        run(
            [
                sys.executable,
                "manage.py",
                "shell",
                "-c",
                USERS_SCRIPT.replace("N_CLIENTS", str(args.clients)),
            ],
            env,
        )
        .strip()
        .splitlines()[-1]
    )
    site_env = {**env, "DATABASE_URL": site_role(env["DATABASE_URL"])}  # gunicorn and the worker
    probe_dir = probe_train(env, Path(env["PROBEBENCH_REGISTRY_ROOT"]), work / "probe")
    valid = probe_variants(probe_dir, args.valid, tag=secrets.token_hex(3))
    invalid = invalid_submissions(valid[0])
    print(
        f"set-up (database, registry, {args.clients} users, a trained probe): {time.monotonic() - t0:.0f} s"
    )

    logs = work / "logs"
    logs.mkdir()
    web_log = open(logs / "web.log", "w")  # noqa: SIM115 - open while the server runs
    worker_log = open(logs / "worker.log", "w")  # noqa: SIM115
    web = subprocess.Popen(
        [str(Path(sys.executable).with_name("gunicorn")), "-c", "docker/gunicorn.conf.py",
         "probebench.wsgi:application"],
        cwd=ROOT, env=site_env, stdout=web_log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    worker = subprocess.Popen(
        [str(Path(sys.executable).with_name("celery")), "-A", "probebench", "worker", "-Q", "default,primary,secondary",
         "--concurrency", "1", "--hostname", f"load-{port}@%h", "--loglevel", "INFO"],
        cwd=ROOT, env=site_env, stdout=worker_log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(base + "/api/v1/categories", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise SystemExit((logs / "web.log").read_text()[-3000:])
            time.sleep(0.5)

        rec = Recorder()
        queue_lock = threading.Lock()
        valid_queue = list(valid)
        until = time.monotonic() + args.seconds
        load_started = time.monotonic()
        threads = [
            threading.Thread(
                target=client_loop,
                kwargs=dict(
                    base=base,
                    username=name,
                    token=token,
                    until=until,
                    rec=rec,
                    valid_queue=valid_queue,
                    queue_lock=queue_lock,
                    invalid=invalid,
                    seed=i,
                ),
            )  # fmt: skip
            for i, (name, token) in enumerate(users.items())
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        load_seconds = time.monotonic() - load_started

        # drain: every accepted submission reaches a terminal state, or the time is up
        accepted = {sid: name for name, ids in rec.accepted.items() for sid in ids}
        final: dict[int, str] = {}
        drain_deadline = time.monotonic() + args.drain
        while True:
            for sid, name in accepted.items():
                if final.get(sid) in TERMINAL:
                    continue
                r = requests.get(
                    f"{base}/api/v1/submissions/{sid}",
                    headers={"Authorization": f"Token {users[name]}"},
                    timeout=30,
                )
                final[sid] = r.json()["status"] if r.status_code == 200 else f"HTTP {r.status_code}"
            if all(s in TERMINAL for s in final.values()) or time.monotonic() > drain_deadline:
                break
            time.sleep(2)
        drained_after = time.monotonic() - load_started - load_seconds
        stored = {}
        for name, token in users.items():
            r = requests.get(
                f"{base}/api/v1/submissions", headers={"Authorization": f"Token {token}"}, timeout=30
            )
            stored[name] = r.json()["count"] if r.status_code == 200 else 0
            if r.status_code != 200:
                rec.errors[f"listing submissions: HTTP {r.status_code}"] += 1
    finally:
        for proc in (web, worker):
            proc.terminate()
        for proc in (web, worker):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

    all_latency = [x for xs in rec.latency.values() for x in xs]
    served = sum(rec.status.values())
    five_xx = sum(n for s, n in rec.status.items() if s >= 500)
    print(
        f"\nload: {args.clients} clients for {load_seconds:.0f} s on {base} (gunicorn gthread, docker/gunicorn.conf.py)"
    )
    print(
        f"requests served: {served} ({served / load_seconds:.1f}/s); errors without a response: {dict(rec.errors) or 0}"
    )
    print(
        f"latency all: p50 {percentile(all_latency, 50) * 1000:.0f} ms, p95 {percentile(all_latency, 95) * 1000:.0f} ms"
    )
    for kind, xs in sorted(rec.latency.items()):
        statuses = {s: n for (k, s), n in sorted(rec.by_kind_status.items()) if k == kind}
        print(
            f"  {kind:24s} n={len(xs):5d}  p50 {percentile(xs, 50) * 1000:6.0f} ms  "
            f"p95 {percentile(xs, 95) * 1000:6.0f} ms  statuses {statuses}"
        )
    print(f"status counts: {dict(sorted(rec.status.items()))}; 5xx: {five_xx}")
    for (kind, status), sample in sorted(rec.samples.items()):
        print(f"  e.g. {status} on {kind}: {sample}")
    outcomes = Counter(final.values())
    n_accepted = len(accepted)
    n_terminal = sum(n for s, n in outcomes.items() if s in TERMINAL)
    n_stored = sum(stored.values())
    print(
        f"submissions accepted (201): {n_accepted}; terminal after {drained_after:.0f} s of drain: {n_terminal} "
        f"{dict(outcomes)}; stored for the submitters: {n_stored}"
    )
    lost = n_stored != n_accepted or n_terminal != n_accepted
    print("nothing lost" if not lost else "LOST OR UNFINISHED SUBMISSIONS")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if five_xx or rec.errors or lost else 0


USERS_SCRIPT = """
import json
from django.contrib.auth import get_user_model
from leaderboard.services.tokens import api_token_create
User = get_user_model()
tokens = {}
for i in range(N_CLIENTS):
    user = User.objects.create_user(username=f"load{i:03d}", password=None)
    tokens[user.username] = api_token_create(user=user)
print(json.dumps(tokens))
"""


if __name__ == "__main__":
    raise SystemExit(main())
