"""The metric reliability table on the methodology page (the committed registry/reliability.json),
and a metric it flags is not a sort order of the board (page and API: a 400 naming the field)."""

import html as htmllib

import pytest
from django.urls import reverse

from evaluator.reliability import METRICS, read_record
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
