"""Confirmed leakage records survive SQLite's INSERT OR REPLACE and UPDATE OR REPLACE and
PostgreSQL's TRUNCATE (the database refuses them), and a probe's reference fields cannot be edited
by hand in the admin."""

import pytest
from django.db import DatabaseError, connection, transaction

from leaderboard.models import LeakageRecord, Probe
from leaderboard.services.leakage import leakage_record_review
from tests.factories import LeakageRecordFactory, ProbeFactory

pytestmark = pytest.mark.django_db

NOTE = "train split = test split"


@pytest.fixture
def confirmed(registry, maintainer):
    record = LeakageRecordFactory()
    return leakage_record_review(record=record, by=maintainer, confirm=True, note=NOTE)


def _replace_sql(verb: str) -> str:
    """``verb`` the record's own row back in, with its status changed and its note rewritten."""
    columns = [f.column for f in LeakageRecord._meta.concrete_fields]
    values = ["'dismissed'" if c == "status" else "'rewritten'" if c == "public_note" else c for c in columns]
    return (
        f"{verb} INTO leaderboard_leakagerecord ({', '.join(columns)}) "
        f"SELECT {', '.join(values)} FROM leaderboard_leakagerecord WHERE id = %s"
    )


def _intact(record) -> None:
    stored = LeakageRecord.objects.get(pk=record.pk)
    assert stored.status == "confirmed" and stored.public_note == NOTE


@pytest.mark.parametrize("verb", ["INSERT OR REPLACE", "REPLACE"])
def test_sqlite_refuses_to_replace_a_confirmed_record(confirmed, verb):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's REPLACE conflict resolution")
    with pytest.raises(DatabaseError, match="confirmed"), transaction.atomic(), connection.cursor() as cur:
        cur.execute(_replace_sql(verb), [confirmed.pk])
    _intact(confirmed)


def test_sqlite_still_replaces_an_open_record(registry):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's REPLACE conflict resolution")
    record = LeakageRecordFactory()
    with connection.cursor() as cur:
        cur.execute(_replace_sql("INSERT OR REPLACE"), [record.pk])
    assert LeakageRecord.objects.get(pk=record.pk).status == "dismissed"


@pytest.mark.parametrize("assignments", ["id = %s", "id = %s, status = 'dismissed'"])
def test_sqlite_refuses_to_move_an_open_record_onto_a_confirmed_ones_id(confirmed, assignments):
    """``UPDATE OR REPLACE`` would delete the confirmed row (no delete trigger fires) to make room."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's REPLACE conflict resolution")
    other = LeakageRecordFactory()
    sql = f"UPDATE OR REPLACE leaderboard_leakagerecord SET {assignments} WHERE id = %s"
    with pytest.raises(DatabaseError, match="confirmed"), transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, [confirmed.pk, other.pk])
    _intact(confirmed)
    assert LeakageRecord.objects.filter(pk=other.pk).exists()


def test_sqlite_still_updates_an_open_record(registry):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's REPLACE conflict resolution")
    record = LeakageRecordFactory()
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE OR REPLACE leaderboard_leakagerecord SET status = 'dismissed' WHERE id = %s", [record.pk]
        )
    assert LeakageRecord.objects.get(pk=record.pk).status == "dismissed"


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "TRUNCATE leaderboard_leakagerecord",
        "TRUNCATE leaderboard_leakagerecord RESTART IDENTITY CASCADE",
        "TRUNCATE leaderboard_probe CASCADE",  # reaches the records through their foreign key
    ],
)
def test_postgresql_refuses_to_truncate_confirmed_records(confirmed, sql):
    with pytest.raises(DatabaseError, match="confirmed"), transaction.atomic(), connection.cursor() as cur:
        # the test's own inserts left deferred foreign-key checks pending; TRUNCATE waits for none
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cur.execute(sql)
    _intact(confirmed)


@pytest.mark.postgres
def test_postgresql_refuses_an_upsert_over_a_confirmed_record(confirmed):
    sql = _replace_sql("INSERT") + " ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status"
    with pytest.raises(DatabaseError, match="confirmed"), transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, [confirmed.pk])
    _intact(confirmed)


def test_the_admin_shows_a_probes_reference_fields_read_only(client, maintainer, registry):
    probe = ProbeFactory(is_reference=True, reference_role="eval_awareness")
    client.force_login(maintainer)
    url = f"/admin/leaderboard/probe/{probe.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200
    form_fields = page.context["adminform"].form.fields
    for name in ("is_reference", "reference_role", "status", "deprecated_reason"):
        assert name not in form_fields, name
    # a forged POST of those fields changes nothing
    client.post(
        url,
        {
            "name": probe.name,
            "is_reference": "",
            "reference_role": "",
            "status": "deprecated",
            "deprecated_reason": "by hand",
            "probeversion_set-TOTAL_FORMS": "0",
            "probeversion_set-INITIAL_FORMS": "0",
            "versions-TOTAL_FORMS": "0",
            "versions-INITIAL_FORMS": "0",
        },
    )
    probe = Probe.objects.get(pk=probe.pk)
    assert probe.is_reference and probe.reference_role == "eval_awareness" and probe.status == "active"
