"""Quarterly re-evaluation on real runs: real SmolLM2 probes scored by a real Celery worker
process, cycles started by staff through the API and the command, holdouts drawn with a secret
seed from the small registry's sealed pools and run by the worker (which opens the sealed files
with the key the board made); a probe trained on its own test split is caught, and its confirmed
record survives every attempt to change or delete it; the completed cycle's reveal passes
``verify-holdout``; a new eval-awareness reference version re-scores the dependents from stored
per-example scores, with no model in reach."""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from rest_framework.test import APIClient

from evaluator.commands.cli import main as evaluator_main
from evaluator.data.pools import sealed_label, sealed_pool_path
from evaluator.data.sealing import read_sealed
from leaderboard.errors import ImmutableRecordError
from leaderboard.models import (
    CycleResult,
    EvaluationRun,
    LeakageRecord,
    Probe,
    ReevaluationCycle,
    ReferenceUpdate,
    Score,
    Submission,
)
from leaderboard.sealed import holdout_read, sealing_key
from leaderboard.services.tokens import api_token_create
from tests.integration.conftest import SOURCE, WorkerProcess, settled, submit_dir, train_probe, wait_for

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]
Run = EvaluationRun
TRUTH = "cities-truth-v1"
EA_TASK = "benchmark-vs-user-v1"
URL = "/api/v1/maintainer/reevaluations"
HOLDOUT_SIZE = 16  # disjoint quarters from the small registry's sealed pools of 200


def edit_probe_json(probe_dir: Path, **changes) -> Path:
    meta = json.loads((probe_dir / "probe.json").read_text())
    meta.update(changes)
    meta = {k: v for k, v in meta.items() if v is not None}
    (probe_dir / "probe.json").write_text(json.dumps(meta, indent=2))
    return probe_dir


@pytest.fixture(scope="module")
def leaky(mini_root, tmp_path_factory):
    """A probe trained on the truth task's TEST split: a registry copy whose train split is the
    test file, a real logistic regression on SmolLM2 layer 4 (which memorises 32 rows and does not
    generalise). Its submitter declares the test split honestly; no recipe."""
    root = Path(shutil.copytree(mini_root, tmp_path_factory.mktemp("leaky") / "registry"))
    data = yaml.safe_load((root / "tasks.yaml").read_text())
    for task in data["tasks"]:
        if task["id"] == TRUTH:
            task["splits"]["train"] = dict(task["splits"]["test"])
    (root / "tasks.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    out = train_probe(root, tmp_path_factory.mktemp("probes") / "leaky", task=TRUTH, layer=4)
    return edit_probe_json(
        out,
        name="Memorised cities probe",
        recipe=None,
        training_data={"tasks": [TRUTH], "splits": ["test"], "external": ""},
        trained_on=[TRUTH],
    )


@pytest.fixture(scope="module")
def reference_v2(mini_root, tmp_path_factory):
    """A second version of the eval-awareness reference probe (another layer, another method)."""
    out = train_probe(
        mini_root, tmp_path_factory.mktemp("probes") / "ref2", task=EA_TASK, layer=6, method="diff_of_means"
    )
    return out


@pytest.fixture
def board(mini, settings):
    settings.ENABLED_MODELS = [SOURCE]  # no cross-model transfer runs: ρ_CE is not what these tests are about
    settings.HOLDOUT_SIZE = HOLDOUT_SIZE
    return mini


@pytest.fixture
def confirmed_records_cleared():
    """Confirmed leakage records are permanent, for the database flush between transactional tests
    too: after the test, the triggers of migration 0002 are dropped, the records deleted, and the
    triggers restored."""
    yield
    triggers = importlib.import_module("leaderboard.migrations.0002_leakage_immutable_triggers")
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute(triggers.PG_REVERSE)
            cur.execute("DELETE FROM leaderboard_leakagerecord")
            cur.execute(triggers.PG_FORWARD)
        else:
            for sql in triggers.SQLITE_REVERSE:
                cur.execute(sql)
            cur.execute("DELETE FROM leaderboard_leakagerecord")
            for sql in triggers.SQLITE_FORWARD:
                cur.execute(sql)


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client


def scored(sub: Submission, workers, timeout: float = 900) -> Submission:
    wait_for(
        lambda: settled(sub.pk),
        timeout=timeout,
        what=f"submission {sub.pk} to be scored",
        workers=workers,
    )
    sub.refresh_from_db()
    assert sub.status == "scored", sub.failure_reason
    return sub


def completed(quarter: str, workers, timeout: float = 600) -> ReevaluationCycle:
    wait_for(
        lambda: ReevaluationCycle.objects.get(quarter=quarter).status != "running",
        timeout=timeout,
        what=f"cycle {quarter} to complete",
        workers=workers,
    )
    cycle = ReevaluationCycle.objects.get(quarter=quarter)
    assert cycle.status == "completed", cycle.error
    return cycle


def test_a_quarter_on_real_runs_catches_a_probe_trained_on_its_test_split(
    board,
    trained,
    leaky,
    start_worker,
    maintainer,
    system_account,
    researcher,
    tmp_path,
    settings,
    client,
    confirmed_records_cleared,
):
    worker = start_worker("cycle")
    scored(
        submit_dir(
            system_account,
            trained["reference"],
            via="seed",
            is_reference=True,
            reference_role="eval_awareness",
        ),
        [worker],
    )
    truth = scored(submit_dir(researcher, trained["truth"]), [worker]).probe_version.probe
    bad = scored(submit_dir(researcher, leaky), [worker]).probe_version
    # suspicion rule 2, when it was scored: the declared training data is the test split
    [declared] = LeakageRecord.objects.filter(probe=bad.probe)
    assert declared.rule == "declared_training_overlap" and declared.status == "open"
    assert declared.evidence["overlaps"][0]["rows"] == declared.evidence["overlaps"][0]["split_rows"] == 32
    assert bad.reference_auroc == pytest.approx(1.0)  # it memorised its test set

    # only staff start a cycle
    assert api(researcher).post(URL, {"quarter": "2026Q3"}, format="json").status_code == 403

    # a tampered split file stops the cycle before any run
    tampered = Path(shutil.copytree(board, tmp_path / "tampered"))
    split = tampered / "registry" / "splits" / TRUTH / "test.jsonl"
    split.write_bytes(split.read_bytes().replace(b"The city of", b"The town of", 1))
    settings.REGISTRY_ROOT = tampered
    response = api(maintainer).post(URL, {"quarter": "2026Q3"}, format="json")
    assert response.status_code == 400
    pinned = yaml.safe_load((board / "tasks.yaml").read_text())
    pinned_sha = next(t for t in pinned["tasks"] if t["id"] == TRUTH)["splits"]["test"]["sha256"]
    error = response.json()["error"]
    assert f"registry/splits/{TRUTH}/test.jsonl" in error and pinned_sha in error
    assert hashlib.sha256(split.read_bytes()).hexdigest() in error
    assert not Run.objects.filter(kind=Run.Kind.HOLDOUT).exists()
    assert ReevaluationCycle.objects.get(quarter="2026Q3").status == "failed"

    # the files fixed: the quarter starts, every active probe is rerun on fresh holdouts by the worker
    settings.REGISTRY_ROOT = board
    response = api(maintainer).post(URL, {"quarter": "2026Q3"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["runs"] == 3
    assert "of 3</strong> done" in client.get("/reevaluations/2026Q3/").content.decode()
    second = api(maintainer).post(URL, {"quarter": "2026Q3"}, format="json")
    assert second.status_code == 409 and "one per quarter" in second.json()["error"]

    cycle = completed("2026Q3", [worker])
    for run in cycle.runs.all():
        assert run.status == Run.Status.SUCCEEDED and run.attempts == 1, run.error
        holdout = cycle.holdouts[run.task_id]
        assert run.split_sha256 == holdout["sha256"]
        data = holdout_read(cycle.quarter, run.task_id, "", holdout["path"])  # sealed at rest
        committed = {e["task"]: e["sha256"] for e in cycle.commitment["holdouts"]}
        assert hashlib.sha256(data).hexdigest() == holdout["sha256"] == committed[run.task_id]
        assert sorted(e["id"] for e in run.example_scores) == sorted(holdout["ids"])
    assert client.get("/api/v1/reevaluations/2026Q3").json()["progress"] == {
        "total": 3,
        "done": 3,
        "failed": 0,
    }
    # completed: the seed and the rows are revealed, and the draw checks out from outside
    reveal = tmp_path / "reveal.json"
    reveal.write_text(client.get("/api/v1/reevaluations/2026Q3/reveal").content.decode())
    pools = []
    for task in (TRUTH, EA_TASK):
        plain = tmp_path / f"{task}.jsonl"
        path = sealed_pool_path(settings.DATA_DIR, task)
        plain.write_bytes(read_sealed(path, key=sealing_key(), label=sealed_label(task)))
        pools += ["--pool", f"{task}={plain}"]
    argv = ["verify-holdout", "2026Q3", "--reveal", str(reveal), "--registry", str(board), *pools, "--json"]
    assert evaluator_main(argv) == 0

    leaky_result = CycleResult.objects.get(cycle=cycle, probe_version=bad)
    assert leaky_result.outcome == "deprecated" and leaky_result.drop_points > 10, leaky_result.drop_points
    assert Probe.objects.get(pk=bad.probe_id).status == "deprecated"
    assert CycleResult.objects.get(cycle=cycle, probe_version__probe=truth).outcome == "held"
    assert {e["probe"] for e in client.get("/api/v1/reevaluations/2026Q3").json()["diff"]["deprecated"]} == {
        bad.probe.slug
    }
    # suspicion rule 1: the test set scores far better than the fresh holdout
    record = LeakageRecord.objects.get(probe=bad.probe, rule="test_exceeds_holdout")
    assert record.status == "open" and record.evidence["test_auroc"] - record.evidence["holdout_auroc"] > 0.10

    # a maintainer confirms it in the admin, with a public note
    client.force_login(maintainer)
    admin_url = f"/admin/leaderboard/leakagerecord/{record.pk}"
    note = "Trained on the cities-truth-v1 test split: perfect on test, near chance on the 2026Q3 holdout."
    form = {
        "summary": record.summary,
        "evidence": json.dumps(record.evidence),
        "public_note": note,
        "decision": "confirm",
    }
    assert client.post(f"{admin_url}/change/", form).status_code == 302
    record.refresh_from_db()
    assert record.status == "confirmed" and record.reviewed_by == maintainer

    # ... and then nobody can change or delete it: admin, ORM, queryset, raw SQL
    assert client.post(f"{admin_url}/change/", form | {"public_note": "never mind"}).status_code == 403
    assert client.post(f"{admin_url}/delete/", {"post": "yes"}).status_code == 403
    record.public_note = "never mind"
    with pytest.raises(ImmutableRecordError):
        record.save()
    with pytest.raises(ImmutableRecordError):
        record.delete()
    with pytest.raises(ImmutableRecordError):
        LeakageRecord.objects.filter(pk=record.pk).update(status="dismissed")
    with pytest.raises(ImmutableRecordError):
        LeakageRecord.objects.filter(probe=bad.probe).delete()
    for sql in (
        "UPDATE leaderboard_leakagerecord SET public_note = 'rewritten' WHERE id = %s",
        "DELETE FROM leaderboard_leakagerecord WHERE id = %s",
    ):
        with (
            pytest.raises(DatabaseError, match="confirmed"),
            transaction.atomic(),
            connection.cursor() as cur,
        ):
            cur.execute(sql, [record.pk])
    assert LeakageRecord.objects.get(pk=record.pk).public_note == note

    # shown on the probe, the board and the leakage page
    client.logout()
    assert note in client.get(f"/probes/{bad.probe.slug}/").content.decode()
    assert note in client.get("/leakage/").content.decode()
    rows = {
        r["probe"]: r
        for r in client.get("/api/v1/leaderboard", {"category": "hallucination"}).json()["results"]
    }
    assert (
        rows[bad.probe.slug]["badges"]["leakage"] is True
        and rows[bad.probe.slug]["badges"]["deprecated"] is True
    )

    # the next quarter, from the command: fresh holdouts, the deprecated probe not rerun, a second hold
    out = StringIO()
    call_command("start_reevaluation", "2026Q4", "--as", maintainer.username, stdout=out)
    assert "2 run(s) queued" in out.getvalue()
    nxt = completed("2026Q4", [worker])
    for task, h in nxt.holdouts.items():
        assert not set(h["ids"]) & set(cycle.holdouts[task]["ids"]) and h["reused_rows"] == 0
    assert CycleResult.objects.get(cycle=nxt, probe_version__probe=truth).outcome == "held"
    assert Probe.objects.get(pk=truth.pk).stability_quarters == 2
    assert {"probe": truth.slug, "quarters_held": 2} in nxt.diff["stability"]
    assert client.get(f"/api/v1/probes/{truth.slug}").json()["stable"] is True


def test_a_new_reference_version_recomputes_auroc_ea_from_stored_scores_without_a_model(
    board, trained, reference_v2, worker_env, system_account, researcher, monkeypatch, client
):
    from evaluator.metrics.metrics import auroc_ea
    from leaderboard.services.reference_updates import reference_update_advance

    # a worker that runs models (the run queues) but no bookkeeping (the default queue), so the
    # recompute waits for this process, where no model can be loaded
    worker = WorkerProcess(worker_env, "runs-only", queues="primary,secondary").start()
    try:
        ref1 = scored(
            submit_dir(
                system_account,
                trained["reference"],
                via="seed",
                is_reference=True,
                reference_role="eval_awareness",
            ),
            [worker],
        ).probe_version
        truth = scored(submit_dir(researcher, trained["truth"]), [worker]).probe_version
        before = Score.objects.get(probe_version=truth, spec_id="v0.0.3")
        assert not before.components["auroc_ea"]["imputed"]
        truth_runs = sorted(
            Run.objects.filter(probe_version=truth).values_list("pk", "attempts", "finished_at")
        )

        edit_probe_json(
            reference_v2, probe=ref1.probe.slug, recipe=None, trained_on=[EA_TASK]
        )  # a new version
        ref2 = scored(submit_dir(system_account, reference_v2), [worker]).probe_version
        assert ref2.probe_id == ref1.probe_id and ref2.number == 2
        wait_for(
            lambda: (
                ReferenceUpdate.objects.filter(new_version=ref2).exists()
                and not Run.objects.filter(probe_version=ref2, kind=Run.Kind.REFERENCE)
                .exclude(status=Run.Status.SUCCEEDED)
                .exists()
            ),
            timeout=600,
            what="the new reference to score the dependents' test items",
            workers=[worker],
        )
    finally:
        worker.stop()
    update = ReferenceUpdate.objects.get(new_version=ref2)
    assert update.status == "running" and update.old_version == ref1
    [ref_run] = Run.objects.filter(probe_version=ref2, kind=Run.Kind.REFERENCE)
    assert ref_run.task_id == TRUTH

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded while recomputing auroc_ea")

    monkeypatch.setattr("evaluator.core.models.load_model", no_model)
    monkeypatch.setattr("leaderboard.runner.loaded_model", no_model)
    update = reference_update_advance(update_id=update.pk)

    assert update.status == "completed" and update.error == ""
    [entry] = update.diff
    test_run = Run.objects.get(probe_version=truth, kind=Run.Kind.SCORE, split="test")
    ref_scores = {e["id"]: e["score"] for e in ref_run.example_scores}
    expected = auroc_ea(
        [e["score"] for e in test_run.example_scores],
        [e["label"] for e in test_run.example_scores],
        [ref_scores[e["id"]] for e in test_run.example_scores],
    )
    assert entry["probe"] == truth.probe.slug and entry["auroc_ea_before"] == before.measurements["auroc_ea"]
    assert entry["auroc_ea_after"] == pytest.approx(expected, abs=1e-9)
    after = Score.objects.get(probe_version=truth, spec_id="v0.0.3")
    assert after.measurements["auroc_ea"] == pytest.approx(expected, abs=1e-9)
    assert entry["total_after"] == pytest.approx(after.total) and entry["total_before"] == pytest.approx(
        before.total
    )
    assert after.measurements["auroc"] == before.measurements["auroc"]  # only auroc_ea moved
    # the dependent's own runs were not touched: nothing re-ran on a model
    assert (
        sorted(Run.objects.filter(probe_version=truth).values_list("pk", "attempts", "finished_at"))
        == truth_runs
    )

    # the diff is published
    published = {u["new_version"]: u for u in client.get("/api/v1/reference-updates").json()}
    assert published[1]["diff"] == []  # the first reference: nothing depended on it yet
    published = published[2]
    assert published["old_version"] == 1
    assert published["diff"][0]["auroc_ea_after"] == pytest.approx(expected, abs=1e-9)
    assert client.get(f"/reevaluations/reference-updates/{update.pk}/").status_code == 200
