"""The in-domain and cross-domain means on the board, the API, the CSV, the probe and compare pages,
and a rescore filling them on a Score stored before they existed."""

from __future__ import annotations

import csv
import io
from io import StringIO

import pytest
from django.core.management import call_command

from evaluator.metrics.in_domain import IN_DOMAIN_TASKS_KEY, split_keys
from leaderboard import models as m
from leaderboard.registry_sync import registry_sync
from leaderboard.services.scores import submission_score
from tests.leaderboard.board_data import ensure_models, ensure_tasks, public_probe
from tests.leaderboard.test_onpolicy_tasks import SMOL, _finish, _queued

pytestmark = pytest.mark.django_db
OWN, OTHER = "cities-truth-v1", "halueval-qa-v1"
RECIPE = {"method": "logistic_regression", "task": OWN, "layer": 15, "position": "last_token"}


def _split(auroc_in, auroc_cross, lift_in, lift_cross) -> dict:
    return {
        "auroc_in_domain": auroc_in,
        "auroc_in_domain_ci": [auroc_in - 0.05, auroc_in + 0.05],
        "auroc_cross_domain": auroc_cross,
        "auroc_cross_domain_ci": [auroc_cross - 0.1, auroc_cross + 0.1],
        "lift_over_text_in_domain": lift_in,
        "lift_over_text_in_domain_ci": [lift_in - 0.02, lift_in + 0.02],
        "lift_over_text_cross_domain": lift_cross,
        "lift_over_text_cross_domain_ci": [lift_cross - 0.03, lift_cross + 0.03],
        IN_DOMAIN_TASKS_KEY: ["board-hallucination-0-v1"],
    }


@pytest.fixture
def board(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 2)
    public_probe(slug="narrow", auroc=0.70, tasks=tasks, extra_measurements=_split(0.95, 0.45, 0.2, -0.3))
    public_probe(slug="broad", auroc=0.75, tasks=tasks, extra_measurements=_split(0.80, 0.70, 0.1, -0.05))
    public_probe(slug="old", auroc=0.90, tasks=tasks)  # stored before the split


def test_the_api_gives_both_sides_with_their_intervals_and_sorts_by_each(client, board):
    rows = client.get("/api/v1/leaderboard", {"sort": "auroc_cross", "limit": 100}).json()["results"]
    assert [(r["probe"], r["auroc_cross_domain"]) for r in rows] == [
        ("broad", 0.70),
        ("narrow", 0.45),
        ("old", None),
    ]
    narrow = rows[1]
    assert narrow["auroc_in_domain"] == 0.95 and narrow["auroc_in_domain_ci"] == pytest.approx([0.90, 1.00])
    assert narrow["lift_over_text_cross_domain_ci"] == pytest.approx([-0.33, -0.27])
    assert rows[2]["lift_over_text_in_domain"] is None and rows[2]["lift_over_text_in_domain_ci"] is None
    by_in = client.get("/api/v1/leaderboard", {"sort": "lift", "limit": 100}).json()["results"]
    assert [r["probe"] for r in by_in] == ["narrow", "broad", "old"]  # the lift column is in-domain
    schema = client.get("/api/schema/").content.decode()
    assert "lift_over_text_cross_domain" in schema and "frozen" in schema


def test_the_csv_and_the_board_page_lead_with_the_in_domain_columns(client, board):
    exported = list(
        csv.DictReader(
            io.StringIO(client.get("/api/v1/leaderboard.csv", {"sort": "lift_cross"}).content.decode())
        )
    )
    assert [r["probe"] for r in exported] == ["broad", "narrow", "old"]
    assert exported[0]["lift_over_text_cross_domain_ci_lo"] == "-0.08"
    assert exported[2]["auroc_in_domain"] == ""
    page = client.get("/category/hallucination/", {"sort": "controlled_cross"}).content.decode()
    head = page[: page.index("</thead>")].replace("<wbr>", "")  # the header's line-break hints
    keys = ("auroc_in", "auroc_cross", "lift", "lift_cross", "controlled", "controlled_cross")
    positions = [head.index(f'data-col="{key}"') for key in keys]
    assert positions == sorted(positions)  # each in-domain column before its cross-domain one
    assert "Lift/text in" in head and "Lift/text cross" in head
    assert "not split: the probe declares no training task" in page  # the old Score's cells


def test_the_compare_page_shows_both_sides(client, board):
    page = client.get("/compare/", {"a": "narrow", "b": "broad"}).content.decode()
    assert "AUROC in-domain" in page and "Lift over text cross-domain" in page
    assert "0.950" in page and "0.450" in page


def _scored_with_recipe(slug: str, **kwargs) -> m.ProbeVersion:
    version = _queued(slug, SMOL, **kwargs)
    runs = _finish(version, {OWN: 0.92, OTHER: 0.55})
    submission_score(submission=version.submission, runs=runs)
    m.Submission.objects.filter(pk=version.submission.pk).update(status=m.Submission.Status.SCORED)
    return version


def _as_before_the_split(version: m.ProbeVersion) -> None:
    for score in m.Score.objects.filter(probe_version=version):
        measurements = {
            k: v for k, v in score.measurements.items() if k not in (*split_keys(), IN_DOMAIN_TASKS_KEY)
        }
        per_task = {t: {k: v for k, v in r.items() if k != "in_domain"} for t, r in score.per_task.items()}
        m.Score.objects.filter(pk=score.pk).update(measurements=measurements, per_task=per_task)


def test_a_score_stored_before_the_split_reads_as_not_computed_and_a_rescore_fills_it(client):
    registry_sync()
    version = _scored_with_recipe("own-task", recipe=RECIPE)
    score = m.Score.objects.filter(probe_version=version).first()
    per_task = score.per_task
    assert per_task[OWN]["in_domain"] is True and per_task[OTHER]["in_domain"] is False
    own, other = per_task[OWN]["auroc"], per_task[OTHER]["auroc"]
    assert score.measurements["auroc_in_domain"] == pytest.approx(own)
    assert score.measurements["auroc_cross_domain"] == pytest.approx(other)
    assert score.measurements["auroc"] == pytest.approx((own + other) / 2)  # the ProbeScore's: both
    total = score.total

    _as_before_the_split(version)
    page = client.get("/probes/own-task/")
    assert page.status_code == 200 and 'id="domains-not-computed"' in page.content.decode()
    api = client.get("/api/v1/probes/own-task").json()
    assert {t["task"]: t["in_domain"] for t in api["tasks"]} == {OWN: None, OTHER: None}
    board = client.get("/api/v1/leaderboard", {"category": "hallucination"}).json()["results"]
    assert board[0]["auroc_in_domain"] is None

    call_command("rescore", "--category", "hallucination", stdout=StringIO())
    after = m.Score.objects.filter(probe_version=version, spec_id=score.spec_id).latest("computed_at")
    assert after.measurements["auroc_in_domain"] == pytest.approx(own)
    assert (
        after.measurements["auroc_cross_domain_ci"][0]
        < other
        < after.measurements["auroc_cross_domain_ci"][1]
    )
    assert after.measurements[IN_DOMAIN_TASKS_KEY] == [OWN] and after.total == pytest.approx(total)
    page = client.get("/probes/own-task/").content.decode()
    assert 'id="h-domains"' in page and "domains-not-computed" not in page and "in-domain</small>" in page
    api = client.get("/api/v1/probes/own-task").json()
    assert {t["task"]: t["in_domain"] for t in api["tasks"]} == {OWN: True, OTHER: False}


def test_a_version_that_declares_nothing_is_not_split(client):
    registry_sync()
    version = _scored_with_recipe("undeclared")  # no recipe, no trained_on: stored before it was asked
    score = m.Score.objects.filter(probe_version=version).first()
    assert score.measurements[IN_DOMAIN_TASKS_KEY] is None
    assert all(score.measurements[k] is None for k in split_keys())
    assert {r["in_domain"] for r in score.per_task.values()} == {None}
    assert 'id="domains-not-declared"' in client.get("/probes/undeclared/").content.decode()


def test_a_declared_trained_on_splits_a_probe_without_a_recipe(client):
    registry_sync()
    version = _scored_with_recipe("declared", metadata={"trained_on": [OTHER]})
    score = m.Score.objects.filter(probe_version=version).first()
    assert score.measurements[IN_DOMAIN_TASKS_KEY] == [OTHER]
    assert score.measurements["auroc_in_domain"] == pytest.approx(score.per_task[OTHER]["auroc"])
    assert score.measurements["auroc_cross_domain"] == pytest.approx(score.per_task[OWN]["auroc"])
