"""``python manage.py install_reference_probes --only SLUG[,SLUG…]``: submit reference probes of
registry/reference_probes/manifest.yaml to a running board, through the normal submission path,
under the system account (``leaderboard.accounts``), with the manifest's role.

The system account is made by the first install: an inactive user named ``probebench`` with an
unusable password, which nobody can sign up as, log in to or get a token for. A user of that name
that the install did not create (someone signed up first) is refused with an error: rename or
delete it, then run the install again. Only the system account's probes can be reference probes.

An eval-awareness reference probe (role ``eval_awareness``) installed this way becomes its base
model's current reference once it is scored (the newest scored one), and the submission pipeline
starts a reference update: the new reference scores every dependent's test items, then every
dependent ``auroc_ea`` and ProbeScore is recomputed from stored per-example scores and the diff is
published (/api/v1/reference-updates, /reevaluations/). The board's workers do the work; with
``--wait`` the command waits for the submissions and their reference updates and prints the diff.

A probe whose artifact the system account already submitted is not submitted again. An earlier
copy of a reference probe's file submitted by anyone else does not block the install: the copy is
set aside (its probe takes no new versions) and its submission rejected, naming the reference
probe. The manifest's names and slugs are reserved for the system account, so nobody can submit
under one; a probe of someone else's that holds a reference probe's slug all the same (submitted
before the names were reserved) is moved to ``<slug>-renamed-<id>`` and its name marked, so the
reference gets its own slug, never ``<slug>-2``. Both are printed, for a maintainer to review
(``services.submissions.reference_probe_submit``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

import yaml
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evaluator.core.applicability import ProbeReads, applicability
from evaluator.data.registry.load import Registry, load_registry
from evaluator.data.registry.tasks import CATEGORIES, EVAL_AWARENESS
from leaderboard.accounts import SYSTEM_USERNAME
from leaderboard.errors import ServiceError
from leaderboard.models import ReferenceUpdate, Submission
from leaderboard.policy import SCORE_SPLITS
from leaderboard.selectors.shared import submission_settled
from leaderboard.services.accounts import system_account_get_or_create
from leaderboard.services.submissions import reference_probe_submit

SYSTEM_USER = SYSTEM_USERNAME


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


def entries_on_models(entries: list[dict], root: Path, models: set[str]) -> tuple[list[dict], list[dict]]:
    """(kept, skipped): the entries whose probe reads one of ``models`` (the enabled base models),
    and the others, in manifest order. Pure but for reading each probe.json."""
    kept: list[dict] = []
    skipped: list[dict] = []
    for entry in entries:
        model = json.loads((root / entry["path"] / "probe.json").read_text())["base_model"]
        (kept if model in models else skipped).append(entry)
    return kept, skipped


def system_user():
    """The system account reference probes are submitted as (made by the first install); a user of
    that name that the install did not create is refused."""
    try:
        return system_account_get_or_create()
    except ServiceError as exc:
        raise CommandError(exc.message) from None


def submission_order(
    entries: list[dict], categories: dict[str, str], costs: Mapping[str, float] | None = None
) -> list[dict]:
    """The order reference probes are submitted in, so the board shows a measured entry in every
    category early: the eval-awareness reference probes first (every other auroc_ea is computed
    with them), then one probe of each other category (board order): the one whose primary runs
    cost least (``costs``: slug → :func:`harvest_cost`; without it, the first in the manifest),
    then the rest in manifest order. ``categories``: slug → category (from each probe.json). Pure."""
    costs = costs or {}
    ea = [e for e in entries if e.get("role") == EVAL_AWARENESS]
    others = [e for e in entries if e.get("role") != EVAL_AWARENESS]
    first: dict[str, dict] = {}
    for entry in others:
        category = categories[entry["slug"]]
        leader = first.get(category)
        if leader is None or costs.get(entry["slug"], 0.0) < costs.get(leader["slug"], 0.0):
            first[category] = entry
    leaders = [first[c] for c in CATEGORIES if c in first]
    chosen = {id(e) for e in leaders}
    return ea + leaders + [e for e in others if id(e) not in chosen]


def replication_order(
    entries: list[dict], categories: dict[str, str], costs: Mapping[str, float]
) -> list[dict]:
    """The order an imported reference set is replicated in (the demo opening from its bundle;
    every entry is already on the board, so the order only decides which replication marks come
    first): the category whose entries cost least in all, whole, so one category is fully
    replicated early; then the cheapest entry of every other category, the cheapest first; then
    the rest, the cheapest first; the eval-awareness references last (their replication is dozens
    of ``reference`` runs, and every other entry reads their published ones meanwhile). Pure."""
    by_cost = sorted(
        (e for e in entries if e.get("role") != EVAL_AWARENESS), key=lambda e: (costs[e["slug"]], e["slug"])
    )
    totals: dict[str, float] = {}
    for entry in by_cost:
        category = categories[entry["slug"]]
        totals[category] = totals.get(category, 0.0) + costs[entry["slug"]]
    if not totals:
        return [e for e in entries if e.get("role") == EVAL_AWARENESS]
    whole = min(totals, key=lambda c: (totals[c], c))
    order = [e for e in by_cost if categories[e["slug"]] == whole]
    leaders: dict[str, dict] = {}
    for entry in by_cost:
        leaders.setdefault(categories[entry["slug"]], entry)
    order += [e for c, e in leaders.items() if c != whole]  # by_cost order: the cheapest first
    taken = {e["slug"] for e in order}
    order += [e for e in by_cost if e["slug"] not in taken]
    ea = [e for e in entries if e.get("role") == EVAL_AWARENESS]
    return order + sorted(ea, key=lambda e: (costs[e["slug"]], e["slug"]))


def harvest_cost(metadata: dict, registry: Registry) -> float:
    """A relative estimate of what a probe's primary score runs cost on a cold activation cache: the
    bytes of every split it is scored on (twice for contrast pairs: two prompts per row) times its
    base model's per-token work (layers × width²). Only an ordering key; nothing is measured."""
    model = registry.model(metadata["base_model"])
    reads = ProbeReads(input=metadata["input"], position=metadata["position"], layer=metadata.get("layer"))
    per_token = model.n_layers * model.d_model**2
    total = 0
    for task in registry.active_tasks(metadata["category"], model=model.id):
        if not applicability(reads, task, model)[0]:
            continue
        for split in SCORE_SPLITS:
            if split in task.splits_for(model.id):
                total += registry.split_path(task.id, split, model=model.id).stat().st_size
    return total * (2 if metadata["input"] == "contrast_pair" else 1) * per_token


def submit_entries(entries: list[dict], root: Path, write=print) -> list[int]:
    """Submit each entry's probe directory (probe.safetensors + probe.json) as a reference probe
    with the manifest's role, under the system account, in :func:`submission_order`; a file the
    system account already submitted is reused. Returns submission ids, in that order."""
    ids = []
    probe_json = {e["slug"]: json.loads((root / e["path"] / "probe.json").read_text()) for e in entries}
    categories = {slug: m["category"] for slug, m in probe_json.items()}
    registry = load_registry(settings.REGISTRY_ROOT)
    costs = {slug: harvest_cost(m, registry) for slug, m in probe_json.items()}
    for entry in submission_order(entries, categories, costs):
        directory = root / entry["path"]
        metadata = json.loads((directory / "probe.json").read_text())
        notices: list[str] = []  # what the install did to other people's probes, for a maintainer
        try:
            sub, new = reference_probe_submit(
                artifact=directory / "probe.safetensors",
                metadata=metadata,
                role=entry.get("role") or "",
                notify=notices.append,
            )
        except ServiceError as exc:
            raise CommandError(f"{entry['slug']}: {exc.message}") from None
        if not new:
            write(f"  {entry['slug']}: already submitted ({sub.status})")
        else:
            write(f"  {entry['slug']}: submission {sub.pk}, {sub.runs.count()} run(s) queued")
        for notice in notices:
            write(f"  {entry['slug']}: {notice}")
        ids.append(sub.pk)
    return ids


def installed(ids: list[int]) -> bool:
    """Every submission is settled (scored with every axis, or failed), and every scored
    eval-awareness reference among them has its reference update completed."""
    subs = list(Submission.objects.filter(pk__in=ids).select_related("probe_version__probe"))
    if not all(submission_settled(s) for s in subs):
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
        system_user()  # made by the first install; a squatter of its name is refused here
        ids = submit_entries(entries, root, write=self.stdout.write)
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
