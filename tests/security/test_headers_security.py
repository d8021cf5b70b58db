"""Security headers on every kind of page, the secret-key refusal and the HTTPS settings, read from
real responses (the settings are computed at start-up, so those cases start a fresh process)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

ROOT = Path(__file__).resolve().parents[2]


def _directives(response) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    out = {}
    for part in policy.split(";"):
        name, *values = part.split()
        out[name] = values
    return out


@pytest.mark.parametrize("url", ["/", "/api/v1/categories", "/admin/login/", "/accounts/login/"])
def test_pages_and_api_carry_a_strict_content_security_policy(client, registry, url):
    response = client.get(url)
    assert response.status_code == 200
    csp = _directives(response)
    assert csp["default-src"] == ["'self'"]
    assert csp["script-src"] == ["'self'"]  # no inline script, no CDN
    assert csp["object-src"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"]
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"


def test_the_submission_page_polls_with_a_script_file_not_an_inline_script(client, researcher, registry):
    from tests.factories import SubmissionFactory

    sub = SubmissionFactory(submitter=researcher, probe_version__probe__owner=researcher)
    client.force_login(researcher)
    page = client.get(reverse("submit:detail", args=[sub.pk])).content.decode()
    assert "<script>" not in page
    assert 'src="/static/leaderboard/submission.js"' in page
    assert f'data-status-url="{reverse("submit:status", args=[sub.pk])}"' in page
    assert client.get("/static/leaderboard/submission.js").status_code == 200


def test_the_api_docs_page_loads_redoc_from_this_site(client):
    response = client.get(reverse("api:docs"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "cdn.jsdelivr.net" not in page and "fonts.googleapis.com" not in page
    script = "/static/drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
    assert f'src="{script}"' in page
    asset = client.get(script)
    assert asset.status_code == 200
    # Redoc styles itself with injected <style> elements and runs its search in a blob: worker:
    # the docs page (only it) allows those; scripts still come from this site only
    csp = _directives(response)
    assert "'unsafe-inline'" in csp["style-src"] and "blob:" in csp["worker-src"]
    assert csp["script-src"] == ["'self'"]


def _start(code: str, **env: str) -> subprocess.CompletedProcess:
    """A fresh Python process with only the given settings environment (plus the test data dir)."""
    base = {
        "PATH": os.environ["PATH"],
        "PROBEBENCH_DATA_DIR": os.environ["PROBEBENCH_DATA_DIR"],
        "DJANGO_SETTINGS_MODULE": "probebench.settings",
    }
    prelude = "import django; django.setup()\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        env={**base, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_site_refuses_to_start_without_a_secret_key_unless_debug():
    refused = _start("print('started')")
    assert refused.returncode != 0
    assert "ImproperlyConfigured" in refused.stderr and "SECRET_KEY" in refused.stderr
    assert "started" not in refused.stdout
    debug = _start("from django.conf import settings; print(settings.SECRET_KEY)", DEBUG="True")
    assert debug.returncode == 0, debug.stderr
    assert debug.stdout.strip() == "development-only-not-secret"
    given = _start(
        "from django.conf import settings; print(settings.SECRET_KEY)", SECRET_KEY="s3cret-from-env"
    )
    assert given.stdout.strip() == "s3cret-from-env"


HTTPS_PROBE = """
from django.test import Client
client = Client()
plain = client.get("/accounts/login/")
secure = client.get("/accounts/login/", secure=True)
print(plain.status_code, plain.get("Location"))
print(secure.status_code, secure.get("Strict-Transport-Security"))
print(secure.cookies["csrftoken"]["secure"])
"""


def test_https_mode_redirects_plain_http_sets_hsts_and_secure_cookies():
    result = _start(HTTPS_PROBE, SECRET_KEY="k", PROBEBENCH_HTTPS="True", PROBEBENCH_HSTS_SECONDS="600")
    assert result.returncode == 0, result.stderr
    plain, secure, cookie = result.stdout.strip().splitlines()
    assert plain == "301 https://testserver/accounts/login/"
    assert secure == "200 max-age=600"
    assert cookie == "True"


def test_a_proxy_declared_for_https_is_trusted_for_the_scheme_only_when_declared():
    code = (
        "from django.test import Client\n"
        "r = Client().get('/accounts/login/', HTTP_X_FORWARDED_PROTO='https')\n"
        "print(r.status_code)\n"
    )
    behind_proxy = _start(code, SECRET_KEY="k", PROBEBENCH_HTTPS="True", PROBEBENCH_NUM_PROXIES="1")
    assert behind_proxy.stdout.strip() == "200", behind_proxy.stderr
    # no declared proxy: a client's X-Forwarded-Proto is not believed, the request is redirected
    direct = _start(code, SECRET_KEY="k", PROBEBENCH_HTTPS="True")
    assert direct.stdout.strip() == "301", direct.stderr
