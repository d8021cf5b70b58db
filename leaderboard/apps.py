from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
    verbose_name = "ProbeBench leaderboard"

    def ready(self):
        # Register the Celery tasks in every process (web, worker, tests): the services publish
        # them by name (leaderboard.services.runs.task_delay).
        from leaderboard import tasks  # noqa: F401
        from leaderboard.axes import axes_settings_check

        # PROBEBENCH_AXES names declared axes only: a typo fails at start-up, not at the first plan
        axes_settings_check()
