"""A confirmed leakage record cannot be changed or deleted: not through the ORM, not through a
queryset, not with raw SQL (the database refuses it)."""

import pytest
from django.db import DatabaseError, connection, transaction

from leaderboard.errors import ImmutableRecordError
from leaderboard.models import LeakageRecord
from leaderboard.services.leakage import leakage_record_review
from tests.factories import LeakageRecordFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def confirmed(registry, maintainer):
    record = LeakageRecordFactory()
    return leakage_record_review(record=record, by=maintainer, confirm=True, note="train split = test split")


def test_an_open_record_can_still_be_edited_and_dismissed(registry, maintainer):
    record = LeakageRecordFactory()
    record.summary = "edited while open"
    record.save()
    dismissed = leakage_record_review(record=record, by=maintainer, confirm=False)
    assert dismissed.status == LeakageRecord.Status.DISMISSED


def test_confirming_needs_a_public_note(registry, maintainer):
    from leaderboard.errors import ServiceError

    with pytest.raises(ServiceError, match="public note"):
        leakage_record_review(record=LeakageRecordFactory(), by=maintainer, confirm=True, note=" ")


def test_the_orm_refuses_to_change_or_delete_it(confirmed):
    confirmed.public_note = "never mind"
    with pytest.raises(ImmutableRecordError):
        confirmed.save()
    with pytest.raises(ImmutableRecordError):
        confirmed.delete()
    assert LeakageRecord.objects.get(pk=confirmed.pk).public_note == "train split = test split"


def test_a_queryset_update_or_delete_is_refused(confirmed):
    with pytest.raises(ImmutableRecordError):
        LeakageRecord.objects.filter(pk=confirmed.pk).update(status="dismissed")
    with pytest.raises(ImmutableRecordError):
        LeakageRecord.objects.all().delete()
    assert LeakageRecord.objects.get(pk=confirmed.pk).status == "confirmed"


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE leaderboard_leakagerecord SET status = 'dismissed' WHERE id = %s",
        "UPDATE leaderboard_leakagerecord SET public_note = 'rewritten' WHERE id = %s",
        "DELETE FROM leaderboard_leakagerecord WHERE id = %s",
    ],
)
def test_raw_sql_is_refused_by_the_database(confirmed, sql):
    with pytest.raises(DatabaseError, match="confirmed"), transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, [confirmed.pk])
    assert LeakageRecord.objects.get(pk=confirmed.pk).public_note == "train split = test split"


@pytest.mark.postgres
def test_postgresql_has_the_trigger():
    assert connection.vendor == "postgresql"
    with connection.cursor() as cur:
        cur.execute("SELECT tgname FROM pg_trigger WHERE tgname = 'leaderboard_leakage_immutable'")
        assert cur.fetchone() is not None
