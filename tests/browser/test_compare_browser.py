"""Comparing two probes in a real browser (headless Chromium): tick two rows on the board, open
the comparison, read ΔAUROC with its interval and DeLong's p per task, and the overlaid ROC curves.

Screenshots are kept under test-artifacts/ (git-ignored)."""

from pathlib import Path

import pytest

from tests.browser.conftest import needs_chromium
from tests.leaderboard.board_data import ensure_models, ensure_tasks
from tests.leaderboard.rank_data import twins_and_leader

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    needs_chromium,
]


@pytest.fixture
def board(registry):
    ensure_models()
    # scored as the pipeline scores them; each commit recomputes the board's rank intervals
    return twins_and_leader(ensure_tasks("hallucination", 2))


def test_pick_two_rows_and_compare_them(live_server, board, new_page):
    ARTIFACTS.mkdir(exist_ok=True)
    page = new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{live_server.url}/category/hallucination/")
    rows = page.locator("table#board tbody tr")
    assert rows.count() == 3
    # the rank intervals: the leader alone in [1, 1], the twins sharing places 2–3 and a tie group
    assert rows.nth(0).locator("td.rank .rank-ci").inner_text() == "1–1"
    assert rows.nth(1).locator("td.rank .rank-ci").inner_text() == "2–3"
    assert rows.nth(2).locator("td.rank .rank-ci").inner_text() == "2–3"
    assert "tg0" in rows.nth(1).get_attribute("class") and "tg0" in rows.nth(2).get_attribute("class")
    page.screenshot(path=str(ARTIFACTS / "board-rank-intervals.png"), full_page=True)

    page.get_by_label("pick Strong to compare").check()
    page.get_by_label("pick Twin-A to compare").check()
    page.get_by_role("button", name="Compare the two ticked probes").click()
    page.wait_for_url("**/compare/**")
    assert page.locator("h1").inner_text().startswith("Compare: Strong (A) vs Twin-A (B)")
    tasks = page.locator("table#compare-tasks tbody tr")
    assert tasks.count() == 2
    for i in range(2):
        cells = tasks.nth(i).locator("td").all_inner_texts()
        n_shared, auroc_a, auroc_b, delta, interval, p_value = cells
        assert n_shared == "160"
        assert float(delta) == pytest.approx(float(auroc_a) - float(auroc_b), abs=2e-3)
        lo, hi = (float(x) for x in interval.strip("[]").split(","))
        assert 0 < lo <= float(delta) <= hi  # the leader is clearly better on every task
        assert float(p_value) < 0.001
    charts = page.locator("svg.chart")
    assert charts.count() == 2  # one ROC chart per task, both probes overlaid
    assert charts.first.locator("polyline").count() == 2
    page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)

    # swap the two: the differences change sign
    page.get_by_role("link", name="swap A and B").click()
    page.wait_for_url("**a=twin-a**")
    first_delta = page.locator("table#compare-tasks tbody tr").first.locator("td.delta").inner_text()
    assert float(first_delta) < 0
