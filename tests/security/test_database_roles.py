"""The site's database role cannot undo the leakage triggers. docker/ runs the migrations as an
owner role and the site and workers as a role that owns nothing, granted row access by
``docker/postgres/grants.sql``. Here, on the real PostgreSQL (the test database, whose tables the
test's own role owns, as the owner role owns them in docker/), a fresh login role gets exactly
that file's grants; connected as it, rows are read and written, while disabling or dropping the
triggers, replacing their function, truncating or dropping the table are refused."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest
from django.db import connection

from leaderboard.models import LeakageRecord
from tests.factories import LeakageRecordFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

GRANTS = Path(__file__).resolve().parents[2] / "docker" / "postgres" / "grants.sql"
TABLE = "leaderboard_leakagerecord"


@pytest.fixture
def app_role():
    """A login role that owns nothing (dropped afterwards, with every privilege it was given)."""
    name = f"probebench_app_test_{os.getpid()}"
    password = secrets.token_hex(16)
    with connection.cursor() as cursor:
        cursor.execute(f'DROP ROLE IF EXISTS "{name}"')
        cursor.execute(
            f"CREATE ROLE \"{name}\" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '{password}'"
        )
    try:
        yield name, password
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP OWNED BY "{name}"')  # its grants and default privileges here
            cursor.execute(f'DROP ROLE "{name}"')


@pytest.fixture
def confirmed_cleared():
    """After the test, the owner (and only the owner) sets the triggers aside to remove the
    confirmed records, so that the database can be flushed for the next test."""
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {TABLE} DISABLE TRIGGER USER")
        cursor.execute(f"DELETE FROM {TABLE}")
        cursor.execute(f"ALTER TABLE {TABLE} ENABLE TRIGGER USER")


def _grant(role: str) -> None:
    """Run the shipped grants file as the tables' owner, for ``role``."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('probebench.app_role', %s, false)", [role])
        cursor.execute(GRANTS.read_text())


def _connect(role: tuple[str, str]):
    import psycopg

    settings = connection.settings_dict
    return psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        dbname=settings["NAME"],
        user=role[0],
        password=role[1],
        autocommit=True,
    )


def _refused(conn, sql: str) -> str:
    import psycopg

    with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
        conn.execute(sql)
    return str(refused.value)


def test_the_grants_file_is_what_lets_the_site_role_read_and_write(registry, app_role):
    import psycopg

    with _connect(app_role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(f"SELECT count(*) FROM {TABLE}")
    _grant(app_role[0])
    with _connect(app_role) as conn:
        assert conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone() == (0,)


def test_the_site_role_writes_rows_but_cannot_drop_or_disable_the_leakage_triggers(
    registry, app_role, confirmed_cleared
):
    import psycopg

    record = LeakageRecordFactory()  # an open record, written by the owner
    confirmed = LeakageRecordFactory(status=LeakageRecord.Status.CONFIRMED, public_note="trained on test")
    _grant(app_role[0])
    with _connect(app_role) as conn:
        # normal writes: a new record (its id from the identity sequence), an update, a delete
        [(new_id,)] = conn.execute(
            f"INSERT INTO {TABLE} (probe_id, probe_version_id, source, rule, summary, evidence, status,"
            " public_note, created_at) SELECT probe_id, probe_version_id, 'rule', 'r', 'new', '{}',"
            f" 'open', '', now() FROM {TABLE} WHERE id = %s RETURNING id",
            [record.pk],
        ).fetchall()
        conn.execute(f"UPDATE {TABLE} SET summary = 'edited' WHERE id = %s", [record.pk])
        conn.execute(f"DELETE FROM {TABLE} WHERE id = %s", [new_id])
        # what would let it rewrite history is refused: it owns neither the table nor the function
        for trigger in ("leaderboard_leakage_immutable", "leaderboard_leakage_no_truncate"):
            assert "owner" in _refused(conn, f"ALTER TABLE {TABLE} DISABLE TRIGGER {trigger}")
            assert "owner" in _refused(conn, f"DROP TRIGGER {trigger} ON {TABLE}")
        _refused(conn, f"ALTER TABLE {TABLE} DISABLE TRIGGER ALL")
        _refused(
            conn,
            "CREATE OR REPLACE FUNCTION leaderboard_leakage_immutable() RETURNS trigger"
            " AS $$ BEGIN RETURN NEW; END; $$ LANGUAGE plpgsql",
        )
        _refused(conn, "DROP FUNCTION leaderboard_leakage_immutable() CASCADE")
        _refused(conn, f"TRUNCATE {TABLE}")
        _refused(conn, f"DROP TABLE {TABLE} CASCADE")
        _refused(conn, "CREATE TABLE escape_hatch (id int)")
        # and the trigger still holds for it: a confirmed record cannot be changed
        with pytest.raises(psycopg.errors.IntegrityConstraintViolation):
            conn.execute(f"UPDATE {TABLE} SET status = 'dismissed' WHERE id = %s", [confirmed.pk])
    record.refresh_from_db()
    assert record.summary == "edited"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT tgname FROM pg_trigger WHERE tgrelid = '{TABLE}'::regclass AND tgenabled = 'O'"
        )
        enabled = {name for (name,) in cursor.fetchall()}
    assert {"leaderboard_leakage_immutable", "leaderboard_leakage_no_truncate"} <= enabled


def test_tables_the_owner_creates_later_are_granted_too(registry, app_role):
    """A later migration's table (created by the owner after the grants) is readable and writable
    by the site's role: the file's default privileges, not a grant on the tables of today."""
    _grant(app_role[0])
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE leaderboard_later (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, x int)"
        )
    try:
        with _connect(app_role) as conn:
            conn.execute("INSERT INTO leaderboard_later (x) VALUES (1)")
            assert conn.execute("SELECT x FROM leaderboard_later").fetchall() == [(1,)]
            _refused(conn, "DROP TABLE leaderboard_later")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE leaderboard_later")
