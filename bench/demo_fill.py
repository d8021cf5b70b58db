"""How fast the demo's board fills: the whole reference set through a real worker, on a fresh data
directory, timed the way a newcomer meets it.

    .venv/bin/python bench/demo_fill.py                     # fresh data and cache directories
    .venv/bin/python bench/demo_fill.py --warm-cache        # reuse ./var/cache (converted models,
                                                            #   activations): the second-run case
    .venv/bin/python bench/demo_fill.py --only SLUG,SLUG    # a subset of the manifest
    .venv/bin/python bench/demo_fill.py --from-bundle       # what `make demo` does: open from the
                                                            #   committed bundle, then replicate it

It does what ``make demo`` does (migrate, sync_registry, ``manage.py demo``) in a temporary data
directory, then watches the database and records, from the moment the demo command starts:

- ``http_200_s``: the first HTTP 200 on ``/``;
- ``every_category_s``: every category with a reference probe shows a scored entry;
- ``primary_all_s``: every reference submission is scored (its primary runs finished) or failed;
- ``all_runs_s``: every run of every reference submission has finished (secondary axes included);
- with ``--from-bundle``, ``first_category_replicated_s``: every entry of one category is replicated
  here (services.replication), and ``replicated`` / ``differ``: how many are, and differ, at the end;

with the 1-minute load average (mean and max) over the run, the failures with their reasons, and
the mean wall time per run kind. Stops the demo with SIGTERM at the end (or at ``--max-minutes``).
Prints one JSON object on stdout; progress lines on stderr. Not a test: it takes hours on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def manifest_entries(only: str) -> list[dict]:
    entries = yaml.safe_load((ROOT / "registry" / "reference_probes" / "manifest.yaml").read_text())["probes"]
    if only:
        wanted = {s.strip() for s in only.split(",")}
        entries = [e for e in entries if e["slug"] in wanted]
    return entries


def snapshot() -> dict:
    """What the database says now (Django is set up by the caller)."""
    from django.db.models import Avg, Count, F

    from leaderboard.models import EvaluationRun, Submission

    subs = list(Submission.objects.select_related("probe_version__probe"))
    imported = [s.probe_version for s in subs if s.probe_version.bundle_id is not None]
    states = {v.pk: (v.replication or {}).get("state") for v in imported}
    by_category: dict[str, list] = {}
    for v in imported:
        by_category.setdefault(v.probe.category_id, []).append(states[v.pk])
    runs = EvaluationRun.objects.filter(cycle=None)
    by_status = dict(runs.values_list("status").annotate(n=Count("id")))
    scored_categories = {s.probe_version.probe.category_id for s in subs if s.status == "scored"}
    durations = {
        kind: round(avg.total_seconds(), 1)
        for kind, avg in runs.filter(status="succeeded", started_at__isnull=False)
        .values_list("kind")
        .annotate(avg=Avg(F("finished_at") - F("started_at")))
        if avg is not None
    }
    return {
        "submissions": len(subs),
        "scored": sum(s.status == "scored" for s in subs),
        "failed": [
            {"probe": s.probe_version.probe.slug, "reason": s.failure_reason[:300]}
            for s in subs
            if s.status == "failed"
        ],
        "scored_categories": sorted(scored_categories),
        "imported": len(imported),
        "replicated": sum(state == "replicated" for state in states.values()),
        "differ": sum(state == "differs" for state in states.values()),
        "replicated_categories": sorted(
            c for c, s in by_category.items() if all(x == "replicated" for x in s)
        ),
        "runs": by_status,
        "failed_runs": [
            {"id": r.pk, "kind": r.kind, "task": r.task_id, "model": r.base_model_id, "error": r.error[:300]}
            for r in runs.filter(status="failed")
        ],
        "mean_run_s": durations,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated manifest slugs (default: all)")
    parser.add_argument("--warm-cache", action="store_true", help="reuse ./var/cache instead of a fresh one")
    parser.add_argument("--max-minutes", type=float, default=360.0)
    parser.add_argument("--poll-s", type=float, default=10.0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    parser.add_argument(
        "--from-bundle",
        action="store_true",
        help="open from the committed bundle (default: fill from nothing)",
    )
    args = parser.parse_args(argv)

    entries = manifest_entries(args.only)
    categories = sorted(
        {json.loads((ROOT / e["path"] / "probe.json").read_text())["category"] for e in entries}
    )
    data_dir = Path(tempfile.mkdtemp(prefix="probebench-demo-fill-"))
    cache_dir = ROOT / "var" / "cache" if args.warm_cache else data_dir / "cache"
    (data_dir / "secret_key").write_text("bench-demo-fill-not-secret\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_TASK_ALWAYS_EAGER", "SECRET_KEY")
    }
    env.update(
        PROBEBENCH_DATA_DIR=str(data_dir),
        PROBEBENCH_CACHE_DIR=str(cache_dir),
        SECRET_KEY_FILE=str(data_dir / "secret_key"),
    )
    os.environ.clear()
    os.environ.update(env)
    py = sys.executable
    for cmd in (["migrate", "--noinput", "-v0"], ["sync_registry"]):
        subprocess.run([py, "manage.py", *cmd], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "probebench.settings")
    django.setup()
    from django.db import connection

    from leaderboard.management.commands.install_reference_probes import entries_on_models
    from leaderboard.services.runs import enabled_models

    # the demo leaves out the reference probes on a base model it does not run (PROBEBENCH_MODELS)
    entries, skipped = entries_on_models(entries, ROOT, set(enabled_models().values_list("slug", flat=True)))
    if skipped:
        print(
            f"left out (their base model is not run here): {', '.join(e['slug'] for e in skipped)}",
            file=sys.stderr,
        )
        categories = sorted(
            {json.loads((ROOT / e["path"] / "probe.json").read_text())["category"] for e in entries}
        )

    port = free_port()
    demo_cmd = [py, "manage.py", "demo", "--host", "127.0.0.1", "--port", str(port)]
    if args.only:
        demo_cmd += ["--only", args.only]
    if not args.from_bundle:
        demo_cmd += ["--fresh"]
    log = (data_dir / "demo-stdout.log").open("wb")
    t0 = time.monotonic()
    demo = subprocess.Popen(
        demo_cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    marks: dict[str, float | None] = {
        "http_200_s": None,
        "every_category_s": None,
        "primary_all_s": None,
        "all_runs_s": None,
        "first_category_replicated_s": None,
    }
    loads: list[float] = []
    snap: dict = {}
    stopped_early = False

    def _interrupt(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)  # a SIGTERM still stops the demo and prints the result
    try:
        while time.monotonic() - t0 < args.max_minutes * 60:
            elapsed = round(time.monotonic() - t0, 1)
            loads.append(os.getloadavg()[0])
            if marks["http_200_s"] is None and http_ok(f"http://127.0.0.1:{port}/"):
                marks["http_200_s"] = elapsed
            try:
                snap = snapshot()
            except Exception as exc:  # the demo may still be creating its rows
                print(f"[{elapsed:7.0f}s] database not ready: {exc}", file=sys.stderr)
                connection.close()
                time.sleep(args.poll_s)
                continue
            connection.close()
            settled = snap["submissions"] >= len(entries) and snap["scored"] + len(snap["failed"]) == len(
                entries
            )
            if marks["every_category_s"] is None and set(categories) <= set(snap["scored_categories"]):
                marks["every_category_s"] = elapsed
            if marks["first_category_replicated_s"] is None and snap["replicated_categories"]:
                marks["first_category_replicated_s"] = elapsed
            if marks["primary_all_s"] is None and settled:
                marks["primary_all_s"] = elapsed
            busy = snap["runs"].get("queued", 0) + snap["runs"].get("running", 0)
            # opened from a bundle: done once every imported entry's replication has a verdict
            replicating = args.from_bundle and snap["replicated"] + snap["differ"] < snap["imported"]
            if marks["all_runs_s"] is None and settled and busy == 0 and not replicating:
                marks["all_runs_s"] = elapsed
                break
            print(
                f"[{elapsed:7.0f}s] scored {snap['scored']}/{len(entries)}, failed {len(snap['failed'])}, "
                f"categories {len(snap['scored_categories'])}/{len(categories)}, runs {snap['runs']}, "
                f"replicated {snap['replicated']}/{snap['imported']} ({snap['differ']} differ), "
                f"load {loads[-1]:.1f}",
                file=sys.stderr,
            )
            if demo.poll() is not None:
                print(f"the demo exited with status {demo.returncode}", file=sys.stderr)
                break
            time.sleep(args.poll_s)
    except KeyboardInterrupt:
        stopped_early = True
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGTERM)
            try:
                demo.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(demo.pid, signal.SIGKILL)
        log.close()
    result = {
        "reference_probes": len(entries),
        "categories": categories,
        **marks,
        "load_avg_1m": {
            "mean": round(sum(loads) / max(len(loads), 1), 2),
            "max": round(max(loads, default=0), 2),
        },
        "cores": os.cpu_count(),
        "cache": "warm (./var/cache)" if args.warm_cache else "fresh",
        "elapsed_s": round(time.monotonic() - t0, 1),
        "stopped_early": stopped_early,
        "final": snap,
        "data_dir": str(data_dir) if args.keep else None,
    }
    print(json.dumps(result, indent=2))
    if not args.keep:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0 if not snap.get("failed") and not snap.get("failed_runs") else 1


if __name__ == "__main__":
    sys.exit(main())
