"""Leakage records in the admin: a maintainer opens one by hand with evidence, reviews it
(confirm with a public note, or dismiss); a confirmed record is public and cannot be changed or
deleted from the admin either."""

from __future__ import annotations

import json

import pytest

from leaderboard.models import LeakageRecord
from leaderboard.services.leakage import leakage_record_open, leakage_record_review
from tests.leaderboard.reevaluation_data import scored

pytestmark = pytest.mark.django_db
ADMIN = "/admin/leaderboard/leakagerecord"
EVIDENCE = {"overlap": ["cities-truth-v1-c1164909-f"], "source": "the paper's appendix lists the test items"}


@pytest.fixture
def probe(small_registry):
    return scored("suspect").probe


@pytest.fixture
def staff(client, maintainer):
    client.force_login(maintainer)
    return client


@pytest.fixture
def open_record(probe, maintainer):
    return leakage_record_open(
        probe=probe, summary="trained on the test split", evidence=EVIDENCE, opened_by=maintainer
    )


@pytest.fixture
def confirmed(open_record, maintainer):
    return leakage_record_review(
        record=open_record, by=maintainer, confirm=True, note="Confirmed: test items in training."
    )


def test_a_maintainer_opens_a_record_by_hand_with_evidence(staff, probe, maintainer):
    version = probe.versions.get()
    response = staff.post(
        f"{ADMIN}/add/",
        {
            "probe": probe.pk,
            "probe_version": version.pk,
            "summary": "the README says it was fit on test",
            "evidence": json.dumps(EVIDENCE),
        },
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    record = LeakageRecord.objects.get()
    assert record.source == LeakageRecord.Source.MAINTAINER and record.opened_by == maintainer
    assert record.status == LeakageRecord.Status.OPEN and record.evidence == EVIDENCE


def test_a_record_opened_by_hand_needs_evidence(staff, probe):
    response = staff.post(f"{ADMIN}/add/", {"probe": probe.pk, "summary": "a hunch", "evidence": "{}"})
    assert response.status_code == 200 and "needs evidence" in response.content.decode()
    assert not LeakageRecord.objects.exists()


def test_review_confirms_with_a_public_note(staff, open_record, maintainer, client):
    form = {
        "summary": open_record.summary,
        "evidence": json.dumps(EVIDENCE),
        "public_note": "",
        "decision": "confirm",
    }
    page = staff.post(f"{ADMIN}/{open_record.pk}/change/", form)
    assert page.status_code == 200 and "needs a public note" in page.content.decode()
    assert LeakageRecord.objects.get().status == LeakageRecord.Status.OPEN

    form["public_note"] = "The test items are in the declared training set."
    assert staff.post(f"{ADMIN}/{open_record.pk}/change/", form).status_code == 302
    record = LeakageRecord.objects.get()
    assert record.status == LeakageRecord.Status.CONFIRMED and record.reviewed_by == maintainer
    assert record.public_note == "The test items are in the declared training set."

    # public: the probe, the board and the leakage page
    client.logout()
    assert (
        "The test items are in the declared training set." in client.get("/probes/suspect/").content.decode()
    )
    assert "The test items are in the declared training set." in client.get("/leakage/").content.decode()
    [row] = client.get("/api/v1/leaderboard", {"category": "hallucination"}).json()["results"]
    assert row["badges"]["leakage"] is True
    assert client.get("/api/v1/leakage").json()[0]["probe"] == "suspect"


def test_review_dismisses(staff, open_record, client):
    form = {
        "summary": open_record.summary,
        "evidence": json.dumps(EVIDENCE),
        "public_note": "",
        "decision": "dismiss",
    }
    assert staff.post(f"{ADMIN}/{open_record.pk}/change/", form).status_code == 302
    assert LeakageRecord.objects.get().status == LeakageRecord.Status.DISMISSED
    assert client.get("/api/v1/leakage").json() == []


def test_the_confirm_action_needs_each_record_s_note(staff, open_record):
    page = staff.post(
        f"{ADMIN}/", {"action": "confirm_selected", "_selected_action": [open_record.pk]}, follow=True
    )
    assert "needs a public note" in page.content.decode()
    assert LeakageRecord.objects.get().status == LeakageRecord.Status.OPEN


def test_a_confirmed_record_is_read_only_in_the_admin(staff, confirmed):
    page = staff.get(f"{ADMIN}/{confirmed.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200 and 'name="_save"' not in html and 'name="public_note"' not in html
    assert "Confirmed: test items in training." in html

    edit = {"summary": "nothing to see", "evidence": "{}", "public_note": "withdrawn", "decision": "dismiss"}
    assert staff.post(f"{ADMIN}/{confirmed.pk}/change/", edit).status_code == 403
    assert staff.get(f"{ADMIN}/{confirmed.pk}/delete/").status_code == 403
    assert staff.post(f"{ADMIN}/{confirmed.pk}/delete/", {"post": "yes"}).status_code == 403
    bulk = staff.post(
        f"{ADMIN}/", {"action": "delete_selected", "_selected_action": [confirmed.pk], "post": "yes"}
    )
    assert bulk.status_code == 403
    staff.post(f"{ADMIN}/", {"action": "dismiss_selected", "_selected_action": [confirmed.pk]})

    record = LeakageRecord.objects.get(pk=confirmed.pk)
    assert record.status == LeakageRecord.Status.CONFIRMED
    assert (
        record.public_note == "Confirmed: test items in training."
        and record.summary == "trained on the test split"
    )


def test_a_dismissed_record_is_view_only_but_open_ones_may_be_deleted(staff, probe, maintainer):
    dismissed = leakage_record_review(
        record=leakage_record_open(probe=probe, summary="s", evidence=EVIDENCE, opened_by=maintainer),
        by=maintainer,
        confirm=False,
    )
    assert (
        staff.post(f"{ADMIN}/{dismissed.pk}/change/", {"summary": "x", "evidence": "{}"}).status_code == 403
    )
    mistaken = leakage_record_open(
        probe=probe, summary="opened by mistake", evidence=EVIDENCE, opened_by=maintainer
    )
    assert staff.post(f"{ADMIN}/{mistaken.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not LeakageRecord.objects.filter(pk=mistaken.pk).exists()
