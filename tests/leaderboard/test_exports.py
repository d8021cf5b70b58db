"""The quarterly per-example export: every public entry's per-row scores on the public splits in one
gzipped JSON-lines file, written when a cycle completes, listed, downloadable and linked."""

from __future__ import annotations

import gzip
import hashlib
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from leaderboard import models as m
from leaderboard.selectors.exports import COLUMNS, examples_export_path, examples_exports_list
from leaderboard.services.exports import examples_export_write
from tests.leaderboard.board_data import ensure_models, ensure_tasks
from tests.leaderboard.rank_data import twins_and_leader
from tests.leaderboard.reevaluation_data import run_cycle, scored

pytestmark = pytest.mark.django_db


@pytest.fixture
def board(registry, settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    ensure_models()
    return twins_and_leader(ensure_tasks("hallucination", 2))


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def test_the_export_holds_every_public_row_and_its_manifest_says_what_it_is(board):
    hidden = m.Submission.objects.filter(probe_version=board["twin-b"])
    hidden.update(status=m.Submission.Status.QUEUED)  # not public: not exported
    manifest = examples_export_write("2026Q4")
    path = examples_export_path("2026Q4")
    rows = _lines(path)
    runs = m.EvaluationRun.objects.filter(
        probe_version__in=[board["strong"], board["twin-a"]],
        kind="score",
        split__in=["train", "test", "distshift"],
    )
    assert len(rows) == sum(len(r.example_scores) for r in runs) == manifest["rows"] > 0
    assert {r["probe"] for r in rows} == {"strong", "twin-a"} and manifest["entries"] == 2
    assert set(rows[0]) == set(COLUMNS) and {r["split"] for r in rows} == {"train", "test", "distshift"}
    run = runs.filter(probe_version=board["strong"], split="test").first()
    first = run.example_scores[0]
    assert {"id": first["id"], "label": first["label"], "score": first["score"]}.items() <= next(
        r for r in rows if r["probe"] == "strong" and r["task"] == run.task_id and r["split"] == "test"
    ).items()
    assert manifest["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert examples_exports_list() == [manifest]
    again = examples_export_write("2026Q4")  # same rows, same bytes
    assert again["sha256"] == manifest["sha256"] and len(list(path.parent.iterdir())) == 2


def test_it_is_downloadable_listed_and_linked_from_the_board(board, client):
    examples_export_write("2026Q4")
    response = client.get("/exports/2026Q4/examples.jsonl.gz")
    assert response.status_code == 200 and response["Content-Type"] == "application/gzip"
    assert "probebench-examples-2026Q4.jsonl.gz" in response["Content-Disposition"]
    assert gzip.decompress(b"".join(response.streaming_content)).count(b"\n") > 0
    assert client.get("/exports/2026Q3/examples.jsonl.gz").status_code == 404
    assert client.get("/exports/..%2F..%2Fetc/examples.jsonl.gz").status_code == 404
    assert client.get("/exports/20X6Q9/examples.jsonl.gz").status_code == 404
    [listed] = client.get("/api/v1/exports").json()
    assert listed["quarter"] == "2026Q4" and listed["url"] == "/exports/2026Q4/examples.jsonl.gz"
    assert "/exports/2026Q4/examples.jsonl.gz" in client.get("/category/hallucination/").content.decode()
    assert 'id="examples-exports"' in client.get("/reevaluations/").content.decode()


def test_a_damaged_manifest_is_not_listed(board):
    examples_export_write("2026Q4")
    (examples_export_path("2026Q4").parent / "manifest.json").write_text("{not json")
    assert examples_exports_list() == []


def test_the_command_writes_it_and_names_a_bad_quarter(board):
    out = StringIO()
    call_command("export_examples", "--quarter", "2026Q4", stdout=out)
    assert "2026Q4:" in out.getvalue() and examples_export_path("2026Q4").is_file()
    with pytest.raises(CommandError, match="must look like 2026Q4"):
        call_command("export_examples", "--quarter", "../x", stdout=StringIO())


def test_a_completed_cycle_writes_its_quarters_export(
    small_registry, maintainer, django_capture_on_commit_callbacks
):
    for slug in ("holds", "falls"):
        scored(slug, reference_auroc=0.90)
    with django_capture_on_commit_callbacks(execute=True):
        run_cycle("2026Q3", maintainer, {"holds": 0.86, "falls": 0.78})
    assert [e["quarter"] for e in examples_exports_list()] == ["2026Q3"]
