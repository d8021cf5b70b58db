"""Confirmed leakage records are permanent in the database itself, not only in the ORM:
an UPDATE or DELETE of a row whose stored status is 'confirmed' raises, whoever sends it."""

from django.db import migrations

PG_FORWARD = """
CREATE OR REPLACE FUNCTION leaderboard_leakage_immutable() RETURNS trigger AS $$
BEGIN
    IF OLD.status = 'confirmed' THEN
        RAISE EXCEPTION 'leakage record % is confirmed: it cannot be % (confirmed leakage records are permanent)', OLD.id, lower(TG_OP)
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER leaderboard_leakage_immutable
    BEFORE UPDATE OR DELETE ON leaderboard_leakagerecord
    FOR EACH ROW EXECUTE FUNCTION leaderboard_leakage_immutable();
"""
PG_REVERSE = """
DROP TRIGGER IF EXISTS leaderboard_leakage_immutable ON leaderboard_leakagerecord;
DROP FUNCTION IF EXISTS leaderboard_leakage_immutable();
"""
SQLITE_FORWARD = [
    """CREATE TRIGGER leaderboard_leakage_no_update BEFORE UPDATE ON leaderboard_leakagerecord
       WHEN OLD.status = 'confirmed'
       BEGIN SELECT RAISE(ABORT, 'leakage record is confirmed: it cannot be updated'); END;""",
    """CREATE TRIGGER leaderboard_leakage_no_delete BEFORE DELETE ON leaderboard_leakagerecord
       WHEN OLD.status = 'confirmed'
       BEGIN SELECT RAISE(ABORT, 'leakage record is confirmed: it cannot be deleted'); END;""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS leaderboard_leakage_no_update;",
    "DROP TRIGGER IF EXISTS leaderboard_leakage_no_delete;",
]


def forward(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_FORWARD, params=None)
    elif vendor == "sqlite":
        for sql in SQLITE_FORWARD:
            schema_editor.execute(sql)


def reverse(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_REVERSE, params=None)
    elif vendor == "sqlite":
        for sql in SQLITE_REVERSE:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("leaderboard", "0001_initial")]
    operations = [migrations.RunPython(forward, reverse)]
