#!/usr/bin/env bash
# web | worker | beat | manage ARGS...
set -euo pipefail
role="${1:-web}"
shift || true
case "$role" in
  web)
    python manage.py migrate --noinput
    python manage.py sync_registry
    # gthread workers, timeouts and limits: docker/gunicorn.conf.py (WEB_* variables)
    exec gunicorn -c "$(dirname "$0")/gunicorn.conf.py" probebench.wsgi:application
    ;;
  worker)
    # One evaluation at a time per worker process: a run holds a base model in memory.
    exec celery -A probebench worker -Q "${WORKER_QUEUES:-gpu,default}" --concurrency "${WORKER_CONCURRENCY:-1}" \
      --hostname "worker@%h" --loglevel INFO
    ;;
  beat)
    exec celery -A probebench beat --loglevel INFO --schedule /data/celerybeat-schedule
    ;;
  manage)
    exec python manage.py "$@"
    ;;
  *)
    echo "unknown role $role: web | worker | beat | manage ARGS" >&2
    exit 2
    ;;
esac
