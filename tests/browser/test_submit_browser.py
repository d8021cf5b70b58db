"""The web form in a real browser: a researcher signs in, uploads a real SmolLM2 probe, and the
submission page follows it live until a real worker process has scored it. A bad field comes
back with its message next to the field."""

import json
from pathlib import Path

import pytest

from leaderboard.models import Score, Submission
from tests.browser.conftest import needs_chromium

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
PASSWORD = "correct horse battery staple"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.model,
    pytest.mark.django_db(transaction=True),
    needs_chromium,
]


@pytest.fixture
def browser_page(new_page):
    return new_page(viewport={"width": 1300, "height": 1000})


def log_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/?next=/submit/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/submit/")


def fill_form(page, probe_dir: Path, **overrides) -> None:
    meta = json.loads((probe_dir / "probe.json").read_text())
    values = {"name": "Capitals truth probe (web)", "layer": str(meta["layer"])} | overrides
    page.set_input_files("#id_artifact", str(probe_dir / "probe.safetensors"))
    page.fill("#id_name", values["name"])
    page.select_option("#id_category", meta["category"])
    page.select_option("#id_base_model", meta["base_model"])
    page.fill("#id_layer", values["layer"])
    page.select_option("#id_position", meta["position"])
    page.select_option("#id_input", meta["input"])
    page.select_option("#id_output", meta["output"])
    page.select_option("#id_license", "MIT")
    page.fill("#id_authors", "Ada Lovelace")
    page.fill("#id_recipe", json.dumps(meta["recipe"]))


def test_a_web_submission_is_followed_live_until_scored(
    live_server, mini, trained, start_worker, browser_page
):
    from tests.factories import UserFactory

    UserFactory(username="ada", password=PASSWORD)
    worker = start_worker("web")
    page = browser_page
    ARTIFACTS.mkdir(exist_ok=True)
    log_in(page, live_server.url, "ada")

    # a layer out of range comes back next to the field, nothing is created
    fill_form(page, trained["truth"], layer="99")
    page.get_by_role("button", name="Submit for evaluation").click()
    assert "out of range" in page.locator("#error-layer").inner_text()
    assert Submission.objects.count() == 0
    page.screenshot(path=str(ARTIFACTS / "submit-error.png"), full_page=True)

    fill_form(page, trained["truth"])
    page.get_by_role("button", name="Submit for evaluation").click()
    page.wait_for_url("**/my/submissions/*/")
    sub = Submission.objects.get()
    assert sub.via == "web"
    # the page polls its status fragment: wait for the browser to show "scored"
    page.wait_for_selector('#submission-status[data-status="scored"]', timeout=600_000)
    page.screenshot(path=str(ARTIFACTS / "submission-scored.png"), full_page=True)
    assert worker.proc.poll() is None
    sub.refresh_from_db()
    assert sub.status == "scored", sub.failure_reason
    total = Score.objects.get(probe_version=sub.probe_version, spec_id="v0.0.1").total
    assert f"{total:.4f}" in page.locator("#submission-status").inner_text()
