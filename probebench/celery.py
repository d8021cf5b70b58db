"""The Celery app. Evaluation runs go to the ``gpu`` queue (workers with the models),
bookkeeping (scoring, reconciling, cycles) to ``default``.

Scale out by starting more workers on more hosts against the same broker and database:
``celery -A probebench worker -Q gpu --concurrency 1`` on each machine with a model.
"""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "probebench.settings")
# GNU OpenMP threads spin while they wait; on a small shared machine that slows a worker badly.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

app = Celery("probebench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_queues=(Queue("default"), Queue("gpu")),
    task_default_queue="default",
    task_routes={"leaderboard.tasks.evaluation_run_execute_task": {"queue": "gpu"}},
    # A hard limit kills a stuck evaluation; the reconciler re-queues it.
    task_time_limit=60 * 60,
    task_soft_time_limit=55 * 60,
    worker_prefetch_multiplier=1,  # long tasks: don't hoard messages a sibling could run
    task_reject_on_worker_lost=True,
    broker_connection_retry_on_startup=True,
    result_expires=24 * 3600,
    beat_schedule={
        "reconcile-runs": {
            "task": "leaderboard.tasks.evaluation_runs_reconcile_task",
            "schedule": float(os.environ.get("PROBEBENCH_RECONCILE_EVERY_S", "60")),
        },
    },
)
app.autodiscover_tasks()
