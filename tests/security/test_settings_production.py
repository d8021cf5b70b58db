"""Production settings that should stop the site do: ``DEBUG=True`` under
``PROBEBENCH_ENV=production`` (which started on the public development key, with tracebacks and
settings shown to every visitor); a ``PROBEBENCH_ENV`` that is not exactly one of the documented
values (``Production`` or ``prod`` quietly meant development: DEBUG allowed, no secure cookies, no
HSTS); and, in production, a short secret or one of the development values in this repository."""

import pytest

from tests.security.test_headers_security import _start

SHOW = "from django.conf import settings; print(settings.DEBUG, settings.HTTPS)"
#: what `python -c 'import secrets; print(secrets.token_urlsafe(50))'` prints: 67 characters
A_REAL_SECRET = "kq1Vd7pQ2Xr9sT4uW6yZ8aB0cD3eF5gH7iJ9kL1mN3oP5qR7sT9uV1wX3yZ5aB7cD9eF1g"
DEVELOPMENT_SECRETS = [
    "development-only-not-secret",  # probebench/settings.py, the DEBUG default
    "test-suite-only-not-secret",  # tests/env_defaults.py
    "type-checking-only-not-secret",  # Makefile (mypy)
    "collectstatic-build-only",  # docker/Dockerfile
]


def test_debug_under_production_is_refused_at_start_with_the_reason():
    for env in ({}, {"SECRET_KEY": A_REAL_SECRET}):
        refused = _start(SHOW, DEBUG="True", PROBEBENCH_ENV="production", **env)
        assert refused.returncode != 0
        assert "ImproperlyConfigured: DEBUG=True is refused under PROBEBENCH_ENV=production" in refused.stderr
        assert refused.stdout == ""


def test_production_without_debug_and_debug_in_development_still_start():
    production = _start(SHOW, PROBEBENCH_ENV="production", SECRET_KEY=A_REAL_SECRET)
    assert production.returncode == 0, production.stderr
    assert production.stdout.split() == ["False", "True"]
    development = _start(SHOW, DEBUG="True", PROBEBENCH_ENV="development")
    assert development.returncode == 0, development.stderr
    assert development.stdout.split() == ["True", "False"]
    unset = _start(SHOW, SECRET_KEY="short is fine outside production")
    assert unset.returncode == 0, unset.stderr
    assert unset.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("value", ["Production", "prod", "production ", "PRODUCTION", "staging", "dev", ""])
def test_an_environment_that_is_not_exactly_a_documented_value_is_refused_naming_them(value):
    refused = _start(SHOW, PROBEBENCH_ENV=value, DEBUG="True", SECRET_KEY=A_REAL_SECRET)
    assert refused.returncode != 0
    assert (
        f"ImproperlyConfigured: PROBEBENCH_ENV must be exactly one of development, production, got {value!r}"
        in refused.stderr
    )
    assert refused.stdout == ""


@pytest.mark.parametrize("secret", ["x", "a real secret", A_REAL_SECRET[:49]])
def test_production_refuses_a_secret_shorter_than_50_characters(secret):
    refused = _start(SHOW, PROBEBENCH_ENV="production", SECRET_KEY=secret)
    assert refused.returncode != 0
    assert (
        f"SECRET_KEY has {len(secret)} characters; PROBEBENCH_ENV=production needs at least 50"
        in refused.stderr
    )
    assert refused.stdout == ""
    fifty = _start(SHOW, PROBEBENCH_ENV="production", SECRET_KEY=A_REAL_SECRET[:50])
    assert fifty.returncode == 0, fifty.stderr


@pytest.mark.parametrize("secret", DEVELOPMENT_SECRETS)
def test_production_refuses_the_development_secrets_written_in_the_repository(secret, tmp_path):
    secret_file = tmp_path / "secret_key.txt"  # given as production gives it: SECRET_KEY_FILE
    secret_file.write_text(secret + "\n")
    for env in ({"SECRET_KEY": secret}, {"SECRET_KEY_FILE": str(secret_file)}):
        refused = _start(SHOW, PROBEBENCH_ENV="production", **env)
        assert refused.returncode != 0
        assert "SECRET_KEY is a development value written in the repository" in refused.stderr
        assert refused.stdout == ""
