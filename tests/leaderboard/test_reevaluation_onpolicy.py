"""Quarterly cycles on an on-policy task (the real onpolicy-city-country-v1 of tasks.yaml): one
holdout per base model, minted from that model's own pool and disjoint from its other splits; a
probe on that model is rerun on its model's holdout and gets a holdout AUROC; the encoder (no
behaviour to label) is not rerun on it; the command, the page and the API show the per-model
holdouts without their item ids. An on-policy task's pools are its models' committed files, so
its holdouts say the pool is public."""

from __future__ import annotations

import hashlib
import json
from io import StringIO

import pytest
from django.core.management import call_command

from evaluator.data.builders.onpolicy import CITY_COUNTRY_ID
from evaluator.data.holdouts import read_rows
from evaluator.data.registry.load import load_registry
from evaluator.data.texts import text_hash
from leaderboard import models as m
from leaderboard.sealed import holdout_read
from leaderboard.services.reevaluation import cycle_advance, reevaluation_start
from tests.integration.mini_registry import seal_pools
from tests.leaderboard.board_data import public_probe
from tests.leaderboard.reevaluation_data import finish_holdout_runs, scored

pytestmark = pytest.mark.django_db
SMOL, ENCODER = "smollm2-135m-instruct", "all-minilm-l6-v2"
SIZE = 40  # from the pool of 100: two quarters without reuse


@pytest.fixture
def board(registry, settings, tmp_path):
    settings.HOLDOUT_SIZE = SIZE
    settings.DATA_DIR = tmp_path / "data"
    # the text tasks' sealed pools (stand-ins: what these tests read is the on-policy task's)
    seal_pools(load_registry().root, settings.DATA_DIR, settings.HOLDOUT_SEALING_KEY_FILE, rows=10 * SIZE)
    smol = scored("smol-city", reference_auroc=0.8)
    tasks = [
        t
        for t in m.Task.objects.filter(category_id="hallucination", status="active")
        if t.measured_on(ENCODER)
    ]
    encoder = public_probe(
        slug="encoder-city", base_model=ENCODER, auroc=0.7, tasks=tasks, reference_auroc=0.7, layer=3
    )
    return smol, encoder


def test_an_on_policy_task_gets_one_holdout_per_model_from_that_models_pool(board, maintainer, settings):
    cycle = reevaluation_start(quarter="2026Q4", by=maintainer, dispatch=False)
    reg = load_registry()
    spec = reg.task(CITY_COUNTRY_ID)
    entry = cycle.holdouts[CITY_COUNTRY_ID]
    assert set(entry["by_model"]) == set(spec.splits_by_model) >= {SMOL, "gemma-3-270m"}
    assert entry["by_model"][SMOL]["sha256"] != entry["by_model"]["gemma-3-270m"]["sha256"]
    h = cycle.holdout_for(CITY_COUNTRY_ID, SMOL)
    assert h is entry["by_model"][SMOL] and cycle.holdout_for(CITY_COUNTRY_ID, ENCODER) is None
    assert h["path"] == f"holdouts/2026Q4/{CITY_COUNTRY_ID}/{SMOL}.jsonl.sealed"
    data = holdout_read("2026Q4", CITY_COUNTRY_ID, SMOL, h["path"])
    assert hashlib.sha256(data).hexdigest() == h["sha256"]
    rows = [json.loads(line) for line in data.decode().splitlines()]
    assert len(rows) == h["rows"] == SIZE and sum(r["label"] for r in rows) == SIZE // 2
    splits = spec.splits_for(SMOL)
    assert h["pool_sha256"] == splits["holdout_pool"].sha256 and h["pool"] == "public"
    assert "on-policy" in h["note"] and "not caught" in h["note"]
    pool = {r["id"]: r for r in read_rows(reg.root / splits["holdout_pool"].path)}
    assert all(pool[r["id"]] == r for r in rows)  # the very rows of SmolLM2's own pool
    for name in ("train", "test", "distshift"):
        other = read_rows(reg.root / splits[name].path)
        assert not {r["id"] for r in other} & set(h["ids"])
        assert not {text_hash(r["text"]) for r in other} & {text_hash(r["text"]) for r in rows}
    # a text task keeps its one holdout for every model
    assert (
        cycle.holdout_for("halueval-qa-v1", SMOL) is cycle.holdout_for("halueval-qa-v1", ENCODER) is not None
    )


def test_a_probe_is_rerun_on_its_models_holdout_and_gets_a_holdout_auroc(board, maintainer, client):
    smol, encoder = board
    cycle = reevaluation_start(quarter="2026Q4", by=maintainer, dispatch=False)
    on_task = {(r.probe_version_id, r.base_model_id) for r in cycle.runs.filter(task_id=CITY_COUNTRY_ID)}
    assert on_task == {(smol.pk, SMOL)}  # the encoder is not rerun on the on-policy task
    assert cycle.runs.filter(probe_version=encoder, task_id="halueval-qa-v1").exists()

    finish_holdout_runs(cycle, {"smol-city": 0.8, "encoder-city": 0.7})
    cycle = cycle_advance(cycle_id=cycle.pk)
    [entry] = [e for e in cycle.diff["entries"] if e["probe"] == "smol-city"]
    assert entry["holdout_per_task"][CITY_COUNTRY_ID] == pytest.approx(0.8)
    assert entry["outcome"] == "held"
    [other] = [e for e in cycle.diff["entries"] if e["probe"] == "encoder-city"]
    assert CITY_COUNTRY_ID not in other["holdout_per_task"] and other["outcome"] == "held"
    public = cycle.diff["holdouts"][CITY_COUNTRY_ID]["by_model"][SMOL]
    h = cycle.holdout_for(CITY_COUNTRY_ID, SMOL)
    assert public == {
        "rows": SIZE,
        "sha256": h["sha256"],
        "reused_rows": 0,
        "pool": "public",
        "pool_sha256": h["pool_sha256"],
        "pool_rows": 100,
        "note": h["note"],
    }

    body = client.get("/api/v1/reevaluations/2026Q4").json()
    api_entry = body["holdouts"][CITY_COUNTRY_ID]["by_model"][SMOL]
    assert api_entry["rows"] == SIZE and "ids" not in api_entry  # holdout items stay unseen
    page = client.get("/reevaluations/2026Q4/").content.decode()
    assert f'{CITY_COUNTRY_ID}</a></th><td>{SMOL}</td><td class="num">{SIZE}</td>' in page


def test_the_next_quarter_avoids_the_models_earlier_holdout_and_the_command_names_the_model(
    board, maintainer
):
    first = reevaluation_start(quarter="2026Q3", by=maintainer, dispatch=False)
    finish_holdout_runs(first, {"smol-city": 0.8, "encoder-city": 0.7})
    cycle_advance(cycle_id=first.pk)
    out = StringIO()
    call_command("start_reevaluation", "2026Q4", stdout=out)
    nxt = m.ReevaluationCycle.objects.get(quarter="2026Q4")
    earlier, now = (set(c.holdout_for(CITY_COUNTRY_ID, SMOL)["ids"]) for c in (first, nxt))
    assert len(now) == SIZE and not earlier & now
    assert f"{CITY_COUNTRY_ID} on {SMOL}: {SIZE} rows, sha256" in out.getvalue()


def test_a_gemma_probe_is_rerun_on_gemmas_own_holdout(board, maintainer):
    gemma_id = "gemma-3-270m"
    tasks = list(m.Task.objects.filter(category_id="hallucination", status="active"))
    gemma = public_probe(
        slug="gemma-city", base_model=gemma_id, auroc=0.75, tasks=tasks, reference_auroc=0.75
    )
    cycle = reevaluation_start(quarter="2026Q4", by=maintainer, dispatch=False)
    reg = load_registry()
    own, smol = cycle.holdout_for(CITY_COUNTRY_ID, gemma_id), cycle.holdout_for(CITY_COUNTRY_ID, SMOL)
    pool = {
        r["id"]
        for r in read_rows(reg.root / reg.task(CITY_COUNTRY_ID).splits_for(gemma_id)["holdout_pool"].path)
    }
    assert (
        set(own["ids"]) <= pool
        and own["path"].endswith(f"/{gemma_id}.jsonl.sealed")
        and own["sha256"] != smol["sha256"]
    )
    [run] = cycle.runs.filter(probe_version=gemma, task_id=CITY_COUNTRY_ID)
    assert run.base_model_id == gemma_id
    finish_holdout_runs(cycle, {"smol-city": 0.8, "encoder-city": 0.7, "gemma-city": 0.75})
    assert m.EvaluationRun.objects.get(pk=run.pk).split_sha256 == own["sha256"]
    cycle = cycle_advance(cycle_id=cycle.pk)
    [entry] = [e for e in cycle.diff["entries"] if e["probe"] == "gemma-city"]
    assert entry["holdout_per_task"][CITY_COUNTRY_ID] == pytest.approx(0.75)
