"""Result bundles (``evaluator.bundles`` is the file format): this board's public entries written
out, signed with the board's key, and a checked bundle read in as entries published elsewhere.

    board_private_key         the board's Ed25519 key (BUNDLE_SIGNING_KEY_FILE, made on first use)
    board_public_key          its public half, PEM (served at /.well-known/probebench-board-key.pem)
    trusted_public_keys       the keys a bundle may be signed with to be imported
    bundle_export             every public entry → one bundle file + its ResultBundle row
    bundle_import             a bundle → entries, their published runs and their Scores, or nothing

What an entry carries: its probe and version (the submitted metadata verbatim), the artifact, and
every succeeded run its Score was computed from (outside any cycle: the quarterly holdouts stay
private), each with its per-example scores and stored metrics; the eval-awareness reference's own
``reference`` runs ride with the reference entry. The Score as published is in ``entry.json`` for
comparison only: an import recomputes every number from the runs with this board's code
(``services.scores``), under every weights spec it has, and reports any total that differs.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from evaluator import CODE_VERSION
from evaluator import bundles as fmt
from evaluator.errors import EvaluatorError
from leaderboard import artifacts, runner
from leaderboard.errors import Conflict, ValidationFailed
from leaderboard.models import (
    BaseModel,
    Category,
    EvaluationRun,
    License,
    Probe,
    ProbeVersion,
    PublishedRun,
    ResultBundle,
    Score,
    Submission,
    Task,
    WeightsSpec,
)
from leaderboard.services.accounts import system_account_get_or_create
from leaderboard.services.scores import submission_score
from leaderboard.services.submissions import BUNDLE_VIA

log = logging.getLogger(__name__)
Run = EvaluationRun
EVAL_AWARENESS = "eval_awareness"
#: the probe and version fields an entry carries (the metadata as submitted, verbatim, beside them)
VERSION_FIELDS = (
    "number",
    "artifact_sha256",
    "artifact_bytes",
    "kind",
    "layer",
    "position",
    "input",
    "output",
    "license_id",
    "authors",
    "paper_url",
    "description",
    "training_data",
    "declared_metrics",
    "recipe",
    "metadata",
)
PROBE_FIELDS = ("slug", "name", "category_id", "base_model_id", "is_reference", "reference_role", "status")
RUN_FIELDS = ("kind", "task_id", "split", "base_model_id", "protocol", "code_version", "split_sha256")


# --------------------------------------------------------------------------- keys


def board_private_key() -> bytes:
    """The board's signing key (PEM), made with mode 0600 on first use."""
    return fmt.private_key_file(Path(settings.BUNDLE_SIGNING_KEY_FILE))


def board_public_key() -> bytes:
    return fmt.public_key_pem(board_private_key())


def trusted_public_keys(extra: list[bytes] | None = None) -> dict[str, bytes]:
    """fingerprint → raw key: this board's own, every ``*.pem`` in BUNDLE_TRUSTED_KEYS_DIR (the
    repository's ``registry/keys``: the board that published the committed bundle), and ``extra``."""
    pems = [board_public_key(), *(extra or [])]
    keys_dir = Path(settings.BUNDLE_TRUSTED_KEYS_DIR)
    if keys_dir.is_dir():
        pems += [p.read_bytes() for p in sorted(keys_dir.glob("*.pem"))]
    return fmt.trusted_keys(pems)


# --------------------------------------------------------------------------- export


def _commit() -> str:
    """The code's git commit, or "" outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _run_record(run: EvaluationRun | PublishedRun) -> dict[str, Any]:
    record = {f.removesuffix("_id"): getattr(run, f) for f in RUN_FIELDS}
    record.update(
        worker_host=run.worker_host,
        environment=run.environment,
        example_scores=run.example_scores,
        metrics=run.metrics,
        finished_at=run.finished_at.isoformat() if run.finished_at else None,
    )
    return record


#: run kinds a bundle leaves out: the SAE axis's runs hold snippets of the SAE corpus (news articles
#: we may read but not redistribute) and feed no Score; an importing board measures them itself
NOT_EXPORTED = ("sae",)


def _entry_runs(version: ProbeVersion) -> list[EvaluationRun | PublishedRun]:
    """The succeeded runs outside any cycle a version's Score reads (an imported version: the runs
    it was published with), less the kinds of :data:`NOT_EXPORTED`."""
    if version.bundle_id is not None:
        return list(
            version.published_runs.filter(bundle_id=version.bundle_id)
            .exclude(kind__in=NOT_EXPORTED)
            .order_by("pk")
        )
    return list(
        Run.objects.filter(probe_version=version, cycle=None, status=Run.Status.SUCCEEDED)
        .exclude(kind__in=NOT_EXPORTED)
        .order_by("pk")
    )


def bundle_export(*, out: Path | None = None, quarter: str = "", commit: str = "") -> ResultBundle:
    """Write every public entry (each probe's latest scored version, deprecated ones included) to
    one signed bundle, at ``out`` or ``DATA_DIR/bundles/<id>.tar``, and record it. ``commit``: the
    code commit the entries were measured at, when it is not this checkout's (a bundle exported
    from another checkout's data directory)."""
    from leaderboard.selectors.shared import scored_versions_all

    versions = scored_versions_all()
    if not versions:
        raise ValidationFailed("the board has no scored entry to publish", field="entries")
    reg = runner.registry()
    parts: dict[str, bytes] = {}
    entries: list[dict[str, Any]] = []
    tasks: dict[str, dict[str, str]] = {}
    models: dict[str, str] = {}
    protocols: set[str] = set()
    for version in versions:
        probe = version.probe
        base = f"entries/{probe.slug}/v{version.number}/"
        runs = _entry_runs(version)
        scores = {
            s.spec_id: {"total": s.total, "measured_total": s.measured_total, "components": s.components}
            for s in Score.objects.filter(probe_version=version)
        }
        doc = {
            "probe": {f.removesuffix("_id"): getattr(probe, f) for f in PROBE_FIELDS}
            | {"owner": probe.owner.username},
            "version": {f.removesuffix("_id"): getattr(version, f) for f in VERSION_FIELDS},
            "scores": scores,
        }
        artifact = artifacts.artifact_abspath(version.artifact_path)
        if not artifact.is_file():
            raise EvaluatorError(f"{probe.slug} v{version.number}: its artifact file {artifact} is missing")
        parts[base + "probe.safetensors"] = artifact.read_bytes()
        parts[base + "entry.json"] = fmt.canonical_json(doc)
        parts[base + "runs.json.gz"] = fmt.gzip_json([_run_record(r) for r in runs])
        entries.append(
            {
                "probe": probe.slug,
                "version": version.number,
                "category": probe.category_id,
                "base_model": probe.base_model_id,
                "artifact_sha256": version.artifact_sha256,
                "artifact": base + "probe.safetensors",
                "entry": base + "entry.json",
                "runs": base + "runs.json.gz",
                "run_count": len(runs),
            }
        )
        models[probe.base_model_id] = probe.base_model.weights_sha256
        for r in runs:
            protocols.add(r.protocol)
            if r.split_sha256:
                tasks.setdefault(r.task_id, {})[f"{r.split}@{r.base_model_id}"] = r.split_sha256
    created_at = timezone.now()
    manifest: dict[str, Any] = {
        "board": {"name": settings.SITE_NAME, "url": settings.BUNDLE_BOARD_URL},
        "created_at": created_at.isoformat(),
        "commit": commit or _commit(),
        "code_version": CODE_VERSION,
        "quarter": quarter,
        "context": {
            "protocols": {p: reg.protocols[p].sha256 for p in sorted(protocols) if p in reg.protocols},
            "weights_specs": dict(WeightsSpec.objects.values_list("version", "sha256")),
            "models": models,
            "splits": tasks,
        },
        "entries": entries,
    }
    private = board_private_key()
    bundles_dir = Path(settings.DATA_DIR) / "bundles"
    target = Path(out) if out is not None else bundles_dir / "incoming.tar"
    bundle_id = fmt.bundle_write(target, manifest=manifest, parts=parts, private_pem=private)
    if out is None:
        final = bundles_dir / f"{bundle_id}.tar"
        target.replace(final)
        target = final
    signer = fmt.signer_of(private)
    row, _ = ResultBundle.objects.update_or_create(
        id=bundle_id,
        defaults=dict(
            role=ResultBundle.Role.PUBLISHED,
            board=settings.SITE_NAME,
            signer_fingerprint=signer["fingerprint"],
            signer_public_key=signer["public_key"],
            commit=manifest["commit"],
            code_version=CODE_VERSION,
            created_at=created_at,
            entries=len(entries),
            bytes=target.stat().st_size,
            path=target.name if target.parent == bundles_dir else "",
            quarter=quarter,
            contents=[[e["probe"], e["version"], e["artifact_sha256"]] for e in entries],
        ),
    )
    log.info("published bundle %s: %d entries, %d bytes", bundle_id, len(entries), row.bytes)
    return row


# --------------------------------------------------------------------------- import


def _context_problems(bundle: fmt.Bundle) -> list[str]:
    """What in the bundle's context this board does not have as the bundle measured it: the
    registry's files (``evaluator.bundles.context_problems``) and the board's rows."""
    context = bundle.manifest.get("context") or {}
    problems = fmt.context_problems(bundle.manifest, runner.registry())
    problems += [
        f"base model {m}: not on this board"
        for m in sorted(context.get("models") or {})
        if not BaseModel.objects.filter(slug=m).exists()
    ]
    problems += [
        f"task {t}: not on this board"
        for t in sorted(context.get("splits") or {})
        if not Task.objects.filter(slug=t).exists()
    ]
    return problems


def _entry_problems(entry: dict, doc: dict, artifact: bytes) -> list[str]:
    probe, version = doc.get("probe") or {}, doc.get("version") or {}
    where = f"entry {entry.get('probe')}"
    problems = []
    if probe.get("slug") != entry.get("probe") or version.get("number") != entry.get("version"):
        problems.append(f"{where}: entry.json names another probe or version")
    if version.get("artifact_sha256") != entry.get("artifact_sha256"):
        problems.append(f"{where}: entry.json names another artifact")
    if not Category.objects.filter(slug=probe.get("category")).exists():
        problems.append(f"{where}: category {probe.get('category')!r} is not on this board")
    if not License.objects.filter(spdx_id=version.get("license")).exists():
        problems.append(f"{where}: license {version.get('license')!r} is not in this board's registry")
    if fmt.sha256_hex(artifact) != entry.get("artifact_sha256"):
        problems.append(f"{where}: the artifact's SHA-256 is not the one the entry names")
    existing = Probe.objects.filter(slug=entry.get("probe")).first()
    if (
        existing is not None
        and not existing.versions.filter(artifact_sha256=entry.get("artifact_sha256")).exists()
    ):
        problems.append(f"{where}: a probe of that name exists here with other artifacts")
    return problems


def _owner(doc: dict, bundle: fmt.Bundle):
    """The local owner of an imported probe: the system account for a reference probe (the bundle's
    board is trusted), else one inactive account per publishing board."""
    if doc["probe"].get("is_reference"):
        return system_account_get_or_create()
    User = get_user_model()
    user, created = User.objects.get_or_create(
        username=f"board-{bundle.signer_fingerprint}", defaults={"is_active": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def _import_entry(bundle: fmt.Bundle, row: ResultBundle, entry: dict, doc: dict) -> ProbeVersion:
    p, v = doc["probe"], doc["version"]
    probe, _ = Probe.objects.get_or_create(
        slug=p["slug"],
        defaults=dict(
            name=p["name"],
            owner=_owner(doc, bundle),
            category_id=p["category"],
            base_model_id=p["base_model"],
            is_reference=bool(p.get("is_reference")),
            reference_role=p.get("reference_role") or "",
        ),
    )
    data = bundle.parts[entry["artifact"]]
    artifacts.artifact_store(data, entry["artifact_sha256"])
    version = ProbeVersion.objects.create(
        probe=probe,
        artifact_path=artifacts.artifact_relpath(entry["artifact_sha256"]),
        bundle=row,
        **{f.removesuffix("_id"): v[f.removesuffix("_id")] for f in VERSION_FIELDS if f != "license_id"},
        license_id=v["license"],
    )
    Submission.objects.create(
        probe_version=version,
        submitter=probe.owner,
        via=BUNDLE_VIA,
        status=Submission.Status.RUNNING,
        step=f"imported from bundle {row.id[:12]}",
    )
    published = []
    for r in bundle.entry_runs(entry):
        finished = parse_datetime(r["finished_at"]) if r.get("finished_at") else None
        published.append(
            PublishedRun(
                bundle=row,
                probe_version=version,
                kind=r["kind"],
                task_id=r["task"],
                split=r["split"],
                base_model_id=r["base_model"],
                protocol=r.get("protocol") or "",
                code_version=r.get("code_version") or "",
                split_sha256=r.get("split_sha256") or "",
                worker_host=r.get("worker_host") or "",
                environment=r.get("environment") or {},
                example_scores=r.get("example_scores") or [],
                metrics=r.get("metrics") or {},
                finished_at=finished,
            )
        )
    PublishedRun.objects.bulk_create(published)
    return version


def bundle_import(
    path: Path, *, extra_keys: list[bytes] | None = None, models: set[str] | None = None
) -> dict[str, Any]:
    """Check ``path`` (signature by a trusted key, every part's hash, this board has the bundle's
    tasks, splits, models and protocols as it measured them), then import every entry not already
    here. Nothing is written when any check fails. Once every check has passed, each entry is
    written in its own transaction (the eval-awareness references first), so the board's pages
    show the entries as they arrive instead of waiting for the whole bundle; an import cut off
    half way is finished by importing the same bundle again. ``models``: import only the entries
    on these base models (the ones this deployment runs; None: every one). Returns what was
    imported, what was left out, and, per entry, any published total the recomputation does not give."""
    bundle = fmt.bundle_read(
        path, trusted=trusted_public_keys(extra_keys), max_bytes=settings.MAX_BUNDLE_BYTES
    )
    listed = bundle.manifest.get("entries") or []
    entries = [e for e in listed if models is None or e.get("base_model") in models]
    to_import = [
        e for e in entries if not ProbeVersion.objects.filter(artifact_sha256=e["artifact_sha256"]).exists()
    ]
    row = ResultBundle.objects.filter(id=bundle.id).first()
    if row is not None and (row.role != ResultBundle.Role.IMPORTED or not to_import):
        raise Conflict(f"bundle {bundle.id[:12]} is already on this board", field="bundle")
    problems = _context_problems(bundle)
    docs = {}
    for entry in entries:
        docs[entry["entry"]] = doc = bundle.entry_json(entry)
        problems += _entry_problems(entry, doc, bundle.parts.get(entry.get("artifact"), b""))
    if problems:
        raise fmt.BundleError(problems)
    # the eval-awareness references first: the other entries' Scores read their reference runs
    to_import.sort(key=lambda e: (e["category"] != EVAL_AWARENESS, e["probe"]))
    signer = bundle.manifest["signer"]
    report: dict[str, Any] = {"bundle": bundle.id, "imported": [], "already_here": [], "differs": {}}
    report["already_here"] = sorted(e["probe"] for e in entries if e not in to_import)
    report["left_out"] = sorted(e["probe"] for e in listed if e not in entries)
    if row is None:
        try:
            with transaction.atomic():
                row = ResultBundle.objects.create(
                    id=bundle.id,
                    role=ResultBundle.Role.IMPORTED,
                    board=str((bundle.manifest.get("board") or {}).get("name", ""))[:120],
                    signer_fingerprint=signer["fingerprint"],
                    signer_public_key=signer["public_key"],
                    commit=str(bundle.manifest.get("commit", ""))[:40],
                    code_version=str(bundle.manifest.get("code_version", ""))[:40],
                    created_at=_when(bundle.manifest.get("created_at")),
                    entries=len(entries),
                    bytes=Path(path).stat().st_size,
                )
        except IntegrityError:  # another import of the same bundle began a moment ago
            raise Conflict(f"bundle {bundle.id[:12]} is being imported already", field="bundle") from None
    for entry in to_import:
        doc = docs[entry["entry"]]
        with transaction.atomic():
            version = _import_entry(bundle, row, entry, doc)
            submission = version.submission
            # the Score from the published runs (services.replication fills them in): recomputed here
            scores = submission_score(submission=submission, runs=[])
            submission.status = Submission.Status.SCORED
            submission.step = f"published in bundle {row.id[:12]}; not yet replicated here"
            submission.finished_at = timezone.now()
            submission.progress = 1.0
            submission.save(update_fields=["status", "step", "finished_at", "progress", "updated_at"])
        differs = _totals_differ(doc.get("scores") or {}, scores)
        if differs:
            report["differs"][entry["probe"]] = differs
        report["imported"].append(entry["probe"])
    return report


def _when(text: Any):
    """A manifest's ``created_at`` (ISO 8601), refused by name when it is not one."""
    when = parse_datetime(text) if isinstance(text, str) else None
    if when is None:
        raise fmt.BundleError([f"{fmt.MANIFEST}: created_at {str(text)[:40]!r} is not an ISO 8601 time"])
    return when


def _totals_differ(published: dict, scores: list[Score], tol: float = 1e-9) -> dict[str, Any]:
    """spec → {published, recomputed} for each spec whose total differs."""
    out = {}
    for s in scores:
        given = (published.get(s.spec_id) or {}).get("total")
        if given is not None and abs(float(given) - float(s.total)) > tol:
            out[s.spec_id] = {"published": given, "recomputed": s.total}
    return out
