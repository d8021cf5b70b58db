"""Fuzz the API from its own OpenAPI schema (schemathesis), bounded: whatever a client sends, no
5xx. Signed in as a researcher with a token, so the authenticated endpoints are exercised too."""

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def api_schema(registry, researcher):
    from django.core import signals
    from django.db import close_old_connections

    from leaderboard.services.tokens import api_token_create
    from probebench.wsgi import application

    # Called through WSGI (not Django's test client), each request would close the test's
    # connection at its end; the test client disconnects the same handlers.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)

    token = api_token_create(user=researcher)
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
    schema.config.headers = {"Authorization": f"Token {token}"}
    yield schema
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case):
    response = case.call()
    case.validate_response(response, checks=[not_a_server_error])
