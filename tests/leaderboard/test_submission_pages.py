"""The researcher's pages: the submission form, a submission's live status, the API token."""

import pytest
from django.urls import reverse

from tests.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def submission(registry, researcher):
    from tests.factories import ProbeFactory, ProbeVersionFactory

    version = ProbeVersionFactory(probe=ProbeFactory(owner=researcher))
    return SubmissionFactory(
        probe_version=version, submitter=researcher, status="running", step="1 of 6 runs finished"
    )


def test_the_submitter_sees_the_status_page_and_its_live_fragment(client, submission, researcher):
    client.force_login(researcher)
    page = client.get(reverse("submit:detail", args=[submission.pk]))
    assert page.status_code == 200
    assert b'data-status="running"' in page.content and b"1 of 6 runs finished" in page.content
    fragment = client.get(reverse("submit:status", args=[submission.pk]))
    assert fragment.status_code == 200
    assert fragment.content.lstrip().startswith(b'<div id="submission-status"')


def test_a_failed_submission_shows_why(client, submission, researcher):
    submission.status, submission.failure_reason = "failed", "cities-truth-v1/test: tensor 'weight' has NaN"
    submission.save()
    client.force_login(researcher)
    page = client.get(reverse("submit:detail", args=[submission.pk]))
    assert b"Why it failed" in page.content and b"has NaN" in page.content


def test_someone_elses_submission_page_is_404(client, submission, stranger):
    client.force_login(stranger)
    assert client.get(reverse("submit:detail", args=[submission.pk])).status_code == 404
    assert client.get(reverse("submit:status", args=[submission.pk])).status_code == 404


def test_the_form_needs_a_signed_in_user(client, registry):
    response = client.get(reverse("submit:new"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_token_form_is_csrf_protected(researcher):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(researcher)
    assert client.post(reverse("submit:token")).status_code == 403
