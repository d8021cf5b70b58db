"""``python manage.py demo``: the main job on real models, then the site.

1. starts a Celery worker (and the reconciler on beat) beside this process: on the filesystem
   broker under the data directory by default, on Redis when REDIS_URL is set;
2. submits the reference probes of registry/reference_probes/manifest.yaml through the normal
   submission path, as the ``probebench`` maintainer account; the eval-awareness reference probes
   first, and waits for them to be scored so every other probe's auroc_ea is measured with them;
3. submits the rest and serves the site while the worker evaluates them: the board fills in as
   scores arrive (progress on each submission's page, and here).

Re-running it is safe: a probe whose artifact was already submitted is not submitted again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from leaderboard.management.commands.install_reference_probes import SYSTEM_USER, submit_entries, system_user
from leaderboard.models import Submission

__all__ = ["SYSTEM_USER", "Command"]
DONE = (Submission.Status.SCORED, Submission.Status.FAILED, Submission.Status.REJECTED)


class Command(BaseCommand):
    help = "Evaluate the reference probes on real models with a local worker, and serve the board."

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

    def handle(self, *args, host, port, manifest=None, no_serve=False, only="", **options):
        manifest_path = (
            Path(manifest)
            if manifest
            else settings.REGISTRY_ROOT / "registry" / "reference_probes" / "manifest.yaml"
        )
        if not manifest_path.is_file():
            raise CommandError(f"{manifest_path}: no reference-probe manifest")
        entries = yaml.safe_load(manifest_path.read_text())["probes"]
        if only:
            wanted = {s.strip() for s in only.split(",")}
            entries = [e for e in entries if e["slug"] in wanted]
        user = self._system_user()
        worker = self._start_worker()
        try:
            first = [e for e in entries if e.get("role") == "eval_awareness"]
            rest = [e for e in entries if e.get("role") != "eval_awareness"]
            self.stdout.write(f"submitting {len(first)} eval-awareness reference probe(s) first")
            subs = self._submit(first, user)
            self._wait(subs, worker)
            self.stdout.write(f"submitting {len(rest)} more reference probe(s)")
            subs += self._submit(rest, user)
            if no_serve:
                self._wait(subs, worker)
                self._summary(subs)
                return
            self.stdout.write(
                self.style.SUCCESS(
                    f"serving http://{host}:{port}/ — the worker keeps evaluating; the board fills in as scores arrive"
                )
            )
            call_command("runserver", f"{host}:{port}", use_reloader=False)
        finally:
            self._stop(worker)

    # ------------------------------------------------------------------ steps

    def _system_user(self):
        return system_user()

    def _submit(self, entries, user) -> list[int]:
        return submit_entries(entries, user, settings.REGISTRY_ROOT, write=self.stdout.write)

    def _wait(self, ids: list[int], worker: subprocess.Popen) -> None:
        last = ""
        while True:
            subs = list(Submission.objects.filter(pk__in=ids).select_related("probe_version__probe"))
            if all(s.status in DONE for s in subs):
                return
            if worker.poll() is not None:
                raise CommandError(f"the worker exited with status {worker.returncode}; see {self._log}")
            line = " · ".join(
                f"{s.probe_version.probe.slug[:28]} {s.status} {s.progress:.0%}"
                for s in subs
                if s.status not in DONE
            )
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
        self._log = Path(settings.DATA_DIR) / "demo-worker.log"
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
            "gpu,default",
            "--concurrency",
            "1",
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--schedule",
            str(Path(settings.DATA_DIR) / "celerybeat-schedule"),
        ]
        self.stdout.write(f"starting a local worker (log: {self._log})")
        return subprocess.Popen(
            cmd,
            cwd=settings.BASE_DIR,
            env=env,
            stdout=self._log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _stop(self, worker: subprocess.Popen) -> None:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
