"""API tokens stored as SHA-256 digests (leaderboard.ApiToken) instead of DRF's clear-text
``authtoken_token`` table: each existing key is hashed into the new table (so clients keep their
key), then the clear-text table is dropped (``rest_framework.authtoken`` is no longer installed)."""

import datetime
import hashlib

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone
from django.utils.dateparse import parse_datetime

CLEAR_TABLE = "authtoken_token"


def _aware(created):
    """A raw SQLite read gives text in UTC without an offset; PostgreSQL an aware datetime."""
    if isinstance(created, str):
        created = parse_datetime(created)
    if created is not None and timezone.is_naive(created):
        created = timezone.make_aware(created, datetime.timezone.utc)
    return created or timezone.now()


def clear_tokens_hash(apps, schema_editor):
    connection = schema_editor.connection
    if CLEAR_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("leaderboard", "ApiToken")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, user_id, created FROM {CLEAR_TABLE}")  # noqa: S608 - a constant
        rows = cursor.fetchall()
    ApiToken.objects.bulk_create(
        ApiToken(
            user_id=user_id,
            prefix=key[:8],
            digest=hashlib.sha256(key.encode()).hexdigest(),
            created_at=_aware(created),
        )
        for key, user_id, created in rows
    )
    schema_editor.execute(f"DROP TABLE {CLEAR_TABLE}")


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0005_leakage_no_replace_truncate"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("prefix", models.CharField(max_length=8)),
                ("digest", models.CharField(max_length=64, unique=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_token",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        # irreversible on purpose: the clear keys are gone
        migrations.RunPython(clear_tokens_hash, migrations.RunPython.noop),
    ]
