"""Starting a cycle: staff only, one per quarter (API 409, command error, admin message), every
split file re-hashed against tasks.yaml first (a tampered file stops the cycle before any run,
naming the file and both hashes), holdouts drawn from their sealed pools with a secret seed
(deterministic given it), disjoint and recorded."""

from __future__ import annotations

import hashlib
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from evaluator.data.holdouts import mint_holdout, read_rows
from evaluator.data.pools import sealed_pool_load
from evaluator.data.registry.load import load_registry
from evaluator.data.texts import text_hash
from evaluator.errors import EvaluatorError
from leaderboard.errors import Conflict, ServiceError
from leaderboard.models import CycleResult, EvaluationRun, ReevaluationCycle
from leaderboard.sealed import holdout_read, sealing_key
from leaderboard.services.reevaluation import reevaluation_start
from leaderboard.services.tokens import api_token_create
from tests.leaderboard.reevaluation_data import (
    HOLDOUT_SIZE,
    TRUTH_TASK,
    run_cycle,
    scored,
)

pytestmark = pytest.mark.django_db
URL = "/api/v1/maintainer/reevaluations"


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client


@pytest.fixture
def board(small_registry):
    return [scored("first"), scored("second")]


# --------------------------------------------------------------------------- who, and how often


def test_staff_start_a_cycle_through_the_api(board, maintainer):
    response = api(maintainer).post(URL, {"quarter": "2026Q4"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json() == {
        "quarter": "2026Q4",
        "status": "running",
        "runs": 2,
        "url": "/api/v1/reevaluations/2026Q4",
    }
    cycle = ReevaluationCycle.objects.get(quarter="2026Q4")
    assert cycle.triggered_by == maintainer
    assert set(cycle.holdouts) == {TRUTH_TASK, "benchmark-vs-user-v1"}


def test_non_staff_get_403_and_anonymous_401(board, researcher):
    assert api(researcher).post(URL, {"quarter": "2026Q4"}, format="json").status_code == 403
    assert api().post(URL, {"quarter": "2026Q4"}, format="json").status_code == 401
    assert not ReevaluationCycle.objects.exists()


def test_a_malformed_quarter_is_400(board, maintainer):
    response = api(maintainer).post(URL, {"quarter": "2026-Q4"}, format="json")
    assert response.status_code == 400
    with pytest.raises(ServiceError, match="must look like 2026Q4"):
        reevaluation_start(quarter="26Q4", by=maintainer)


def test_a_second_cycle_for_the_same_quarter_is_refused_everywhere(board, maintainer, client):
    reevaluation_start(quarter="2026Q4", by=maintainer, dispatch=False)

    with pytest.raises(Conflict, match="already exists"):
        reevaluation_start(quarter="2026Q4", by=maintainer, dispatch=False)
    response = api(maintainer).post(URL, {"quarter": "2026Q4"}, format="json")
    assert response.status_code == 409
    assert "one per quarter" in response.json()["error"]
    with pytest.raises(CommandError, match="already exists"):
        call_command("start_reevaluation", "2026Q4", stdout=StringIO())
    client.force_login(maintainer)
    page = client.post("/admin/leaderboard/reevaluationcycle/add/", {"quarter": "2026Q4"}, follow=True)
    assert "already exists" in page.content.decode()
    assert ReevaluationCycle.objects.filter(quarter="2026Q4").count() == 1
    assert EvaluationRun.objects.count() == 2  # nothing planned twice


def test_the_command_starts_a_cycle_as_a_staff_user(board, maintainer, researcher):
    out = StringIO()
    call_command("start_reevaluation", "2026Q4", "--as", maintainer.username, stdout=out)
    assert "cycle 2026Q4 started by grace: 2 holdout(s) minted, 2 run(s) queued" in out.getvalue()
    assert f"{TRUTH_TASK}: {HOLDOUT_SIZE} rows, sha256" in out.getvalue()
    with pytest.raises(CommandError, match="staff user"):
        call_command("start_reevaluation", "2027Q1", "--as", researcher.username, stdout=StringIO())


def test_the_admin_starts_a_cycle_and_shows_its_progress(board, maintainer, researcher, client):
    client.force_login(researcher)
    assert client.get("/admin/leaderboard/reevaluationcycle/add/").status_code == 302  # not staff: to login
    client.force_login(maintainer)
    form = client.get("/admin/leaderboard/reevaluationcycle/add/")
    assert form.status_code == 200 and "Start the cycle" in form.content.decode()
    page = client.post("/admin/leaderboard/reevaluationcycle/add/", {"quarter": "2026Q4"}, follow=True)
    html = page.content.decode()
    assert "Cycle 2026Q4 started: 2 holdout(s) minted, 2 run(s) queued" in html  # (capitalised by the admin)
    assert "0/2" in html  # runs done on the cycle's admin page
    assert "0/2" in client.get("/admin/leaderboard/reevaluationcycle/").content.decode()


def test_cycles_run_one_at_a_time_and_in_quarter_order(board, maintainer):
    reevaluation_start(quarter="2026Q3", by=maintainer, dispatch=False)
    with pytest.raises(Conflict, match="2026Q3 is still running"):
        reevaluation_start(quarter="2026Q4", by=maintainer, dispatch=False)
    ReevaluationCycle.objects.filter(quarter="2026Q3").update(status="completed")
    with pytest.raises(Conflict, match="in order"):
        reevaluation_start(quarter="2026Q2", by=maintainer, dispatch=False)


# --------------------------------------------------------------------------- split hashes


def test_a_tampered_split_file_stops_the_cycle_before_any_run(
    board, maintainer, small_registry, client, settings
):
    spec = load_registry(small_registry).task(TRUTH_TASK).splits["test"]
    path = small_registry / spec.path
    original = path.read_bytes()
    path.write_bytes(original.replace(b"The city of", b"The town of", 1))
    tampered = hashlib.sha256(path.read_bytes()).hexdigest()

    response = api(maintainer).post(URL, {"quarter": "2026Q4"}, format="json")
    assert response.status_code == 400
    message = response.json()["error"]
    assert message.startswith("cycle 2026Q4 stopped before any run")
    assert spec.path in message and spec.sha256 in message and tampered in message
    cycle = ReevaluationCycle.objects.get(quarter="2026Q4")
    assert cycle.status == ReevaluationCycle.Status.FAILED and spec.path in cycle.error
    assert not EvaluationRun.objects.exists() and not CycleResult.objects.exists()
    assert cycle.holdouts == {} and not (settings.DATA_DIR / "holdouts").exists()
    # the stop is public, with the reason
    assert tampered in client.get("/api/v1/reevaluations/2026Q4").json()["error"]
    assert "The cycle stopped" in client.get("/reevaluations/2026Q4/").content.decode()

    path.write_bytes(original)  # fixed: the quarter may be started again
    cycle = reevaluation_start(quarter="2026Q4", by=maintainer, dispatch=False)
    assert cycle.status == ReevaluationCycle.Status.RUNNING and cycle.error == ""
    assert cycle.runs.count() == 2


def test_a_tampered_file_started_from_the_admin_stays_recorded(board, maintainer, small_registry, client):
    spec = load_registry(small_registry).task(TRUTH_TASK).splits["holdout_pool"]
    (small_registry / spec.path).write_bytes(b"{}\n")
    client.force_login(maintainer)
    page = client.post("/admin/leaderboard/reevaluationcycle/add/", {"quarter": "2026Q4"}, follow=True)
    assert "stopped before any run" in page.content.decode() and spec.path in page.content.decode()
    assert ReevaluationCycle.objects.get(quarter="2026Q4").status == ReevaluationCycle.Status.FAILED


def test_a_database_out_of_sync_with_tasks_yaml_stops_the_cycle(board, maintainer):
    from leaderboard.models import TaskSplit

    TaskSplit.objects.filter(task_id=TRUTH_TASK, name="test").update(sha256="0" * 64)
    with pytest.raises(ServiceError, match="sync_registry"):
        reevaluation_start(quarter="2026Q4", by=maintainer, dispatch=False)
    assert not EvaluationRun.objects.exists()


# --------------------------------------------------------------------------- holdouts


SECRET, OTHER_SECRET = b"s" * 32, b"t" * 32


def test_holdouts_are_deterministic_given_the_secret(small_registry):
    reg = load_registry(small_registry)
    pool = read_rows(small_registry / reg.task(TRUTH_TASK).splits["holdout_pool"].path)

    def draw(**kw):
        return mint_holdout(
            **{"task_id": TRUTH_TASK, "quarter": "2026Q4", "pool": pool, "secret": SECRET} | kw
        )

    a, b = draw(size=HOLDOUT_SIZE), draw(pool=list(reversed(pool)), size=HOLDOUT_SIZE)
    assert a.to_bytes() == b.to_bytes() and a.sha256 == b.sha256
    assert sum(r["label"] for r in a.rows) == HOLDOUT_SIZE // 2  # label-balanced
    assert draw(secret=OTHER_SECRET, size=HOLDOUT_SIZE).sha256 != a.sha256  # seeded by the secret
    assert draw(quarter="2027Q1", size=HOLDOUT_SIZE).sha256 == a.sha256  # not by the quarter any more
    assert draw(task_id="cities-truth-v2", size=HOLDOUT_SIZE).sha256 != a.sha256  # and by the task id
    assert draw(model="gemma-3-270m", size=HOLDOUT_SIZE).sha256 != a.sha256  # and by the base model
    with pytest.raises(EvaluatorError, match="secret of at least 16 bytes"):
        draw(secret=b"short", size=HOLDOUT_SIZE)


def test_paired_rows_are_taken_together():
    pool = [
        {"id": f"r{i}{side}", "group": f"g{i}", "label": int(side == "a"), "text": f"item {i} {side}"}
        for i in range(20)
        for side in "ab"
    ]
    h = mint_holdout(task_id="pairs-v1", quarter="2026Q4", pool=pool, secret=SECRET, size=10)
    groups = {r["group"] for r in h.rows}
    assert len(h.rows) == 10 and len(groups) == 5
    assert all(sum(r["group"] == g for r in h.rows) == 2 for g in groups)


def test_holdouts_never_overlap_earlier_quarters_while_the_pool_allows(
    board, maintainer, small_registry, settings
):
    quarters = ("2026Q1", "2026Q2", "2026Q3")  # 3 × 16 rows from a sealed pool of 200
    cycles = [run_cycle(q, maintainer, {"first": 0.9, "second": 0.9}) for q in quarters]
    for task in (TRUTH_TASK, "benchmark-vs-user-v1"):
        ids = [set(c.holdouts[task]["ids"]) for c in cycles]
        assert all(len(s) >= HOLDOUT_SIZE - 1 for s in ids)
        assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
        assert all(c.holdouts[task]["reused_rows"] == 0 for c in cycles)
        # the rows avoided are recorded for the verifier: the earlier quarters' rows of this pool
        assert set(cycles[2].holdouts[task]["avoided_ids"]) == ids[0] | ids[1]
        assert cycles[2].diff["holdouts"][task]["reused_rows"] == 0


def test_a_spent_pool_reuses_rows_and_says_so():
    pool = [{"id": f"r{i}", "group": f"g{i}", "label": i % 2, "text": f"item {i}"} for i in range(20)]
    used = {f"r{i}" for i in range(16)}  # earlier quarters took 16 of the 20 rows
    h = mint_holdout(task_id="x-v1", quarter="2026Q4", pool=pool, secret=SECRET, used_ids=used, size=8)
    assert len(h.rows) == 8 and h.reused_rows == 4
    assert {f"r{i}" for i in range(16, 20)} <= set(h.ids)  # the unused rows come first


def test_holdouts_are_disjoint_from_train_test_and_distshift_and_hashed(
    board, maintainer, small_registry, settings
):
    cycle = reevaluation_start(quarter="2026Q4", by=maintainer, dispatch=False)
    reg = load_registry(small_registry)
    for task_id, h in cycle.holdouts.items():
        assert h["path"] == f"holdouts/2026Q4/{task_id}.jsonl.sealed"
        data = holdout_read("2026Q4", task_id, "", h["path"])  # sealed at rest
        assert hashlib.sha256(data).hexdigest() == h["sha256"]
        assert b"label" not in (settings.DATA_DIR / h["path"]).read_bytes()
        rows = [json.loads(line) for line in data.decode().splitlines()]
        assert [r["id"] for r in rows] == h["ids"] and len(rows) == h["rows"] == HOLDOUT_SIZE
        assert h["pool"] == "sealed" and h["pool_rows"] == 200 and h["note"] == ""
        sealed = sealed_pool_load(
            reg, task_id, data_dir=settings.DATA_DIR, key=sealing_key(), sources_dir=settings.DATA_DIR
        )
        assert sealed is not None and set(h["ids"]) <= {r["id"] for r in sealed}
        spec = reg.task(task_id)
        for split in ("train", "test", "distshift", "holdout_pool"):
            other = read_rows(small_registry / spec.splits[split].path)
            assert not {r["id"] for r in other} & set(h["ids"])
            assert not {text_hash(r["text"]) for r in other} & {text_hash(r["text"]) for r in rows}


def test_a_pool_row_that_repeats_a_test_text_is_never_drawn():
    test_text = "The city of Paris is in France."
    pool = [{"id": f"p{i}", "group": f"g{i}", "label": i % 2, "text": f"item {i}"} for i in range(8)]
    pool.append({"id": "dup", "group": "gdup", "label": 1, "text": "the city of  PARIS is in france"})
    h = mint_holdout(
        task_id="x-v1",
        quarter="2026Q4",
        pool=pool,
        secret=SECRET,
        size=20,
        forbidden_texts={text_hash(test_text)},
    )
    assert "dup" not in h.ids and len(h.rows) == 8
