"""Confirmed leakage records also survive the two statements that 0002's row triggers do not see:

- SQLite ``INSERT OR REPLACE`` (``REPLACE INTO``) deletes the conflicting row without firing delete
  triggers (unless ``recursive_triggers`` is on): a BEFORE INSERT trigger refuses an insert whose id
  is that of a confirmed record (the primary key is the table's only unique index).
- PostgreSQL ``TRUNCATE`` (also when it cascades from another table) fires no row trigger: a BEFORE
  TRUNCATE statement trigger refuses it while a confirmed record exists. (PostgreSQL's
  ``INSERT ... ON CONFLICT DO UPDATE`` is an UPDATE, already refused by 0002.)"""

from django.db import migrations

PG_FORWARD = """
CREATE OR REPLACE FUNCTION leaderboard_leakage_no_truncate() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM leaderboard_leakagerecord WHERE status = 'confirmed') THEN
        RAISE EXCEPTION 'confirmed leakage records cannot be truncated (confirmed leakage records are permanent)'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER leaderboard_leakage_no_truncate
    BEFORE TRUNCATE ON leaderboard_leakagerecord
    FOR EACH STATEMENT EXECUTE FUNCTION leaderboard_leakage_no_truncate();
"""
PG_REVERSE = """
DROP TRIGGER IF EXISTS leaderboard_leakage_no_truncate ON leaderboard_leakagerecord;
DROP FUNCTION IF EXISTS leaderboard_leakage_no_truncate();
"""
SQLITE_FORWARD = """
CREATE TRIGGER leaderboard_leakage_no_replace BEFORE INSERT ON leaderboard_leakagerecord
WHEN EXISTS (SELECT 1 FROM leaderboard_leakagerecord WHERE id = NEW.id AND status = 'confirmed')
BEGIN SELECT RAISE(ABORT, 'leakage record is confirmed: it cannot be replaced'); END;
"""
SQLITE_REVERSE = "DROP TRIGGER IF EXISTS leaderboard_leakage_no_replace;"


def forward(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_FORWARD, params=None)
    elif vendor == "sqlite":
        schema_editor.execute(SQLITE_FORWARD)


def reverse(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_REVERSE, params=None)
    elif vendor == "sqlite":
        schema_editor.execute(SQLITE_REVERSE)


class Migration(migrations.Migration):
    dependencies = [("leaderboard", "0004_rank_interval")]
    operations = [migrations.RunPython(forward, reverse)]
