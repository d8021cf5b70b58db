"""Signed result bundles: the board's public entries written out with every per-example score,
verified to the byte, and imported elsewhere with every number recomputed, or refused whole."""

from __future__ import annotations

import io
import tarfile
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from evaluator import bundles as fmt
from leaderboard import artifacts
from leaderboard import models as m
from leaderboard.registry_sync import registry_sync
from leaderboard.services.bundles import board_public_key, bundle_export, bundle_import
from leaderboard.services.scores import submission_score
from tests.leaderboard.test_onpolicy_tasks import SMOL, _finish, _queued

pytestmark = pytest.mark.django_db


@pytest.fixture
def board(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.ARTIFACT_ROOT = tmp_path / "data" / "media" / "artifacts"
    settings.BUNDLE_SIGNING_KEY_FILE = tmp_path / "data" / "board_ed25519.pem"
    settings.BUNDLE_TRUSTED_KEYS_DIR = tmp_path / "keys"
    registry_sync()
    versions = []
    for i, (slug, auroc) in enumerate((("bundled-a", 0.9), ("bundled-b", 0.7))):
        version = _queued(slug, SMOL)
        data = f"not a real probe {i}".encode()
        sha = artifacts.sha256_bytes(data)
        artifacts.artifact_store(data, sha)
        m.ProbeVersion.objects.filter(pk=version.pk).update(
            artifact_sha256=sha, artifact_path=artifacts.artifact_relpath(sha), artifact_bytes=len(data)
        )
        version.refresh_from_db()
        runs = _finish(version, {"cities-truth-v1": auroc, "halueval-qa-v1": auroc - 0.1})
        m.Score.objects.filter(probe_version=version).delete()
        submission_score(submission=version.submission, runs=runs)
        m.Submission.objects.filter(pk=version.submission.pk).update(status=m.Submission.Status.SCORED)
        versions.append(version)
    return versions


def _forget(versions) -> dict[str, float]:
    """Remove the entries from this board (as if it were another board); their totals by slug."""
    totals = {}
    for v in versions:
        spec_scores = m.Score.objects.filter(probe_version=v)
        totals[v.probe.slug] = {s.spec_id: s.total for s in spec_scores}
        spec_scores.delete()
        m.EvaluationRun.objects.filter(probe_version=v).delete()
        m.Submission.objects.filter(probe_version=v).delete()
        probe = v.probe
        v.delete()
        probe.delete()
    return totals


def test_a_bundle_round_trips_with_every_number_recomputed(board, client, tmp_path):
    row = bundle_export()
    assert row.role == "published" and row.entries == 2 and len(row.id) == 64
    listed = client.get("/api/v1/bundles").json()
    [item] = listed["results"]
    assert item["id"] == row.id and item["url"] == f"/bundles/{row.id}.tar"
    download = b"".join(client.get(item["url"]).streaming_content)
    pem = client.get(listed["public_key_url"]).content
    path = tmp_path / "got.tar"
    path.write_bytes(download)
    # anyone can verify it offline with the published key, without a database
    bundle = fmt.bundle_read(path, trusted=fmt.trusted_keys([pem]), max_bytes=1 << 30)
    assert bundle.id == row.id and {e["probe"] for e in bundle.manifest["entries"]} == {
        "bundled-a",
        "bundled-b",
    }
    [entry] = [e for e in bundle.manifest["entries"] if e["probe"] == "bundled-a"]
    runs = bundle.entry_runs(entry)
    assert {(r["task"], r["split"]) for r in runs} >= {
        ("cities-truth-v1", "test"),
        ("halueval-qa-v1", "train"),
    }
    assert all(r["example_scores"] for r in runs)
    totals = _forget(board)
    m.ResultBundle.objects.all().delete()
    report = bundle_import(path)
    assert sorted(report["imported"]) == ["bundled-a", "bundled-b"] and report["differs"] == {}
    for slug, by_spec in totals.items():
        version = m.ProbeVersion.objects.get(probe__slug=slug)
        assert version.bundle_id == row.id and version.submission.status == "scored"
        assert version.published_runs.count() == len(
            bundle.entry_runs(next(e for e in bundle.manifest["entries"] if e["probe"] == slug))
        )
        assert not m.EvaluationRun.objects.filter(probe_version=version).exists()
        assert {s.spec_id: s.total for s in m.Score.objects.filter(probe_version=version)} == pytest.approx(
            by_spec
        )
    # the same bundle twice: refused, nothing written
    with pytest.raises(Exception, match="already on this board"):
        bundle_import(path)


def _flip(path, member: str) -> None:
    """Change one byte inside ``member`` of the tar at ``path``, in place."""
    with tarfile.open(path) as tar:
        offset = tar.getmember(member).offset_data
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x01
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("member", ["part", "manifest.json", "manifest.sig"])
def test_one_changed_byte_refuses_the_bundle_and_imports_nothing(board, tmp_path, member):
    path = tmp_path / "b.tar"
    bundle_export(out=path)
    _forget(board)
    m.ResultBundle.objects.all().delete()
    with tarfile.open(path) as tar:
        names = tar.getnames()
    target = next(n for n in names if n.endswith("runs.json.gz")) if member == "part" else member
    _flip(path, target)
    before = (m.Probe.objects.count(), m.ProbeVersion.objects.count(), m.PublishedRun.objects.count())
    with pytest.raises(fmt.BundleError) as err:
        bundle_import(path)
    expected = {"part": target, "manifest.json": "signature", "manifest.sig": "signature"}[member]
    assert expected in str(err.value)
    assert (m.Probe.objects.count(), m.ProbeVersion.objects.count(), m.PublishedRun.objects.count()) == before
    assert not m.ResultBundle.objects.exists()


def test_a_bundle_from_an_unknown_key_or_with_unsafe_members_is_refused(board, tmp_path):
    path = tmp_path / "b.tar"
    bundle_export(out=path)
    stranger = fmt.private_key_create()
    with pytest.raises(fmt.BundleError, match="does not verify with any key trusted here"):
        fmt.bundle_read(path, trusted=fmt.trusted_keys([fmt.public_key_pem(stranger)]), max_bytes=1 << 30)
    with pytest.raises(fmt.BundleError, match="at most 10 are accepted"):
        fmt.bundle_read(path, trusted={}, max_bytes=10)
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        for name in ("manifest.json", "manifest.sig", "../../etc/passwd"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"{}"))
    with pytest.raises(fmt.BundleError, match="not a part name"):
        fmt.bundle_read(evil, trusted={}, max_bytes=1 << 20)
    link = tmp_path / "link.tar"
    with tarfile.open(link, "w") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    with pytest.raises(fmt.BundleError, match="not a regular file"):
        fmt.bundle_read(link, trusted={}, max_bytes=1 << 20)


def test_a_bundle_measured_on_other_data_is_refused_by_name(board, settings, tmp_path):
    path = tmp_path / "b.tar"
    bundle_export(out=path)
    bundle = fmt.bundle_read(
        path,
        trusted=fmt.trusted_keys([fmt.public_key_pem(settings.BUNDLE_SIGNING_KEY_FILE.read_bytes())]),
        max_bytes=1 << 30,
    )
    manifest = {k: v for k, v in bundle.manifest.items() if k not in ("format", "signer", "parts")}
    manifest["context"]["splits"]["cities-truth-v1"] = {"test@" + SMOL: "0" * 64}
    manifest["context"]["protocols"]["p9"] = "1" * 64
    forged = tmp_path / "forged.tar"
    fmt.bundle_write(
        forged,
        manifest=manifest,
        parts=bundle.parts,
        private_pem=settings.BUNDLE_SIGNING_KEY_FILE.read_bytes(),
    )
    _forget(board)
    with pytest.raises(fmt.BundleError) as err:
        bundle_import(forged)
    assert "task cities-truth-v1: split test" in str(err.value) and "protocol p9" in str(err.value)
    assert not m.ProbeVersion.objects.filter(probe__slug__startswith="bundled").exists()


def test_the_commands_write_and_refuse_with_what_failed(board, tmp_path):
    out = StringIO()
    path = tmp_path / "c.tar"
    call_command("export_bundle", "--out", str(path), stdout=out)
    assert "2 entries" in out.getvalue() and path.is_file()
    with tarfile.open(path) as tar:
        entry_json = next(n for n in tar.getnames() if n.endswith("entry.json"))
    _flip(path, entry_json)
    with pytest.raises(CommandError, match="entry.json: its SHA-256 or size differs"):
        call_command("import_bundle", str(path), stdout=StringIO())
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_bundle", str(tmp_path / "missing.tar"), stdout=StringIO())


def test_an_imported_entry_is_on_the_board_marked_as_published_elsewhere(board, client, tmp_path):
    path = tmp_path / "b.tar"
    row = bundle_export(out=path)
    _forget(board)
    m.ResultBundle.objects.all().delete()
    bundle_import(path)
    page = client.get("/probes/bundled-a/")
    assert page.status_code == 200
    text = page.content.decode()
    assert (
        "published by ProbeBench" in text
        and row.signer_fingerprint in text
        and "not yet replicated here" in text
    )
    board_page = client.get("/category/hallucination/").content.decode()
    assert "bundled-a" in board_page
    api = client.get("/api/v1/probes/bundled-a").json()
    assert api["published_by"]["bundle"] == row.id and api["published_by"]["replicated_here"] is False


def test_a_completed_cycle_publishes_a_bundle(board, monkeypatch):
    from leaderboard.services import reevaluation
    from leaderboard.services.runs import BUNDLE_PUBLISH_TASK
    from leaderboard.tasks import bundle_publish_task

    queued = []
    monkeypatch.setattr(reevaluation, "task_delay", lambda name, *args: queued.append((name, args)))
    reevaluation._cycle_followups("2026Q4", ["hallucination"])
    assert (BUNDLE_PUBLISH_TASK, ("2026Q4",)) in queued
    bundle_id = bundle_publish_task("2026Q4")
    row = m.ResultBundle.objects.get(id=bundle_id)
    assert row.quarter == "2026Q4" and row.role == "published" and row.entries == 2


def test_the_evaluator_verifies_a_bundle_offline(board, settings, tmp_path, capsys):
    from evaluator.commands.cli import main

    path = tmp_path / "b.tar"
    row = bundle_export(out=path)
    key = tmp_path / "board.pem"
    key.write_bytes(fmt.public_key_pem(settings.BUNDLE_SIGNING_KEY_FILE.read_bytes()))
    assert main(["verify-bundle", str(path), "--key", str(key), "--json"]) == 0
    out = capsys.readouterr().out
    assert row.id in out and '"verified": true' in out
    _flip(path, "manifest.sig")
    assert main(["verify-bundle", str(path), "--key", str(key)]) == 2  # an error, named
    assert "does not verify" in capsys.readouterr().err


def _imported(board, tmp_path) -> list[m.ProbeVersion]:
    path = tmp_path / "r.tar"
    bundle_export(out=path)
    _forget(board)
    m.ResultBundle.objects.all().delete()
    bundle_import(path)
    return list(m.ProbeVersion.objects.filter(bundle__isnull=False).order_by("probe__slug"))


def test_replication_reruns_an_imported_entry_and_says_how_close_it_came(board, tmp_path):
    from leaderboard.services.replication import replication_state, replications_start
    from leaderboard.services.submissions import submission_advance

    version, _ = _imported(board, tmp_path)
    assert replication_state(version)["state"] == "replicating"
    assert replications_start([version]) > 0
    published = {(p.kind, p.task_id, p.split): p for p in version.published_runs.all()}
    here = {(r.kind, r.task_id, r.split): r for r in m.EvaluationRun.objects.filter(probe_version=version)}
    assert set(published) <= set(here) and all(r.status == "queued" for r in here.values())
    before = m.Score.objects.get(probe_version=version, spec__version="v0.0.3").total
    # this board measures the same per-example scores, up to float noise within the tolerance
    for key, p in published.items():
        run = here[key]
        run.status, run.metrics = m.EvaluationRun.Status.SUCCEEDED, p.metrics
        run.example_scores = [e | {"score": e["score"] + 1e-5} for e in p.example_scores]
        run.finished_at = run.started_at = timezone.now()
        run.save()
    for r in here.values():  # the runs the bundle did not publish: not measured (a deployment's axes)
        if r.status == "queued":
            r.status, r.error = m.EvaluationRun.Status.FAILED, "not part of this test"
            r.save()
    submission_advance(submission=version.submission)
    version.refresh_from_db()
    state = version.replication
    assert state["state"] == "replicated" and state["runs_compared"] == len(published)
    assert 0 < state["max_abs_diff"] <= 2e-5 and state["differs"] == []
    after = m.Score.objects.get(probe_version=version, spec__version="v0.0.3").total
    assert after == pytest.approx(before, abs=1e-3)


def test_a_replication_beyond_the_tolerance_is_shown_as_a_difference(board, tmp_path):
    from leaderboard.services.replication import replication_refresh, replications_start

    version, _ = _imported(board, tmp_path)
    replications_start([version])
    p = version.published_runs.get(kind="score", task_id="cities-truth-v1", split="test")
    run = m.EvaluationRun.objects.get(
        probe_version=version, kind="score", task_id="cities-truth-v1", split="test"
    )
    run.status = m.EvaluationRun.Status.SUCCEEDED
    run.example_scores = [e | {"score": e["score"] + 0.5} for e in p.example_scores]
    run.save()
    state = replication_refresh(version)
    assert state["state"] == "replicating"  # the other runs are still queued
    [differs] = state["differs"]
    assert (
        differs["run"] == f"score cities-truth-v1/test on {SMOL}" and "above the tolerance" in differs["why"]
    )


def test_replication_runs_wait_for_every_other_run(board, tmp_path):
    from leaderboard.services.replication import replications_start
    from leaderboard.services.runs import evaluation_run_next

    version, _ = _imported(board, tmp_path)
    replications_start([version])
    mine = _queued("a-users-probe", SMOL)
    own = m.EvaluationRun.objects.create(
        probe_version=mine,
        submission=mine.submission,
        kind="score",
        task_id="cities-truth-v1",
        split="test",
        base_model_id=SMOL,
    )
    assert evaluation_run_next(queue="primary") == own.pk
    own.delete()
    nxt = m.EvaluationRun.objects.get(pk=evaluation_run_next(queue="primary"))
    assert nxt.probe_version_id == version.pk


def test_the_probe_page_says_replicated_here_with_the_largest_difference(board, tmp_path, client):
    from leaderboard.services.replication import replication_refresh, replications_start

    version, _ = _imported(board, tmp_path)
    replications_start([version])
    published = {(p.kind, p.task_id, p.split): p for p in version.published_runs.all()}
    for run in m.EvaluationRun.objects.filter(probe_version=version):
        p = published.get((run.kind, run.task_id, run.split))
        run.status = m.EvaluationRun.Status.SUCCEEDED if p else m.EvaluationRun.Status.FAILED
        run.example_scores = [e | {"score": e["score"] + 2e-4} for e in p.example_scores] if p else []
        run.save()
    replication_refresh(version)
    text = client.get(f"/probes/{version.probe.slug}/").content.decode()
    assert "replicated here" in text and "largest difference 0.0002" in text
    api = client.get(f"/api/v1/probes/{version.probe.slug}").json()["published_by"]
    assert api["replicated_here"] and api["runs_compared"] == len(published)


def test_a_malformed_receipt_gets_a_400_naming_the_field(board, client, researcher):
    from leaderboard.services.tokens import api_token_create

    row = bundle_export()
    token = api_token_create(user=researcher)
    key = fmt.private_key_create()
    version = board[0]
    receipt = {
        "format": fmt.RECEIPT_FORMAT,
        "bundle": row.id,
        "probe": version.probe.slug,
        "version": version.number,
        "artifact_sha256": version.artifact_sha256,
        "replicator": {"public_key": fmt.signer_of(key)["public_key"]},
        "verdict": "agrees",
        "runs": [{"run": "score cities-truth-v1/test", "agrees": True, "max_abs_diff": 0.0, "why": ""}],
    }

    def post(body: bytes):
        return client.post(
            "/api/v1/replications", body, content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}"
        )

    def signed(r: dict) -> bytes:
        import json

        return json.dumps({"receipt": r, "signature": fmt.receipt_sign(key, r)}).encode()

    assert post(signed(receipt)).status_code == 201
    cases = {
        b'{"receipt": {"runs": [NaN]}, "signature": "x"}': "body",
        b"[" * 100_000: "body",
        b"x" * (600 * 1024): "body",
        b'{"receipt": {}, "signature": "x", "extra": 1}': "body",
        signed(dict(receipt, runs="all")): "receipt.runs",
        signed(dict(receipt, verdict="differs")): "receipt.verdict",
        signed(dict(receipt, version=True)): "receipt.version",
        signed(dict(receipt, probe="Bad Slug\\u0000")): "receipt.probe",
        signed(dict(receipt, bundle="0" * 64)): "receipt.bundle",
        signed(
            dict(receipt, runs=[dict(receipt["runs"][0], max_abs_diff=-1)])
        ): "receipt.runs[0].max_abs_diff",
    }
    for body, field in cases.items():
        answer = post(body)
        assert answer.status_code == 400, (body[:60], answer.content)
        assert answer.json()["field"] == field, (body[:60], answer.json())
    assert m.ReplicationReceipt.objects.count() == 1


def test_the_demo_opens_from_a_bundle_and_plans_its_replication_lowest_first(settings, tmp_path):
    """``manage.py demo`` without --fresh: the bundle's reference entries on the board at once, the
    manifest entries it holds not submitted again, their replication planned."""
    import json
    from pathlib import Path

    from leaderboard.management.commands.demo import Command
    from leaderboard.management.commands.install_reference_probes import manifest_entries
    from leaderboard.services.accounts import system_account_get_or_create
    from tests.factories import ProbeFactory, ProbeVersionFactory, SubmissionFactory
    from tests.leaderboard.reevaluation_data import synthetic_scores

    settings.DATA_DIR = tmp_path / "data"
    settings.ARTIFACT_ROOT = tmp_path / "data" / "media" / "artifacts"
    settings.BUNDLE_SIGNING_KEY_FILE = tmp_path / "data" / "board_ed25519.pem"
    settings.BUNDLE_TRUSTED_KEYS_DIR = tmp_path / "keys"
    registry_sync()
    root = Path(settings.REGISTRY_ROOT)
    [entry] = manifest_entries(root / "registry" / "reference_probes" / "manifest.yaml", "refusal-dom-minilm")
    data = (root / entry["path"] / "probe.safetensors").read_bytes()
    metadata = json.loads((root / entry["path"] / "probe.json").read_text())
    sha = artifacts.sha256_bytes(data)
    artifacts.artifact_store(data, sha)
    probe = ProbeFactory(
        slug="refusal-dom-minilm-ref",
        category_id="refusal",
        base_model_id=metadata["base_model"],
        owner=system_account_get_or_create(),
        is_reference=True,
    )
    version = ProbeVersionFactory(
        probe=probe,
        artifact_sha256=sha,
        artifact_path=artifacts.artifact_relpath(sha),
        artifact_bytes=len(data),
        layer=6,
        position="mean",
        metadata=metadata,
    )
    SubmissionFactory(probe_version=version, status=m.Submission.Status.SCORED)
    for split in ("train", "test"):
        m.EvaluationRun.objects.create(
            probe_version=version,
            kind="score",
            task_id="harmful-requests-v1",
            split=split,
            base_model_id=metadata["base_model"],
            status="succeeded",
            example_scores=synthetic_scores(0.8),
            metrics={"latency": {"probe_ms": 0.2, "device": "cpu"}} if split == "test" else {},
        )
    path = tmp_path / "reference.tar"
    bundle_export(out=path)
    _forget([version])
    m.ResultBundle.objects.all().delete()
    settings.DEMO_BUNDLE = path
    command = Command(stdout=StringIO(), stderr=StringIO())
    command._root, command._bundle, command._imported = root, path, []
    left = command._open_from_bundle([entry])
    assert left == []  # held by the bundle: not submitted again
    imported = m.ProbeVersion.objects.get(artifact_sha256=sha)
    assert imported.bundle is not None and command._imported == [imported.submission.pk]
    assert "opened from the committed bundle" in command.stdout._out.getvalue()
    planned = m.EvaluationRun.objects.filter(probe_version=imported)
    assert planned.exists() and all(r.status == "queued" for r in planned)
    # a second start finds it imported and plans nothing twice
    again = Command(stdout=StringIO(), stderr=StringIO())
    again._root, again._bundle, again._imported = root, path, []
    assert (
        again._open_from_bundle([entry]) == []
        and planned.count() == m.EvaluationRun.objects.filter(probe_version=imported).count()
    )


def test_replication_plans_what_was_published_first_and_the_other_axes_once_that_is_done(
    board, tmp_path, django_capture_on_commit_callbacks, monkeypatch
):
    from leaderboard.axes import PRIMARY_KINDS
    from leaderboard.services import replication
    from leaderboard.services.replication import replication_refresh, replications_start

    monkeypatch.setattr(replication, "evaluation_runs_dispatch_on_commit", lambda runs: None)  # no worker

    version, other = _imported(board, tmp_path)
    # with a recipe, the transfer and reproduce axes apply (the bundle holds neither)
    recipe = {
        "method": "logistic_regression",
        "task": "halueval-qa-v1",
        "layer": 15,
        "position": "last_token",
    }
    m.ProbeVersion.objects.filter(pk__in=[version.pk, other.pk]).update(recipe=recipe)
    with django_capture_on_commit_callbacks(execute=True):
        replications_start([version, other])
    planned = m.EvaluationRun.objects.filter(probe_version__in=[version, other])
    assert planned.exists() and set(planned.values_list("kind", flat=True)) <= set(PRIMARY_KINDS)
    # one entry done: the other still has primary runs to replicate, so nothing else is planned
    for run in planned.filter(probe_version=version):
        run.status, run.finished_at = m.EvaluationRun.Status.FAILED, timezone.now()
        run.save()
    with django_capture_on_commit_callbacks(execute=True):
        replication_refresh(version)
    assert set(planned.values_list("kind", flat=True)) <= set(PRIMARY_KINDS)
    planned.update(status=m.EvaluationRun.Status.FAILED, finished_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        replication_refresh(other)
    rest = m.EvaluationRun.objects.filter(probe_version__in=[version, other]).exclude(kind__in=PRIMARY_KINDS)
    assert rest.filter(probe_version=version).exists() and rest.filter(probe_version=other).exists()
    assert set(rest.values_list("status", flat=True)) == {"queued"}


def test_an_import_writes_entry_by_entry_and_one_cut_off_half_way_is_finished_by_importing_again(
    board, tmp_path, monkeypatch
):
    from leaderboard.services import bundles as service

    path = tmp_path / "b.tar"
    bundle_export(out=path)
    _forget(board)
    m.ResultBundle.objects.all().delete()
    real = service._import_entry
    seen = []

    def cut_after_the_first(bundle, row, entry, doc):
        if seen:  # the first entry is committed and on the board before the second is written
            assert m.Submission.objects.filter(probe_version__probe__slug=seen[0], status="scored").exists()
            raise OSError("the disk filled up")
        seen.append(entry["probe"])
        return real(bundle, row, entry, doc)

    monkeypatch.setattr(service, "_import_entry", cut_after_the_first)
    with pytest.raises(OSError):
        bundle_import(path)
    assert m.ProbeVersion.objects.filter(bundle__isnull=False).count() == 1
    assert not m.PublishedRun.objects.exclude(probe_version__probe__slug=seen[0]).exists()  # no half entry
    monkeypatch.setattr(service, "_import_entry", real)
    report = bundle_import(path)
    assert report["imported"] == [s for s in ("bundled-a", "bundled-b") if s not in seen]
    assert report["already_here"] == seen
    with pytest.raises(Exception, match="already on this board"):
        bundle_import(path)


def test_a_bundle_leaves_out_the_sae_axis_runs_whose_snippets_are_not_ours_to_publish(board, tmp_path):
    version = board[0]
    m.EvaluationRun.objects.create(
        probe_version=version,
        submission=version.submission,
        kind="sae",
        task_id="cities-truth-v1",
        split="test",
        base_model_id=SMOL,
        status=m.EvaluationRun.Status.SUCCEEDED,
        metrics={"sae": {"features": [{"latent": 3, "top": [{"text_before": "a news article"}]}]}},
    )
    row = bundle_export(out=tmp_path / "b.tar")
    bundle = fmt.bundle_read(
        tmp_path / "b.tar", trusted=fmt.trusted_keys([board_public_key()]), max_bytes=1 << 30
    )
    [entry] = [e for e in bundle.manifest["entries"] if e["probe"] == version.probe.slug]
    kinds = {r["kind"] for r in bundle.entry_runs(entry)}
    assert "score" in kinds and "sae" not in kinds and row.entries == 2
