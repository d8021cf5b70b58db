"""The metric reliability table on the methodology page (the committed registry/reliability.json),
and a metric it flags is not a sort order of the board (page and API: a 400 naming the field)."""

import html as htmllib

import pytest
from django.urls import reverse

from evaluator.commands.reliability import METRICS, read_record
from tests.leaderboard.board_data import ensure_models, ensure_tasks, public_probe


def test_the_methodology_page_shows_the_committed_reliability_table(client, registry):
    from django.conf import settings

    record = read_record(settings.REGISTRY_ROOT)
    assert record is not None
    page = htmllib.unescape(client.get(reverse("leaderboard:methodology")).content.decode())
    assert '<h2 id="reliability">Metric reliability</h2>' in page
    assert f"<code>{record['subject']['probe']}</code>" in page
    for metric in METRICS:
        assert f'id="reliability-{metric}"' in page
    sd = record["metrics"]["auroc"]["reseed_sd"]
    row = page[page.index('id="reliability-auroc"') :]
    assert f"{sd:.4f}" in row[: row.index("</tr>")]
    assert "must be ≥ 0.99" in page  # the oracle's expected region, in the cell's tooltip


@pytest.fixture
def flagged(monkeypatch):
    """A reliability table that flags lift over text (the committed one flags nothing)."""
    from leaderboard.selectors import reliability

    table = {"flagged": ["lift_over_text"], "metrics": {}, "subject": {}}
    monkeypatch.setattr(reliability, "reliability", lambda: table)
    return table


@pytest.fixture
def board(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 1)
    public_probe(slug="one", name="One Probe", auroc=0.9, tasks=tasks)
    public_probe(slug="two", name="Two Probe", auroc=0.8, tasks=tasks)


def test_a_flagged_metric_is_not_a_sort_order_of_the_api(client, board, flagged):
    response = client.get("/api/v1/leaderboard", {"category": "hallucination", "sort": "lift"})
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "sort"
    assert "the reliability diagnostics flag lift_over_text" in body["error"]
    assert "lift," not in body["error"].split("accepted:")[1] + ","
    assert (
        client.get("/api/v1/leaderboard", {"category": "hallucination", "sort": "controlled"}).status_code
        == 200
    )


def test_a_flagged_metric_is_not_a_sort_order_of_the_page(client, board, flagged):
    url = reverse("leaderboard:category", args=["hallucination"])
    response = client.get(url, {"sort": "lift"})
    assert response.status_code == 400
    assert "lift_over_text" in htmllib.unescape(response.content.decode())
    assert client.get(url, {"sort": "auroc"}).status_code == 200


def test_without_a_flag_every_sort_key_is_accepted(client, board):
    for key in ("lift", "controlled", "recall", "auroc_ds"):
        response = client.get("/api/v1/leaderboard", {"category": "hallucination", "sort": key})
        assert response.status_code == 200, (key, response.content)


def _cycle_table(flagged: list[str]) -> dict:
    from django.conf import settings

    record = read_record(settings.REGISTRY_ROOT)
    return record | {"quarter": "2027Q1", "command": "cycle 2027Q1", "flagged": flagged}


def test_the_newest_cycle_table_replaces_the_committed_one(client, registry, settings, tmp_path, board):
    import json

    from leaderboard.selectors.reliability import reliability_dir

    settings.DATA_DIR = tmp_path
    reliability_dir().mkdir(parents=True)
    (reliability_dir() / "2026Q4.json").write_text(json.dumps(_cycle_table([]) | {"quarter": "2026Q4"}))
    (reliability_dir() / "2027Q1.json").write_text(json.dumps(_cycle_table(["controlled_auroc"])))
    (reliability_dir() / "notes.json").write_text("{}")  # not a quarter: ignored
    page = htmllib.unescape(client.get(reverse("leaderboard:methodology")).content.decode())
    assert "Measured when the 2027Q1 re-evaluation cycle completed." in page
    section = page[page.index('<h2 id="reliability">') : page.index('<h2 id="imputation">')]
    assert "flagged now:" in section and "<code>controlled_auroc</code>" in section
    response = client.get("/api/v1/leaderboard", {"category": "hallucination", "sort": "controlled"})
    assert response.status_code == 400 and response.json()["field"] == "sort"
    # a damaged newest table: the committed one is shown
    (reliability_dir() / "2027Q1.json").write_text("{not json")
    (reliability_dir() / "2026Q4.json").unlink()
    page = htmllib.unescape(client.get(reverse("leaderboard:methodology")).content.decode())
    assert "(committed; each completed quarterly cycle measures it again)" in page


def test_a_completed_cycle_measures_the_table_again(settings, monkeypatch, registry):
    from leaderboard.services import reevaluation

    calls = []
    monkeypatch.setattr(reevaluation, "task_delay", lambda name, *args: calls.append((name, args)))
    settings.RELIABILITY_EACH_CYCLE = True
    reevaluation._cycle_followups("2027Q1", [])
    assert ("leaderboard.tasks.reliability_measure_task", ("2027Q1",)) in calls
    calls.clear()
    settings.RELIABILITY_EACH_CYCLE = False
    reevaluation._cycle_followups("2027Q1", [])
    assert all(name != "leaderboard.tasks.reliability_measure_task" for name, _ in calls)


@pytest.mark.model
def test_the_cycle_task_writes_the_table_the_page_shows(client, registry, settings, tmp_path):
    """The task a completed cycle publishes, run on the real registry and SmolLM2."""
    import json

    from leaderboard.selectors.reliability import reliability, reliability_dir
    from leaderboard.tasks import reliability_measure_task

    settings.DATA_DIR = tmp_path
    out = reliability_measure_task("2027Q1")
    written = json.loads((reliability_dir() / "2027Q1.json").read_text())
    assert out == {
        "quarter": "2027Q1",
        "flagged": written["flagged"],
        "path": str(reliability_dir() / "2027Q1.json"),
    }
    assert written["quarter"] == "2027Q1" and list(written["metrics"]) == list(METRICS)
    assert reliability()["quarter"] == "2027Q1"
    page = htmllib.unescape(client.get(reverse("leaderboard:methodology")).content.decode())
    assert "Measured when the 2027Q1 re-evaluation cycle completed." in page
