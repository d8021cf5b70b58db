#!/usr/bin/env bash
# migrate | web | worker | beat | manage ARGS...
#
# Two database roles (docker/README.md): `migrate` connects as the owner of the tables
# (DATABASE_OWNER_URL, or DB_OWNER_ROLE + DB_OWNER_PASSWORD_FILE); every other role as the site's
# role, which may only read and write rows (DATABASE_URL, or DB_APP_ROLE + DB_APP_PASSWORD_FILE).
# Passwords are read from files (secrets) and must be URL-safe (docker/README.md makes them hex).
set -euo pipefail
role="${1:-web}"
shift || true

db_url() {  # ROLE PASSWORD_FILE: a postgresql:// URL on DB_HOST, DB_PORT, DB_NAME
  local password
  password="$(cat "$2")"
  printf 'postgresql://%s:%s@%s:%s/%s' "$1" "$password" "${DB_HOST:-postgres}" "${DB_PORT:-5432}" "${DB_NAME:-probebench}"
}

if [ "$role" = migrate ]; then
  if [ -z "${DATABASE_OWNER_URL:-}" ]; then
    DATABASE_OWNER_URL="$(db_url "${DB_OWNER_ROLE:-probebench_owner}" "${DB_OWNER_PASSWORD_FILE:?set DATABASE_OWNER_URL or DB_OWNER_PASSWORD_FILE}")"
  fi
  export DATABASE_URL="$DATABASE_OWNER_URL"
elif [ -z "${DATABASE_URL:-}" ] && [ -n "${DB_APP_PASSWORD_FILE:-}" ]; then
  DATABASE_URL="$(db_url "${DB_APP_ROLE:-probebench_app}" "$DB_APP_PASSWORD_FILE")"
  export DATABASE_URL
fi
unset DATABASE_OWNER_URL DB_OWNER_PASSWORD_FILE  # the site's processes never hold the owner's password

case "$role" in
  migrate)
    # as the owner: the tables it creates are granted to the site's role by the default
    # privileges of docker/postgres/grants.sql
    python manage.py migrate --noinput
    python manage.py sync_registry
    ;;
  web)
    # gthread workers, timeouts and limits: docker/gunicorn.conf.py (WEB_* variables)
    exec gunicorn -c "$(dirname "$0")/gunicorn.conf.py" probebench.wsgi:application
    ;;
  worker)
    # One evaluation at a time per worker process: a run holds a base model in memory. The
    # queues are consumed in this order: bookkeeping, then the runs the board ranks on (primary),
    # then the secondary axes (transfer, reproduce, steer).
    exec celery -A probebench worker -Q "${WORKER_QUEUES:-default,primary,secondary}" --concurrency "${WORKER_CONCURRENCY:-1}" \
      --hostname "worker@%h" --loglevel INFO
    ;;
  beat)
    exec celery -A probebench beat --loglevel INFO --schedule /data/celerybeat-schedule
    ;;
  manage)
    exec python manage.py "$@"
    ;;
  *)
    echo "unknown role $role: migrate | web | worker | beat | manage ARGS" >&2
    exit 2
    ;;
esac
