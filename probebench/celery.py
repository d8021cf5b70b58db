"""The Celery app. Evaluation runs go to the ``primary`` queue (the runs the board ranks on:
score, reference, holdout) or the ``secondary`` queue (the other axes), as the run's axis declares
(``leaderboard.axes.run_queue``, applied where ``services.runs`` publishes a run); bookkeeping
(scoring, reconciling, cycles) to ``default``.

A worker consumes its queues in the order given (``-Q default,primary,secondary``,
``leaderboard.policy.WORKER_QUEUES``): on Redis with ``queue_order_strategy: priority`` (settings),
on the embedded filesystem broker with ``probebench.broker`` (the stock transport takes the queues
in turn). With one message prefetched per process and ``acks_late`` (nothing more is fetched while
a run executes), a queued score run always starts before a queued secondary run. Within a queue a
run's message is a token: the database decides which queued run of that queue it executes (the
maintainers' own work first, then round-robin across submitters,
``leaderboard.services.runs.evaluation_run_next``).

Scale out by starting more workers on more hosts against the same broker and database:
``celery -A probebench worker -Q default,primary,secondary --concurrency 1`` on each machine with a
model (a worker given only ``primary`` measures the board's numbers and nothing else).
"""

import os

from celery import Celery
from kombu import Queue

from leaderboard.policy import DEFAULT_QUEUE, PRIMARY_QUEUE, SECONDARY_QUEUE

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "probebench.settings")
# GNU OpenMP threads spin while they wait; on a small shared machine that slows a worker badly.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

app = Celery("probebench")
# the CELERY_* settings (probebench/settings.py, where the environment is read: the beat schedule,
# the time a new pool process has to start) and the fixed choices below
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_queues=(Queue(DEFAULT_QUEUE), Queue(PRIMARY_QUEUE), Queue(SECONDARY_QUEUE)),
    task_default_queue=DEFAULT_QUEUE,
    # a run published without its kind's queue (the Celery default route) is a primary run;
    # services.runs gives every run its kind's queue
    task_routes={"leaderboard.tasks.evaluation_run_execute_task": {"queue": PRIMARY_QUEUE}},
    # A hard limit kills a stuck evaluation; the reconciler re-queues it.
    task_time_limit=60 * 60,
    task_soft_time_limit=55 * 60,
    worker_prefetch_multiplier=1,  # long tasks: don't hoard messages a sibling could run
    task_reject_on_worker_lost=True,
    broker_connection_retry_on_startup=True,
    # nothing reads a task's result (a run's state is its row); kept, a publish first subscribes to
    # the result store, which with Redis down retried for 20 s and then gave up for good
    task_ignore_result=True,
    result_expires=24 * 3600,
)
app.autodiscover_tasks()
