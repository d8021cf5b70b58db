"""Fuzz the API from the OpenAPI schema it serves (schemathesis): valid and invalid requests to
every operation, each answer checked against the schema. No 5xx; no status, Content-Type, header
or body the operation does not document; no invalid input accepted; authentication enforced where
declared; an undocumented method answered 405. Signed in as a researcher with a token, so the
authenticated endpoints are exercised too.

Bounded and seeded for the default suite: a fixed number of examples per operation, drawn
deterministically (the same requests on every run), about a minute in all (on two cores)."""

from datetime import timedelta

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

pytestmark = pytest.mark.django_db

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
    ignored_auth,
    unsupported_method,
]


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
# at most 25 generated examples per operation (besides the coverage cases), the same on every run; a
# request still unanswered after 30 s fails the run (the slowest, the board, takes well under a second)
@settings(
    max_examples=25,
    deadline=timedelta(seconds=30),
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_keeps_to_the_schema(case):
    response = case.call()
    case.validate_response(response, checks=CHECKS)
