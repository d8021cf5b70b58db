"""Under the site's Content-Security-Policy, in a real browser (headless Chromium): the board, a
probe page, a submission page (its live-status script) and the API docs page (Redoc, served from
this site) work and the browser reports no CSP violation."""

import pytest

from tests.browser.conftest import needs_chromium, new_page  # noqa: F401 - the fixture
from tests.factories import SubmissionFactory
from tests.leaderboard.board_data import ensure_models, ensure_tasks, public_probe

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]


@pytest.fixture
def watched(new_page):  # noqa: F811
    """A page and the CSP violations its documents report."""
    page = new_page(viewport={"width": 1300, "height": 900})
    violations: list[str] = []
    page.on(
        "console",
        lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation',"
        " e => console.error('Content Security Policy violation: ' + e.violatedDirective + ' ' + e.blockedURI));"
    )
    return page, violations


def test_the_board_and_a_probe_page_run_under_the_policy(live_server, registry, watched):
    ensure_models()
    tasks = ensure_tasks("hallucination", 1)
    public_probe(slug="strong", name="Strong Probe", auroc=0.93, tasks=tasks)
    page, violations = watched
    page.goto(f"{live_server.url}/category/hallucination/")
    page.locator("table#board").wait_for()
    page.goto(f"{live_server.url}/probes/strong/")
    page.get_by_text("Strong Probe").first.wait_for()
    assert violations == []


def test_the_submission_page_polls_its_status_under_the_policy(live_server, registry, researcher, watched):
    sub = SubmissionFactory(submitter=researcher, probe_version__probe__owner=researcher)
    page, violations = watched
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "correct horse battery staple")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    with page.expect_response(lambda r: r.url.endswith(f"/my/submissions/{sub.pk}/status/"), timeout=15000):
        page.goto(f"{live_server.url}/my/submissions/{sub.pk}/")
    assert violations == []


def test_the_api_docs_render_from_this_site_under_the_policy(live_server, watched):
    page, violations = watched
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(live_server.url) else None)
    page.goto(f"{live_server.url}/api/docs/")
    page.get_by_text("ProbeBench API").first.wait_for(timeout=30000)
    page.get_by_text("/api/v1/leaderboard").first.wait_for(timeout=30000)
    # Redoc's own footer logo points at its CDN: the policy blocks it (the page does not need it)
    logo = "https://cdn.redoc.ly/redoc/logo-mini.svg"
    assert [u for u in outside if not u.startswith(("data:", "blob:")) and u != logo] == []
    assert [v for v in violations if logo not in v] == []
    assert any(logo in v for v in violations)  # a violation is seen when there is one


def test_the_admin_works_under_the_policy(live_server, registry, maintainer, watched):
    from tests.factories import LeakageRecordFactory

    record = LeakageRecordFactory()
    page, violations = watched
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("input[name=username]", "grace")
    page.fill("input[name=password]", "correct horse battery staple")
    page.click("input[type=submit]")
    page.get_by_text("Site administration").first.wait_for()
    page.goto(f"{live_server.url}/admin/leaderboard/leakagerecord/{record.pk}/change/")
    page.locator("textarea[name=public_note]").fill("reviewed in the browser")
    page.click("input[name=_save]")
    page.get_by_text("was changed successfully").first.wait_for()
    page.goto(f"{live_server.url}/admin/leaderboard/submission/")
    page.locator("#changelist").wait_for()
    assert violations == []
