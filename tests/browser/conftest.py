"""Headless Chromium (Debian's package, driven by Playwright) for the browser tests."""

import shutil

import pytest
from django.db import connections

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
needs_chromium = pytest.mark.skipif(
    not shutil.which(CHROMIUM), reason="needs Debian's chromium (make browser)"
)


@pytest.fixture
def new_page(monkeypatch):
    """``new_page(**context_options)``: a page in a fresh browser context; all closed afterwards."""
    # Playwright's sync API runs an event loop in this thread; the tests' own ORM reads are plain
    # synchronous code, so Django's async-context guard does not apply to them.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        contexts = []

        def open_page(**options):
            contexts.append(browser.new_context(**options))
            return contexts[-1].new_page()

        yield open_page
        # ORM reads made while Playwright's loop ran used connections of that context: close them
        # here, or the test database cannot be dropped at the end of the session
        connections.close_all()
        for context in contexts:
            context.close()
        browser.close()
