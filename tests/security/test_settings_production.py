"""Production refuses to start in debug mode: ``DEBUG=True`` under ``PROBEBENCH_ENV=production``
started before (on the public development key when no secret was given, with tracebacks and
settings shown to every visitor)."""

from tests.security.test_headers_security import _start

SHOW = "from django.conf import settings; print(settings.DEBUG, settings.HTTPS)"


def test_debug_under_production_is_refused_at_start_with_the_reason():
    for env in ({}, {"SECRET_KEY": "a real secret"}):
        refused = _start(SHOW, DEBUG="True", PROBEBENCH_ENV="production", **env)
        assert refused.returncode != 0
        assert "ImproperlyConfigured: DEBUG=True is refused under PROBEBENCH_ENV=production" in refused.stderr
        assert refused.stdout == ""


def test_production_without_debug_and_debug_in_development_still_start():
    production = _start(SHOW, PROBEBENCH_ENV="production", SECRET_KEY="a real secret")
    assert production.returncode == 0, production.stderr
    assert production.stdout.split() == ["False", "True"]
    development = _start(SHOW, DEBUG="True", PROBEBENCH_ENV="development")
    assert development.returncode == 0, development.stderr
    assert development.stdout.split() == ["True", "False"]
