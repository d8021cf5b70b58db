"""A confirmed leakage record also survives SQLite's ``UPDATE OR REPLACE``: setting an open record's
id to a confirmed record's id deletes the confirmed row to make room, and that delete fires no
trigger (0002 refuses updates of the confirmed row itself, 0005 the same move by INSERT). A BEFORE
UPDATE trigger refuses an update that gives a row the id of a confirmed record. (PostgreSQL has no
REPLACE conflict resolution: the same update is a unique violation there.)"""

from django.db import migrations

SQLITE_FORWARD = """
CREATE TRIGGER leaderboard_leakage_no_replace_by_update BEFORE UPDATE OF id ON leaderboard_leakagerecord
WHEN NEW.id IS NOT OLD.id
 AND EXISTS (SELECT 1 FROM leaderboard_leakagerecord WHERE id = NEW.id AND status = 'confirmed')
BEGIN SELECT RAISE(ABORT, 'leakage record is confirmed: it cannot be replaced'); END;
"""
SQLITE_REVERSE = "DROP TRIGGER IF EXISTS leaderboard_leakage_no_replace_by_update;"


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQLITE_FORWARD)


def reverse(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQLITE_REVERSE)


class Migration(migrations.Migration):
    dependencies = [("leaderboard", "0010_run_kind_steer")]
    operations = [migrations.RunPython(forward, reverse)]
