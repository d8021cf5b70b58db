"""The board in a real browser (headless Chromium): load, sort a column, open a probe page.

Screenshots are kept under test-artifacts/ (git-ignored) as evidence of what the pages look like.
"""

from pathlib import Path

import pytest

from tests.browser.conftest import needs_chromium
from tests.leaderboard.board_data import MODEL_B, ensure_models, ensure_tasks, public_probe

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
    tasks = ensure_tasks("hallucination", 2)
    public_probe(
        slug="strong",
        name="Strong Probe",
        auroc=0.93,
        auroc_ea=0.9,
        auroc_ds=0.85,
        rho_ce=0.7,
        tasks=tasks,
        reproduced=True,
        authors=["Ada Lovelace"],
        recipe={"method": "logistic_regression", "task": tasks[0].slug, "layer": 15, "seed": 0},
    )
    public_probe(slug="middle", name="Middle Probe", auroc=0.85, tasks=tasks, license="MIT")
    public_probe(slug="fast", name="Fast Probe", auroc=0.72, latency_ms=1.0, tasks=tasks, base_model=MODEL_B)


@pytest.fixture
def page(new_page):
    return new_page(viewport={"width": 1400, "height": 900})


def names_in_order(page) -> list[str]:
    return page.locator("table#board tbody th.probe > a").all_inner_texts()


def test_load_sort_and_open_a_probe(live_server, board, page):
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(f"{live_server.url}/category/hallucination/")
    assert page.title().startswith("Hallucination")
    assert names_in_order(page) == ["Strong Probe", "Middle Probe", "Fast Probe"]
    page.screenshot(path=str(ARTIFACTS / "board.png"), full_page=True)

    # sort by latency: a plain link, so it works without JavaScript too
    page.locator('thead a[data-sort="latency"]').click()
    page.wait_for_url("**sort=latency**")
    assert names_in_order(page)[0] == "Fast Probe"
    assert page.locator('th[aria-sort="descending"] a[data-sort="latency"]').count() == 1
    page.screenshot(path=str(ARTIFACTS / "board-sorted-by-latency.png"), full_page=True)

    # the filter form applies on change (progressive enhancement) and keeps the sort
    page.select_option("#f-license", "MIT")
    page.wait_for_url("**license=MIT**")
    assert names_in_order(page) == ["Middle Probe"]

    page.goto(f"{live_server.url}/category/hallucination/")
    page.get_by_role("link", name="Strong Probe").click()
    page.wait_for_url("**/probes/strong/")
    assert page.locator("h1").inner_text().startswith("Strong Probe")
    assert page.locator("svg.chart").count() == 2  # ROC curves and the reliability diagram
    assert page.get_by_text("logistic_regression").count() >= 1
    page.screenshot(path=str(ARTIFACTS / "probe.png"), full_page=True)
    assert (ARTIFACTS / "probe.png").stat().st_size > 10_000


def test_the_board_works_without_javascript(live_server, board, new_page):
    page = new_page(java_script_enabled=False)
    page.goto(f"{live_server.url}/category/hallucination/")
    page.select_option("#f-model", MODEL_B)
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(f"**model={MODEL_B}**")
    assert names_in_order(page) == ["Fast Probe"]


def test_the_board_fits_the_page_at_1400_px(live_server, board, page):
    """At 1400 px the board's table fits the page: the headers wrap instead of widening it, a
    probe's badges wrap under its name; should a board still be wider, it scrolls inside its own
    container, never the page."""
    from leaderboard.models import EvaluationRun, ProbeVersion

    strong = ProbeVersion.objects.get(probe__slug="strong")
    for kind in ("transfer", "reproduce", "steer", "stress"):  # a long "pending: ..." badge
        EvaluationRun.objects.create(
            probe_version=strong,
            kind=kind,
            task=strong.probe.category.tasks.first(),
            split="test",
            base_model_id=strong.probe.base_model_id,
        )
    page.goto(f"{live_server.url}/category/hallucination/")
    assert "pending: transfer pending" in page.locator("table#board tbody").inner_text()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1400
    table = page.locator("table#board")
    overflow, wrap = table.evaluate(
        "t => [getComputedStyle(t.parentElement).overflowX, t.parentElement.clientWidth]"
    )
    assert overflow == "auto"
    # the narrowest the table can be laid out, against the room the page gives it
    narrowest = table.evaluate(
        "t => { t.style.width = 'min-content'; const w = t.getBoundingClientRect().width;"
        " t.style.width = ''; return w; }"
    )
    assert narrowest <= wrap, (narrowest, wrap)
    assert table.evaluate("t => t.getBoundingClientRect().width") <= wrap
    # the scored components come first, heaviest first; AUROC-EA before every column not scored
    keys = page.locator("table#board thead th[data-col]").evaluate_all("ths => ths.map(th => th.dataset.col)")
    assert keys.index("auroc_ea") < keys.index("recall")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "board-fits.png"), full_page=True)
