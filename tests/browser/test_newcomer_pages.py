"""The pages a newcomer opens first, in a real browser (headless Chromium): the home page, a
category board with its column tooltips, the methodology page, a probe page (chart legends inside
their figures), a styled 404 and the favicon; none logs a console error."""

from pathlib import Path

import pytest

from leaderboard.presentation import column_help
from tests.browser.conftest import needs_chromium
from tests.leaderboard.board_data import MODEL_B, ensure_models, ensure_tasks, public_probe

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"  # git-ignored screenshots

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    needs_chromium,
]


@pytest.fixture
def board(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 2)
    recipe = {"method": "logistic_regression", "task": tasks[0].slug, "layer": 15, "seed": 0}
    public_probe(slug="strong", name="Strong Probe", auroc=0.93, latency_ms=0.02, tasks=tasks, recipe=recipe)
    public_probe(slug="middle", name="Middle Probe", auroc=0.85, latency_ms=0.05, tasks=tasks, license="MIT")
    public_probe(slug="weak", name="Weak Probe", auroc=0.7, latency_ms=0.3, tasks=tasks, base_model=MODEL_B)


@pytest.fixture
def page(new_page):
    page = new_page(viewport={"width": 1400, "height": 900})
    page.problems = []
    page.on("console", lambda m: page.problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.problems.append(str(e)))
    return page


def test_a_newcomer_meets_explained_pages_without_errors(live_server, board, page):
    url = live_server.url
    response = page.goto(f"{url}/")
    assert response.status == 200 and page.title().startswith("ProbeBench")
    icon = page.locator('link[rel="icon"]').get_attribute("href")
    fetched = page.request.get(f"{url}{icon}")
    assert fetched.status == 200 and fetched.headers["content-type"].startswith("image/svg+xml")
    favicon = page.request.get(f"{url}/favicon.ico")  # follows the redirect
    assert favicon.status == 200 and b"<svg" in favicon.body()

    # a category board: every column header carries its explanation as a tooltip
    page.get_by_role("link", name="Hallucination").first.click()
    page.wait_for_url("**/category/hallucination/")
    headers = page.locator("table#board thead th[data-col]")
    keys = headers.evaluate_all("ths => ths.map(th => th.dataset.col)")
    assert {"rank", "score", "auroc", "latency", "recall", "lift", "utility"} <= set(keys)
    for key in keys:
        title = page.locator(f'table#board thead th[data-col="{key}"]').get_attribute("title")
        assert title.startswith(column_help(key)["label"] + ":"), key
    # every latency is under 1 ms: the column is muted and says so, once, under the table
    assert "flat" in page.locator('th[data-col="latency"]').get_attribute("class")
    assert page.locator('p.flat-column[data-col="latency"]').is_visible()
    muted = page.locator("td.flat").first.evaluate("td => getComputedStyle(td).color")
    plain = page.locator("td.total").first.evaluate("td => getComputedStyle(td).color")
    assert muted != plain
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "board-columns.png"), full_page=True)

    # the board's legend links to the methodology's column table
    page.get_by_role("link", name="methodology page").click()
    page.wait_for_url("**/methodology/#columns")
    for key in keys:
        assert page.locator(f"tr#col-{key}").count() == 1, key
    assert page.locator("tr#col-latency").inner_text().count("1.000") >= 1

    # a probe page: its charts' legends lie inside their figures (the browser's own layout)
    page.goto(f"{url}/probes/strong/")
    charts = page.locator("svg.chart")
    assert charts.count() >= 2
    outside = charts.evaluate_all(
        """svgs => svgs.flatMap(svg => {
            const vb = svg.viewBox.baseVal;
            return [...svg.querySelectorAll('text.legend')].map(t => t.getBBox()).filter(b =>
                b.x < vb.x || b.y < vb.y || b.x + b.width > vb.x + vb.width || b.y + b.height > vb.y + vb.height
            ).map(b => [b.x, b.y, b.width, b.height]);
        })"""
    )
    assert outside == []
    page.screenshot(path=str(ARTIFACTS / "probe-charts.png"), full_page=True)

    assert page.problems == []  # no console error on the home page, a board, the methodology, a probe

    # a page that does not exist: the site's own 404, styled
    response = page.goto(f"{url}/no-such-page/")
    assert response.status == 404
    assert page.locator("h1").inner_text() == "Page not found"
    assert page.locator("header.site nav").is_visible()
    background = page.locator("header.site").evaluate("h => getComputedStyle(h).backgroundColor")
    assert background == "rgb(16, 36, 58)"  # board.css loaded
    page.screenshot(path=str(ARTIFACTS / "not-found.png"))

    # the 404 itself is a console error in Chromium ("Failed to load resource"); nothing else is
    refused = "Failed to load resource: the server responded with a status of 404"
    assert [p for p in page.problems if not p.startswith(refused)] == []
