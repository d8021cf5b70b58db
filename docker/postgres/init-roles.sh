#!/usr/bin/env bash
# Run once by the postgres image when its data directory is created (mounted into
# /docker-entrypoint-initdb.d): the two roles of the site and its database.
#
#   probebench_owner  owns the database, its schema and every table: runs the migrations
#                     (the `migrate` service) and nothing else
#   probebench_app    what web, worker and beat connect as: rows only (docker/postgres/grants.sql),
#                     so it cannot drop or disable the leakage triggers
#
# Neither is a superuser; the image's superuser (POSTGRES_USER) is used only here.
set -euo pipefail
owner="${PROBEBENCH_DB_OWNER:-probebench_owner}"
app="${PROBEBENCH_DB_APP:-probebench_app}"
db="${PROBEBENCH_DB_NAME:-probebench}"
owner_password="$(cat "${PROBEBENCH_DB_OWNER_PASSWORD_FILE:-/run/secrets/db_owner_password}")"
app_password="$(cat "${PROBEBENCH_DB_APP_PASSWORD_FILE:-/run/secrets/db_app_password}")"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v owner="$owner" -v app="$app" -v db="$db" \
    -v owner_password="$owner_password" -v app_password="$app_password" <<'SQL'
CREATE ROLE :"owner" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'owner_password';
CREATE ROLE :"app" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'app_password';
CREATE DATABASE :"db" OWNER :"owner";
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
SQL

# the grants, as the owner, before any table exists: its default privileges cover every table
# the migrations create later
PGOPTIONS="-c probebench.app_role=$app" psql -v ON_ERROR_STOP=1 --username "$owner" --dbname "$db" \
    -f "${PROBEBENCH_GRANTS_SQL:-/probebench/grants.sql}"
