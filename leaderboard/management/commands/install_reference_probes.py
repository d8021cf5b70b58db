"""``python manage.py install_reference_probes --only SLUG[,SLUG…]``: submit reference probes of
registry/reference_probes/manifest.yaml to a running board, through the normal submission path,
as the ``probebench`` maintainer account, with the manifest's role.

An eval-awareness reference probe (role ``eval_awareness``) installed this way becomes its base
model's current reference once it is scored (the newest scored one), and the submission pipeline
starts a reference update: the new reference scores every dependent's test items, then every
dependent ``auroc_ea`` and ProbeScore is recomputed from stored per-example scores and the diff is
published (/api/v1/reference-updates, /reevaluations/). The board's workers do the work; with
``--wait`` the command waits for the submissions and their reference updates and prints the diff.

A probe whose artifact was already submitted is not submitted again.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from evaluator.registry import EVAL_AWARENESS
from leaderboard.artifacts import sha256_bytes
from leaderboard.errors import ServiceError
from leaderboard.models import ProbeVersion, ReferenceUpdate, Submission
from leaderboard.services.submissions import submission_create

SYSTEM_USER = "probebench"
DONE = (Submission.Status.SCORED, Submission.Status.FAILED, Submission.Status.REJECTED)


def manifest_entries(manifest: Path, only: str = "") -> list[dict]:
    """The manifest's entries (all, or those named in ``only``, in manifest order)."""
    if not manifest.is_file():
        raise CommandError(f"{manifest}: no reference-probe manifest")
    entries = yaml.safe_load(manifest.read_text())["probes"]
    if not only:
        return entries
    wanted = {s.strip() for s in only.split(",") if s.strip()}
    unknown = sorted(wanted - {e["slug"] for e in entries})
    if unknown:
        raise CommandError(f"not in the manifest: {', '.join(unknown)}")
    return [e for e in entries if e["slug"] in wanted]


def system_user():
    """The maintainer account reference probes are submitted as."""
    User = get_user_model()
    user, created = User.objects.get_or_create(username=SYSTEM_USER, defaults={"is_staff": True})
    if created:
        user.set_unusable_password()
        user.save()
    return user


def submit_entries(entries: list[dict], user, root: Path, write=print) -> list[int]:
    """Submit each entry's probe directory (probe.safetensors + probe.json) as a reference probe
    with the manifest's role; an artifact already submitted is reused. Returns submission ids."""
    ids = []
    for entry in entries:
        directory = root / entry["path"]
        data = (directory / "probe.safetensors").read_bytes()
        existing = (
            ProbeVersion.objects.filter(artifact_sha256=sha256_bytes(data))
            .select_related("submission")
            .first()
        )
        if existing is not None:
            write(f"  {entry['slug']}: already submitted ({existing.submission.status})")
            ids.append(existing.submission.pk)
            continue
        metadata = json.loads((directory / "probe.json").read_text())
        try:
            with open(directory / "probe.safetensors", "rb") as fh:
                sub = submission_create(
                    user=user,
                    artifact=fh,
                    metadata=metadata,
                    via="seed",
                    is_reference=True,
                    reference_role=entry.get("role") or "",
                )
        except ServiceError as exc:
            raise CommandError(f"{entry['slug']}: {exc.message}") from None
        write(f"  {entry['slug']}: submission {sub.pk}, {sub.runs.count()} run(s) queued")
        ids.append(sub.pk)
    return ids


def installed(ids: list[int]) -> bool:
    """Every submission is finished, and every scored eval-awareness reference among them has
    its reference update completed."""
    subs = list(Submission.objects.filter(pk__in=ids).select_related("probe_version__probe"))
    if any(s.status not in DONE for s in subs):
        return False
    ea = [
        s.probe_version
        for s in subs
        if s.status == Submission.Status.SCORED and s.probe_version.probe.reference_role == EVAL_AWARENESS
    ]
    updates = ReferenceUpdate.objects.filter(new_version__in=ea)
    return updates.count() == len(ea) and not updates.filter(status=ReferenceUpdate.Status.RUNNING).exists()


class Command(BaseCommand):
    help = "Submit reference probes of the manifest (e.g. a new eval-awareness reference) to the board."

    def add_arguments(self, parser):
        parser.add_argument("--only", required=True, help="comma-separated slugs of the manifest")
        parser.add_argument(
            "--manifest",
            default=None,
            help="default: registry/reference_probes/manifest.yaml of the registry root; its entries'"
            " paths are read relative to the repository root that holds it",
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=0,
            metavar="SECONDS",
            help="wait up to this long for the scores and the reference updates, then print the diff",
        )

    def handle(self, *args, only: str, manifest=None, wait: float = 0, **options):
        path = (
            Path(manifest)
            if manifest
            else settings.REGISTRY_ROOT / "registry" / "reference_probes" / "manifest.yaml"
        )
        root = path.resolve().parents[2]  # the manifest's paths are relative to its repository root
        entries = manifest_entries(path, only)
        ids = submit_entries(entries, system_user(), root, write=self.stdout.write)
        deadline = time.monotonic() + wait
        while wait and not installed(ids):
            if time.monotonic() > deadline:
                raise CommandError(f"the submissions or their reference updates still run after {wait:.0f} s")
            time.sleep(2)
        for sub in Submission.objects.filter(pk__in=ids).select_related("probe_version__probe"):
            self.stdout.write(f"{sub.probe_version.probe.slug}: {sub.status} {sub.failure_reason[:200]}")
            for update in ReferenceUpdate.objects.filter(new_version=sub.probe_version):
                self.stdout.write(f"  reference update {update.pk}: {update.status} {update.error}")
                for d in update.diff:
                    self.stdout.write(
                        f"    {d['probe']} v{d['version']}: auroc_ea {d['auroc_ea_before']} → {d['auroc_ea_after']},"
                        f" ProbeScore {d['total_before']} → {d['total_after']}"
                    )
