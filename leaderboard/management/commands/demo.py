"""``python manage.py demo`` (what ``make demo`` runs): the reference probes on real models, and
the board served while they are measured.

1. takes the data directory's lock (``demo.lock``: a second demo on the same data directory
   refuses, naming the running one's pid and address), migrates the database and loads the
   registry;
2. puts back in the queue the runs a previous demo's worker left ``running`` when it was stopped;
3. starts a Celery worker with the reconciler on beat, in its own process group: on the
   filesystem broker under the data directory by default, on Redis when REDIS_URL is set;
4. serves the site at once, and meanwhile submits the reference probes of
   registry/reference_probes/manifest.yaml through the normal submission path, under
   the system account (``install_reference_probes``): the eval-awareness reference probes first, so the worker
   takes their runs first. A probe scored before its base model's eval-awareness reference has
   its ``auroc_ea`` imputed (and marked so) until the reference is scored; the reference update
   then recomputes it from stored per-example scores;
5. prints, while it serves, how many reference probes are scored, the runs by status, an
   estimate of the time left (from measured run durations), and each failure once, with its
   reason.

SIGINT (Ctrl-C) and SIGTERM stop the server, the worker and its beat; the runs the worker was
executing go back to the queue. ``--no-serve`` submits, waits until every submission is settled
(scored with every axis, or failed) and exits.
Re-running it is safe: a probe whose artifact was already submitted is not submitted again.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from io import StringIO
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections, connection

from evaluator.commands.client.transport import printable
from evaluator.data.registry.tasks import EVAL_AWARENESS
from evaluator.errors import EvaluatorError
from leaderboard import artifacts, runner
from leaderboard.errors import Conflict, ServiceError
from leaderboard.management.commands.install_reference_probes import (
    SYSTEM_USER,
    entries_on_models,
    harvest_cost,
    installed,
    manifest_entries,
    replication_order,
    submit_entries,
    system_user,
)
from leaderboard.models import EvaluationRun, ProbeVersion, ResultBundle, Submission
from leaderboard.policy import WORKER_QUEUES
from leaderboard.selectors.progress import runs_progress
from leaderboard.services.bundles import bundle_import
from leaderboard.services.lifecycle import evaluation_runs_release
from leaderboard.services.replication import replications_start
from leaderboard.services.runs import enabled_models

__all__ = ["SYSTEM_USER", "Command", "DemoLock", "demo_worker_name"]
Run = EvaluationRun
#: how long the worker gets to finish after SIGTERM before its process group is killed (its run,
#: if any, goes back to the queue either way)
STOP_GRACE_S = 5.0


def demo_worker_name(data_dir: Path) -> str:
    """The demo worker's Celery hostname: one per data directory and machine, so that the runs a
    stopped demo's worker still holds can be told apart from another worker's."""
    digest = hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:8]
    return f"demo-{digest}@{socket.gethostname()}"


#: the most of a lock file read back (it holds one short JSON object)
LOCK_READ_BYTES = 4096


class DemoLock:
    """One demo per data directory: an exclusive ``flock`` on ``demo.lock``, held while the demo
    runs and released by the kernel when its process ends (so a lock left by a killed demo is
    detected as stale, never trusted). The file records the holder's pid and address.

    The lock is only ever a regular file of its own: a symbolic link there is not followed and a
    file with another name (a hard link) or anything else is refused, so the demo never empties a
    file it does not own. What the file says is printed escaped (``evaluator.commands.client.transport.printable``):
    no control character or terminal escape in it reaches the terminal."""

    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / "demo.lock"
        self.fd: int | None = None
        self.stale: dict | None = None

    @staticmethod
    def _read(fd: int) -> dict:
        try:
            held = json.loads(os.pread(fd, LOCK_READ_BYTES, 0).decode("utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return held if isinstance(held, dict) else {}

    def _open(self) -> int:
        """The lock file, made if missing, opened without following a link; a CommandError
        saying what to do when it is anything but a regular file with this one name."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        where = printable(str(self.path))
        remove = " Remove it (the demo makes a new lock file), or use another PROBEBENCH_DATA_DIR."
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise CommandError(
                    f"{where} is a symbolic link; the demo's lock must be a regular file, and a link"
                    " is not followed (the file it points to would be overwritten)." + remove
                ) from None
            if exc.errno in (errno.EISDIR, errno.ENXIO):
                raise CommandError(
                    f"{where} is not a regular file; the demo's lock must be one." + remove
                ) from None
            raise
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            what = (
                "not a regular file" if not stat.S_ISREG(info.st_mode) else "a hard link (it has other names)"
            )
            raise CommandError(
                f"{where} is {what}; the demo's lock must be a regular file of its own, which it empties"
                " and rewrites." + remove
            )
        return fd

    def stale_message(self) -> str:
        """The line saying a stale lock was taken over, its contents escaped."""
        pid = printable(str((self.stale or {}).get("pid", "?")))
        return f"a stale lock of pid {pid} (no longer running) on {printable(str(self.path.parent))} was taken over"

    def acquire(self, *, host: str, port: str) -> DemoLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            held = self._read(fd)
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            pid, host_, port_ = (printable(str(held.get(k, "?"))) for k in ("pid", "host", "port"))
            raise CommandError(
                f"a demo is already running on this data directory ({printable(str(self.path.parent))}):"
                f" pid {pid}, serving http://{host_}:{port_}/."
                " Stop it first (Ctrl-C in its terminal, or kill that pid), or use another"
                " PROBEBENCH_DATA_DIR."
            ) from None
        self.fd = fd
        previous = self._read(fd)
        if previous.get("pid"):
            self.stale = previous  # its process is gone: the kernel released its lock
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": host, "port": str(port)}).encode())
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        os.ftruncate(self.fd, 0)
        os.close(self.fd)  # closing the descriptor releases the flock
        self.fd = None


class Command(BaseCommand):
    _worker: subprocess.Popen | None = None
    _interrupted = False
    help = "Serve the board at once and evaluate the reference probes on real models with a local worker."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", default="8000")
        parser.add_argument(
            "--manifest", default=None, help="default: registry/reference_probes/manifest.yaml"
        )
        parser.add_argument(
            "--no-serve", action="store_true", help="evaluate, wait for every score, then exit"
        )
        parser.add_argument("--only", default="", help="comma-separated slugs of the manifest to submit")
        parser.add_argument(
            "--fresh",
            action="store_true",
            help="measure every reference probe from nothing instead of opening from the committed bundle",
        )
        parser.add_argument(
            "--progress-every",
            type=float,
            default=30.0,
            metavar="SECONDS",
            help="how often the progress line is printed while serving (default 30)",
        )

    def handle(
        self,
        *args,
        host,
        port,
        manifest=None,
        no_serve=False,
        only="",
        progress_every=30.0,
        fresh=False,
        **options,
    ):
        manifest_path = (
            Path(manifest)
            if manifest
            else settings.REGISTRY_ROOT / "registry" / "reference_probes" / "manifest.yaml"
        )
        entries = manifest_entries(manifest_path, only)
        self._root = Path(settings.REGISTRY_ROOT)  # the manifest's paths are relative to it
        bundle = Path(settings.DEMO_BUNDLE)
        self._bundle = None if fresh or only or manifest or not bundle.is_file() else bundle
        self._imported: list[int] = []
        data_dir = Path(settings.DATA_DIR)
        lock = DemoLock(data_dir).acquire(host=host, port=port)
        if lock.stale:
            self.stdout.write(lock.stale_message())
        self._worker_name = demo_worker_name(data_dir)
        self._worker = None
        self._stop_event = threading.Event()
        previous_term = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        try:
            if not no_serve:
                _check_port_free(host, port)
            self._setup()
            system_user()  # before the worker starts: a squatter of the name is refused here
            self._worker = self._start_worker()
            if no_serve:
                ids = self._submit_all(entries)
                self._wait(ids)
                self._summary(ids)
                return
            feeder = threading.Thread(
                target=self._feed, args=(entries, progress_every), name="demo-feed", daemon=True
            )
            feeder.start()
            self.stdout.write(
                self.style.SUCCESS(
                    f"serving http://{host}:{port}/ — the reference probes are submitted now and the board"
                    " fills in as their scores arrive; Ctrl-C stops the server, the worker and beat"
                )
            )
            call_command("runserver", f"{host}:{port}", use_reloader=False)
        except (KeyboardInterrupt, SystemExit):
            # SIGINT or SIGTERM (see _raise_keyboard_interrupt); runserver turns it into exit(0)
            self._interrupted = True
        finally:
            self._shutdown()  # a second SIGTERM or Ctrl-C meanwhile kills the worker at once
            signal.signal(signal.SIGTERM, previous_term)
            lock.release()
        if no_serve and self._interrupted:
            raise CommandError("stopped before every reference probe was scored; run it again to resume")

    # ------------------------------------------------------------------ steps

    def _setup(self) -> None:
        """The database schema and the registry rows (both idempotent)."""
        call_command("migrate", interactive=False, verbosity=0)
        out = StringIO()
        call_command("sync_registry", verbosity=0, stdout=out)
        self.stdout.write((out.getvalue().strip().splitlines() or ["registry loaded"])[-1])
        released = evaluation_runs_release(worker_host=self._worker_name)
        if released:
            self.stdout.write(
                f"{len(released)} run(s) interrupted by the last stop are back in the queue:"
                f" {', '.join(map(str, released))}"
            )

    def _submit_all(self, entries: list[dict]) -> list[int]:
        """The eval-awareness reference probes first (the worker takes their runs first), then the rest.
        Those on a base model this deployment does not run (PROBEBENCH_MODELS; a model loaded on
        request) are left out, and said so."""
        entries, skipped = entries_on_models(
            entries, self._root, set(enabled_models().values_list("slug", flat=True))
        )
        if skipped:
            self.stdout.write(
                f"{len(skipped)} reference probe(s) on base models not enabled here left out"
                f" ({', '.join(e['slug'] for e in skipped)}); name their models in MODELS= to include them"
            )
        if self._bundle is not None:
            entries = self._open_from_bundle(entries)
        first = [e for e in entries if e.get("role") == EVAL_AWARENESS]
        rest = [e for e in entries if e.get("role") != EVAL_AWARENESS]
        self.stdout.write(f"submitting {len(first)} eval-awareness reference probe(s) first")
        ids = submit_entries(first, self._root, write=self.stdout.write)
        self.stdout.write(f"submitting {len(rest)} more reference probe(s)")
        ids += submit_entries(rest, self._root, write=self.stdout.write)
        return self._imported + ids

    def _open_from_bundle(self, entries: list[dict]) -> list[dict]:
        """Import the committed bundle's entries (services.bundles: every number recomputed from its
        per-example scores), then plan their replication here at the lowest priority
        (``replication_order``: the cheapest category whole, then one entry of every other
        category, the cheapest first). Returns the
        manifest entries it did not hold, to be submitted and measured as usual."""
        assert self._bundle is not None  # handle() sets it
        enabled = set(enabled_models().values_list("slug", flat=True))
        started = time.monotonic()
        try:
            report = bundle_import(self._bundle, models=enabled)
        except Conflict:
            report = None  # imported by an earlier run of the demo
        except (EvaluatorError, ServiceError) as exc:
            self.stderr.write(f"the committed bundle was not imported ({exc}); measuring from nothing")
            return entries
        by_sha = {
            v.artifact_sha256: v
            for v in ProbeVersion.objects.filter(bundle__isnull=False).select_related("probe", "submission")
        }
        shas = {
            e["slug"]: artifacts.sha256_bytes((self._root / e["path"] / "probe.safetensors").read_bytes())
            for e in entries
        }
        held = [e for e in entries if shas[e["slug"]] in by_sha]
        categories = {e["slug"]: by_sha[shas[e["slug"]]].probe.category_id for e in held}
        costs = {
            e["slug"]: harvest_cost(
                json.loads((self._root / e["path"] / "probe.json").read_text()), runner.registry()
            )
            for e in held
        }
        versions = [by_sha[shas[e["slug"]]] for e in replication_order(held, categories, costs)]
        self._imported = [v.submission.pk for v in versions]
        if report is not None:
            row = ResultBundle.objects.get(id=report["bundle"])
            self.stdout.write(
                f"opened from the committed bundle {row.id[:12]} (measured by {row.board} at commit"
                f" {row.commit[:12] or 'unknown'}, {row.created_at:%Y-%m-%d}): {len(report['imported'])} reference"
                f" entries on the board in {time.monotonic() - started:.0f} s, marked published, not yet replicated here"
            )
        made = replications_start(versions)
        if made:
            self.stdout.write(
                f"replicating them here: {made} run(s) queued behind anything you submit: the cheapest"
                " category whole, then one entry of every other category, the cheapest first"
            )
        return [e for e in entries if e not in held]

    def _feed(self, entries: list[dict], every: float) -> None:
        """The serving demo's second thread: submit, then report progress until stopped."""
        try:
            ids = self._submit_all(entries)
            seen: set[tuple[str, int]] = set()
            last, last_at = "", 0.0
            while not self._stop_event.is_set():
                for line in self._new_failures(ids, seen):
                    self.stderr.write(line)
                line = self._progress_line(ids)
                if line != last or time.monotonic() - last_at > 10 * every:
                    self.stdout.write(line)
                    last, last_at = line, time.monotonic()
                if self._worker is not None and self._worker.poll() is not None:
                    log = Path(settings.DATA_DIR) / "demo-worker.log"
                    self.stderr.write(
                        f"the worker exited with status {self._worker.returncode}; see {log}."
                        " The board is still served; stop with Ctrl-C."
                    )
                    return
                self._stop_event.wait(every)
        except Exception as exc:  # the server keeps serving; say why the board stopped filling
            if not self._stop_event.is_set():
                self.stderr.write(f"the demo stopped submitting or reporting: {type(exc).__name__}: {exc}")
        finally:
            close_old_connections()
            connection.close()

    def _progress_line(self, ids: list[int]) -> str:
        subs = dict(Submission.objects.filter(pk__in=ids).values_list("pk", "status"))
        scored = sum(s == Submission.Status.SCORED for s in subs.values())
        failed = sum(s == Submission.Status.FAILED for s in subs.values())
        runs = runs_progress(workers=1)
        c = runs.counts
        replicated = ""
        if self._imported:
            states = [
                (r or {}).get("state")
                for r in ProbeVersion.objects.filter(submission__pk__in=self._imported).values_list(
                    "replication", flat=True
                )
            ]
            differs = states.count("differs")
            replicated = f"; replicated here: {states.count('replicated')} of {len(states)}" + (
                f" ({differs} differ)" if differs else ""
            )
        return (
            f"reference probes scored: {scored} of {len(ids)}"
            + (f" ({failed} failed)" if failed else "")
            + replicated
            + f"; runs: {c[Run.Status.QUEUED]} queued / {c[Run.Status.RUNNING]} running"
            f" / {c[Run.Status.SUCCEEDED]} done / {c[Run.Status.FAILED]} failed"
            f"; estimated time left {runs.eta_text()}"
        )

    def _new_failures(self, ids: list[int], seen: set[tuple[str, int]]) -> list[str]:
        """Each failed run and failed submission once, with its reason."""
        lines = []
        failed_runs = (
            Run.objects.filter(status=Run.Status.FAILED)
            .select_related("probe_version__probe")
            .order_by("finished_at", "pk")
        )
        for run in failed_runs:
            if ("run", run.pk) in seen:
                continue
            seen.add(("run", run.pk))
            lines.append(
                f"FAILED run {run.pk}: {run.kind} of {run.probe_version.probe.slug} on"
                f" {run.task_id}/{run.split} ({run.base_model_id}, {run.error_kind or 'unknown'} fault):"
                f" {run.error}"
            )
        failed_subs = Submission.objects.filter(pk__in=ids, status=Submission.Status.FAILED).select_related(
            "probe_version__probe"
        )
        for sub in failed_subs:
            if ("submission", sub.pk) in seen:
                continue
            seen.add(("submission", sub.pk))
            lines.append(f"FAILED submission {sub.pk} ({sub.probe_version.probe.slug}): {sub.failure_reason}")
        return lines

    def _wait(self, ids: list[int]) -> None:
        """Until every submission is finished and every reference update they started is done."""
        seen: set[tuple[str, int]] = set()
        last = ""
        while not installed(ids):
            if self._worker is not None and self._worker.poll() is not None:
                log = Path(settings.DATA_DIR) / "demo-worker.log"
                raise CommandError(f"the worker exited with status {self._worker.returncode}; see {log}")
            for line in self._new_failures(ids, seen):
                self.stderr.write(line)
            line = self._progress_line(ids)
            if line != last:
                self.stdout.write(f"  {line}")
                last = line
            time.sleep(5)

    def _summary(self, ids: list[int]) -> None:
        for sub in Submission.objects.filter(pk__in=ids).select_related("probe_version__probe"):
            score = sub.probe_version.scores.order_by("-spec_id").first()
            total = f"{score.total:.4f}" if score else "—"
            self.stdout.write(
                f"  {sub.probe_version.probe.slug}: {sub.status} ProbeScore {total} {sub.failure_reason[:120]}"
            )

    def _start_worker(self) -> subprocess.Popen:
        log = Path(settings.DATA_DIR) / "demo-worker.log"
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "probebench",
            "worker",
            "-B",
            "-Q",
            WORKER_QUEUES,
            "--concurrency",
            "1",
            "--pool",
            "solo",
            "--hostname",
            self._worker_name,
            "--loglevel",
            "INFO",
            "--schedule",
            str(Path(settings.DATA_DIR) / "celerybeat-schedule"),
        ]
        self.stdout.write(f"starting a local worker with the reconciler on beat (log: {log})")
        return subprocess.Popen(
            cmd,
            cwd=settings.BASE_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: Ctrl-C reaches it only through _shutdown
        )

    def _shutdown(self) -> None:
        """Stop the reporting thread and the worker's whole process group (beat included), then
        put back in the queue the run it was executing. A second Ctrl-C kills at once."""
        self._stop_event.set()
        worker = self._worker
        if worker is None:
            self.stdout.write("stopped (no worker was started).")
            return
        self.stdout.write(
            f"stopping: the server is down; stopping the worker and beat (pid {worker.pid},"
            f" up to {STOP_GRACE_S:.0f} s)…"
        )
        try:
            if worker.poll() is None:
                _stop_group(worker, grace=STOP_GRACE_S)
            else:
                _kill_group(worker)  # what is left of its group (beat)
        except KeyboardInterrupt:
            _kill_group(worker)
        try:
            released = evaluation_runs_release(worker_host=self._worker_name)
        except Exception as exc:  # the database is gone too: the next start re-queues them
            self.stderr.write(f"could not re-queue the interrupted runs now ({exc}); the next start will")
            released = []
        self.stdout.write(
            "stopped"
            + (f"; {len(released)} interrupted run(s) are back in the queue" if released else "")
            + (". `make demo` again resumes where it stopped." if self._interrupted else ".")
        )


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


def _check_port_free(host: str, port: str) -> None:
    """Fail before starting anything if the address is taken (runserver would exit the process
    without running any clean-up)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, int(port)))
        except OSError as exc:
            raise CommandError(
                f"cannot serve on {host}:{port}: {exc.strerror}; choose another with PORT=…"
            ) from None


def _stop_group(proc: subprocess.Popen, *, grace: float) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    _kill_group(proc)  # whatever is left of the group (beat, a run stuck in native code)


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
