from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
    verbose_name = "ProbeBench leaderboard"

    def ready(self):
        # Register the Celery tasks in every process (web, worker, tests): the services publish
        # them by name (leaderboard.services.runs.task_delay).
        from leaderboard import tasks  # noqa: F401
