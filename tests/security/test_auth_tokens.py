"""API tokens are stored as a SHA-256 digest only: ``Authorization: Token <key>`` still works, the
key is shown once (command, account page), it can be replaced or revoked, and the clear keys of
DRF's old token table are hashed by the migration (clients keep their key)."""

import hashlib
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from leaderboard.models import ApiToken

SUBMISSIONS = "/api/v1/submissions"


def _api_get(key: str):
    return Client().get(SUBMISSIONS, HTTP_AUTHORIZATION=f"Token {key}")


def _stored_text() -> str:
    """Everything the token table holds, as text."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM leaderboard_apitoken")
        return repr(cursor.fetchall())


@pytest.mark.django_db
def test_the_command_prints_a_key_that_is_stored_only_as_its_hash(researcher):
    out = StringIO()
    call_command("create_api_token", "ada", stdout=out)
    key = out.getvalue().strip().splitlines()[-1]
    assert len(key) == 40
    assert key not in _stored_text()
    token = ApiToken.objects.get(user=researcher)
    assert token.digest == hashlib.sha256(key.encode()).hexdigest() and token.prefix == key[:8]
    assert "authtoken_token" not in connection.introspection.table_names()
    assert _api_get(key).status_code == 200
    assert _api_get(key[:-1] + ("0" if key[-1] != "0" else "1")).status_code == 401


@pytest.mark.django_db
def test_running_the_command_again_makes_a_new_key_and_the_old_one_stops_working(researcher):
    first, second = StringIO(), StringIO()
    call_command("create_api_token", "ada", stdout=first)
    call_command("create_api_token", "ada", stdout=second, stderr=StringIO())
    old, new = first.getvalue().strip(), second.getvalue().strip()
    assert old != new
    assert _api_get(old).status_code == 401 and _api_get(new).status_code == 200


@pytest.mark.django_db
def test_the_command_can_create_the_user(db):
    out = StringIO()
    call_command("create_api_token", "newcomer", "--create-user", stdout=out, stderr=StringIO())
    response = _api_get(out.getvalue().strip())
    assert response.status_code == 200 and response.json()["count"] == 0


@pytest.mark.django_db
def test_the_account_page_shows_a_new_key_once_then_only_its_prefix(client, researcher):
    client.force_login(researcher)
    assert b"no API token yet" in client.get(reverse("submit:account")).content
    made = client.post(reverse("submit:token"))
    assert made.status_code == 200 and "no-store" in made["Cache-Control"]
    key = made.context["new_key"]
    assert f'<code id="api-token">{key}</code>' in made.content.decode()
    assert _api_get(key).status_code == 200
    later = client.get(reverse("submit:account")).content.decode()
    assert key not in later and f"{key[:8]}…" in later
    # replacing: a new key, the old one no longer works
    replaced = client.post(reverse("submit:token")).context["new_key"]
    assert replaced != key
    assert _api_get(key).status_code == 401 and _api_get(replaced).status_code == 200
    # revoking: no key works
    assert client.post(reverse("submit:token"), {"action": "revoke"}).status_code == 302
    assert _api_get(replaced).status_code == 401
    assert not ApiToken.objects.filter(user=researcher).exists()


@pytest.mark.django_db
def test_an_inactive_users_key_is_refused(researcher):
    out = StringIO()
    call_command("create_api_token", "ada", stdout=out)
    researcher.is_active = False
    researcher.save()
    assert _api_get(out.getvalue().strip()).status_code == 401


@pytest.mark.django_db(transaction=True)
def test_the_migration_hashes_existing_clear_tokens_and_drops_their_table(researcher):
    from django.db.migrations.executor import MigrationExecutor

    before, after = (
        ("leaderboard", "0005_leakage_no_replace_truncate"),
        ("leaderboard", "0006_api_token_hashed"),
    )
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    key = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:  # DRF authtoken's table, as an existing deployment has it
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamp NOT NULL,"
            " user_id integer NOT NULL UNIQUE)"
        )
        cursor.execute(
            "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, %s, %s)",
            [key, "2026-01-02 03:04:05", researcher.pk],
        )
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([after])
    # back to the latest schema for the tests that follow
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert "authtoken_token" not in connection.introspection.table_names()
    token = ApiToken.objects.get(user=researcher)
    assert token.digest == hashlib.sha256(key.encode()).hexdigest() and token.prefix == "01234567"
    assert key not in _stored_text()
    assert _api_get(key).status_code == 200
