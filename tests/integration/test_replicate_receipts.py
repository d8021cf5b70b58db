"""Replication elsewhere: ``python -m evaluator replicate`` downloads the bundle a live board
published, checks it with the board's key, reruns an entry's published runs on a real model (MiniLM)
and posts a signed receipt the board shows; a receipt that disagrees is shown as a disagreement,
and one whose signature does not verify is refused with the field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator import bundles as fmt
from evaluator.axes.run import MeasureSetup, measure_split
from evaluator.core.harvest import HarvestConfig
from evaluator.core.models import load_model
from leaderboard import artifacts, runner
from leaderboard import models as m
from leaderboard.services.bundles import bundle_export
from leaderboard.services.tokens import api_token_create
from tests.factories import ProbeFactory, ProbeVersionFactory, SubmissionFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.model]
ROOT = Path(__file__).resolve().parents[2]
PROBE_DIR = ROOT / "registry" / "reference_probes" / "refusal-dom-minilm"
TASK = "harmful-requests-v1"


@pytest.fixture
def published(registry, settings, tmp_path, researcher):
    """A board that published a bundle of one real entry: the MiniLM refusal reference probe with
    its test run measured on the real model."""
    settings.DATA_DIR = tmp_path / "data"
    settings.ARTIFACT_ROOT = tmp_path / "data" / "media" / "artifacts"
    settings.BUNDLE_SIGNING_KEY_FILE = tmp_path / "data" / "board_ed25519.pem"
    data = (PROBE_DIR / "probe.safetensors").read_bytes()
    metadata = json.loads((PROBE_DIR / "probe.json").read_text())
    sha = artifacts.sha256_bytes(data)
    artifacts.artifact_store(data, sha)
    probe = ProbeFactory(
        slug="refusal-minilm", category_id="refusal", base_model_id=metadata["base_model"], owner=researcher
    )
    version = ProbeVersionFactory(
        probe=probe,
        artifact_sha256=sha,
        artifact_path=artifacts.artifact_relpath(sha),
        artifact_bytes=len(data),
        layer=6,
        position="mean",
        kind="linear",
        metadata=metadata,
        recipe=metadata["recipe"],
    )
    SubmissionFactory(probe_version=version, status=m.Submission.Status.SCORED)
    reg = runner.registry()
    protocol = reg.protocol()
    lm = load_model(metadata["base_model"], registry=reg, cache_dir=settings.CACHE_DIR, protocol=protocol)
    measured = measure_split(
        runner.probe_for(version),
        task_id=TASK,
        split="test",
        setup=MeasureSetup(
            reg, settings.CACHE_DIR, None, None, HarvestConfig.from_protocol(protocol), protocol
        ),
        lm=lm,
        progress=lambda f, msg: None,
    )
    m.EvaluationRun.objects.create(
        probe_version=version,
        submission=version.submission,
        kind="score",
        task_id=TASK,
        split="test",
        base_model_id=metadata["base_model"],
        status="succeeded",
        protocol=protocol.id,
        split_sha256=measured.run.split_sha256,
        example_scores=measured.run.examples.to_records(),
    )
    return bundle_export(), version


def _replicate(server: str, token: str, key: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "replicate",
            "--server",
            server,
            "--token",
            token,
            "--probe",
            "refusal-minilm",
            "--key-file",
            str(key),
            "--cache-dir",
            str(cache),
            "--json",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def test_replicate_posts_a_receipt_the_board_shows_and_a_wrong_one_is_a_disagreement(
    published, live_server, researcher, client, tmp_path, settings
):
    bundle, version = published
    token = api_token_create(user=researcher)
    proc = _replicate(live_server.url, token, tmp_path / "me.pem", Path(settings.CACHE_DIR))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    [entry] = report["entries"]
    assert entry["verdict"] == "agrees" and entry["posted"] and entry["runs"][0]["max_abs_diff"] <= 1e-3
    shown = client.get("/api/v1/probes/refusal-minilm").json()["replications"]
    assert shown["count"] == 1 and shown["agree"] == 1
    receipt, signature = shown["receipts"][0]["receipt"], shown["receipts"][0]["signature"]
    # anyone can verify it offline with the replicator's key it names
    assert fmt.receipt_check(receipt, signature) == report["replicator"]

    # a replicator whose numbers differ: signed by its own key, shown as a disagreement
    other = fmt.private_key_create()
    wrong = dict(
        receipt,
        replicator={"public_key": fmt.signer_of(other)["public_key"]},
        verdict="differs",
        runs=[dict(receipt["runs"][0], agrees=False, max_abs_diff=0.5, why="|Δs| 0.5 above the tolerance")],
    )
    answer = client.post(
        "/api/v1/replications",
        {"receipt": wrong, "signature": fmt.receipt_sign(other, wrong)},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    assert answer.status_code == 201, answer.content
    page = client.get("/probes/refusal-minilm/").content.decode()
    assert (
        "Replicated by 2 elsewhere: 1 agree" in page
        and "1 disagree" in page
        and "above the tolerance" in page
    )

    # a receipt changed after it was signed, or naming an entry the bundle does not hold: 400, the field
    tampered = dict(wrong, verdict="agrees", runs=[dict(wrong["runs"][0], agrees=True)])
    answer = client.post(
        "/api/v1/replications",
        {"receipt": tampered, "signature": fmt.receipt_sign(other, wrong)},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    assert answer.status_code == 400 and answer.json()["field"] == "signature"
    elsewhere = dict(wrong, probe="not-in-the-bundle")
    answer = client.post(
        "/api/v1/replications",
        {"receipt": elsewhere, "signature": fmt.receipt_sign(other, elsewhere)},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    assert answer.status_code == 400 and answer.json()["field"] == "receipt.probe"
    anonymous = client.post("/api/v1/replications", {}, content_type="application/json")
    assert anonymous.status_code in (401, 403)
    assert m.ReplicationReceipt.objects.filter(probe_version=version).count() == 2
