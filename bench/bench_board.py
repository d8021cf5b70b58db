"""Benchmark the public board on SYNTHETIC data in a throwaway database.

    .venv/bin/python bench/bench_board.py                      # SQLite under a fresh /tmp directory
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/x .venv/bin/python bench/bench_board.py
                                                               # a fresh database probebench_bench_<pid>

    DATABASE_URL=postgresql://… .venv/bin/python bench/bench_board.py --sizes 1000,10000,50000
                                                               # the board pages as the board grows

Seeds 1,000 probes × 10 tasks with synthetic scores (bench/seed_board.py) into a database created
for the run and removed afterwards (never the demo database), then reports (with ``--sizes``:
the board pages at each size instead, seeding up to each in turn):

1. server time (the Django handler in-process, no network) p50/p95 for the category page, the
   overview, a probe page, /api/v1/leaderboard and the CSV export, with the SQL query count;
2. throughput under a bounded local load on loopback: Django's threaded server in a subprocess
   driven by ``wrk`` (or, without wrk, a bounded Python client), for a fixed number of seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def _environment(args) -> tuple[dict, str | None, str]:
    data_dir = tempfile.mkdtemp(prefix="probebench-bench-")
    env = {
        "PROBEBENCH_DATA_DIR": data_dir,
        "DJANGO_SETTINGS_MODULE": "probebench.settings",
        "DEBUG": "False",
        "SECRET_KEY": secrets.token_urlsafe(50),  # a throwaway instance (settings refuse none)
        # the load test would otherwise hit the anonymous API rate limit within a second
        "PROBEBENCH_RATE_ANON": "1000000/s",
        "PROBEBENCH_RATE_USER": "1000000/s",
        "CELERY_TASK_ALWAYS_EAGER": "True",
    }
    pg_name = None
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        import psycopg

        pg_name = f"probebench_bench_{os.getpid()}"
        base = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{pg_name}"')
        env["DATABASE_URL"] = base.rsplit("/", 1)[0] + "/" + pg_name
    return env, pg_name, data_dir


def _drop_pg(pg_name: str) -> None:
    import psycopg

    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')


def _server_times(urls: dict[str, str], n: int) -> dict:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    out = {}
    for name, url in urls.items():
        for _ in range(3):  # warm-up (template compilation, connection)
            assert client.get(url).status_code == 200, url
        with CaptureQueriesContext(connection) as ctx:
            client.get(url)
        n_queries = len(ctx.captured_queries)
        times, cpu = [], []
        for _ in range(n):
            t0, c0 = time.perf_counter(), time.thread_time()
            response = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.thread_time() - c0) * 1000)
            assert response.status_code == 200
        out[name] = {
            "url": url,
            "n": n,
            "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(_percentile(times, 0.95), 1),
            # CPU time of the request's thread: the wall time on an idle core (SQLite work is
            # in-process and included; PostgreSQL's own work is not)
            "cpu_p50_ms": round(statistics.median(cpu), 1),
            "queries": n_queries,
            "bytes": len(response.content),
        }
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _python_load(url: str, seconds: float, concurrency: int, max_requests: int) -> dict:
    """A bounded client: ``concurrency`` threads, at most ``seconds`` and ``max_requests``."""
    deadline = time.monotonic() + seconds
    lock = threading.Lock()
    latencies: list[float] = []
    errors = 0

    def worker():
        nonlocal errors
        while time.monotonic() < deadline:
            with lock:
                if len(latencies) + errors >= max_requests:
                    return
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=30) as r:
                    r.read()
                ok = True
            except OSError:
                ok = False
            with lock:
                if ok:
                    latencies.append((time.perf_counter() - t0) * 1000)
                else:
                    errors += 1

    start = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    return {
        "tool": f"python client, {concurrency} threads",
        "requests": len(latencies),
        "errors": errors,
        "seconds": round(elapsed, 1),
        "req_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
    }


def _wrk_load(url: str, seconds: int, concurrency: int) -> dict:
    proc = subprocess.run(
        ["wrk", "-t2", f"-c{concurrency}", f"-d{seconds}s", "--timeout", "30s", "--latency", url],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    )
    text = proc.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    total = int(re.search(r"(\d+) requests in", text).group(1))
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", text)
    factor = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return {
        "tool": f"wrk -t2 -c{concurrency} -d{seconds}s",
        "requests": total,
        "errors": int(non2xx.group(1)) if non2xx else 0,
        "seconds": seconds,
        "req_per_s": rps,
        "p50_ms": round(float(p50.group(1)) * factor[p50.group(2)], 1) if p50 else None,
    }


def _throughput(env: dict, paths: dict[str, str], seconds: int, concurrency: int) -> dict:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=os.environ | env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/api/v1/categories", timeout=2).read()
                break
            except OSError:
                time.sleep(0.2)
        else:
            raise SystemExit("the benchmark server did not start")
        results = {}
        for name, path in paths.items():
            url = base + path
            if shutil.which("wrk"):
                results[name] = _wrk_load(url, seconds, concurrency)
            else:
                results[name] = _python_load(url, seconds, concurrency, max_requests=20_000)
        return results
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--probes", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=10, help="tasks per category (each probe runs on all)")
    parser.add_argument(
        "--spread",
        action="store_true",
        help="spread the probes over the eight categories (default: all in one, the worst case for a category page)",
    )
    parser.add_argument("--requests", type=int, default=100, help="timed requests per URL (server time)")
    parser.add_argument("--load-seconds", type=int, default=10, help="seconds of load per URL (0: skip)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--keep", action="store_true", help="keep the throwaway database (and print where it is)"
    )
    parser.add_argument(
        "--sizes",
        default="",
        help="comma-separated board sizes, e.g. 1000,10000,50000: seed up to each in turn and time the"
        " board pages at every size (the scaling report; replaces the default report)",
    )
    args = parser.parse_args()

    env, pg_name, data_dir = _environment(args)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    try:
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        from bench.seed_board import seed
        from leaderboard.registry_sync import registry_sync

        db = settings.DATABASES["default"]
        assert str(db["NAME"]).startswith((data_dir, "probebench_bench_")), db["NAME"]
        t0 = time.perf_counter()
        call_command("migrate", verbosity=0)
        registry_sync(verify_hashes=False)
        from evaluator.data.registry.tasks import CATEGORIES

        if args.sizes:
            report = _scaling([int(s) for s in args.sizes.split(",")], args, categories=CATEGORIES)
            print(json.dumps(report, indent=2))
            _print_scaling(report)
            return
        counts = seed(
            n_probes=args.probes, n_tasks=args.tasks, categories=CATEGORIES if args.spread else CATEGORIES[:1]
        )
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # planner statistics, as a live database would have
        seed_s = time.perf_counter() - t0
        from leaderboard.models import Probe

        probe = Probe.objects.order_by("slug").first().slug
        category = counts["categories"][0]
        urls = {
            "category page": f"/category/{category}/",
            "category page, sorted by latency": f"/category/{category}/?sort=latency",
            "overview": "/",
            "probe page": f"/probes/{probe}/",
            "API /api/v1/leaderboard": f"/api/v1/leaderboard?category={category}",
            "API /api/v1/leaderboard?limit=1000": f"/api/v1/leaderboard?category={category}&limit=1000",
            "CSV export (all rows)": f"/api/v1/leaderboard.csv?category={category}",
        }
        report = {
            "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "database": "postgresql" if pg_name else "sqlite",
            "seeded": counts | {"seconds": round(seed_s, 1), "synthetic": True},
            "server_time": _server_times(urls, args.requests),
        }
        if args.load_seconds:
            report["throughput"] = _throughput(
                env,
                {
                    "category page": urls["category page"],
                    "API /api/v1/leaderboard": urls["API /api/v1/leaderboard"],
                },
                args.load_seconds,
                args.concurrency,
            )
        report["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(json.dumps(report, indent=2))
        _print_table(report)
    finally:
        from django.db import connections

        connections.close_all()
        if args.keep:
            print(f"kept: PROBEBENCH_DATA_DIR={data_dir}" + (f", database {pg_name}" if pg_name else ""))
        else:
            if pg_name:
                _drop_pg(pg_name)
            shutil.rmtree(data_dir, ignore_errors=True)


#: the pages whose cost must not grow with the board: ranked in the database, one page leaves it
SCALING_URLS = {
    "category page": "/category/{category}/",
    "category page 2": "/category/{category}/?page=2",
    "category page, sorted by latency": "/category/{category}/?sort=latency",
    "API /api/v1/leaderboard": "/api/v1/leaderboard?category={category}",
}


def _scaling(sizes: list[int], args, *, categories) -> dict:
    """Seed the board up to each size in turn (synthetic, one category; full per-task curves for
    the first 1,000 probes only) and time the board pages at every size."""
    from django.db import connection

    from bench.seed_board import seed

    category = (categories if args.spread else categories[:1])[0]
    seeded, rows = 0, []
    for size in sorted(sizes):
        t0 = time.perf_counter()
        seed(
            n_probes=size - seeded,
            n_tasks=args.tasks,
            categories=categories if args.spread else categories[:1],
            rng_seed=size,
            detailed=max(0, 1000 - seeded),
        )
        seeded = size
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        seed_s = time.perf_counter() - t0
        urls = {name: url.format(category=category) for name, url in SCALING_URLS.items()}
        rows.append(
            {
                "probes": size,
                "seed_seconds": round(seed_s, 1),
                "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
                "server_time": _server_times(urls, args.requests),
            }
        )
    return {
        "database": connection.vendor,
        "tasks_per_category": args.tasks,
        "spread": bool(args.spread),
        "sizes": rows,
    }


def _print_scaling(report: dict) -> None:
    first = report["sizes"][0]
    print(
        f"\n{report['database']}: SYNTHETIC probes × {report['tasks_per_category']} tasks, p50 ms (queries)"
    )
    names = list(first["server_time"])
    print(f"{'probes':>8} " + " ".join(f"{n[:34]:>36}" for n in names))
    for row in report["sizes"]:
        cells = []
        for n in names:
            r = row["server_time"][n]
            growth = r["p50_ms"] / first["server_time"][n]["p50_ms"]
            cells.append(f"{r['p50_ms']:8.1f} p95 {r['p95_ms']:7.1f} ×{growth:4.2f} ({r['queries']})")
        print(f"{row['probes']:8d} " + " ".join(f"{c:>36}" for c in cells))


def _print_table(report: dict) -> None:
    seeded = report["seeded"]
    print(
        f"\n{report['database']}: {seeded['probes']} SYNTHETIC probes × {seeded['tasks_per_category']} tasks, "
        f"over {len(seeded['categories'])} categor{'y' if len(seeded['categories']) == 1 else 'ies'}"
    )
    print(f"{'server time':40} {'p50 ms':>8} {'p95 ms':>8} {'cpu p50':>8} {'queries':>8}")
    for name, r in report["server_time"].items():
        print(f"{name:40} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['cpu_p50_ms']:8.1f} {r['queries']:8d}")
    print(
        f"load average before/after: {report['load_before']} / {report['load_after']} on {os.cpu_count()} CPUs"
    )
    for name, r in report.get("throughput", {}).items():
        print(
            f"throughput {name}: {r['req_per_s']} req/s ({r['requests']} requests, {r['errors']} errors, "
            f"p50 {r['p50_ms']} ms; {r['tool']})"
        )


if __name__ == "__main__":
    main()
