from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from leaderboard.errors import ServiceError
from leaderboard.models import Task
from leaderboard.services.reevaluation import reevaluation_start


class Command(BaseCommand):
    help = "Start the quarterly re-evaluation cycle for QUARTER (e.g. 2026Q4) as a staff user."

    def add_arguments(self, parser):
        parser.add_argument("quarter")
        parser.add_argument(
            "--as",
            dest="username",
            default=None,
            help="the staff user who triggers it (default: the first superuser)",
        )

    def handle(self, *args, quarter: str, username: str | None = None, **options):
        User = get_user_model()
        qs = User.objects.filter(is_staff=True)
        user = (
            qs.filter(username=username).first()
            if username
            else qs.filter(is_superuser=True).order_by("pk").first()
        )
        if user is None:
            raise CommandError("a staff user is needed: pass --as USERNAME (create one with createsuperuser)")
        try:
            cycle = reevaluation_start(quarter=quarter, by=user)
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        runs = cycle.runs.count()
        self.stdout.write(
            f"cycle {cycle.quarter} started by {user.username}: {len(cycle.holdouts)} holdout(s) minted,"
            f" {runs} run(s) queued"
        )
        self.stdout.write(
            f"  committed before any run: seed sha256 {cycle.commitment['seed_sha256']}"
            " (the seed and the rows are revealed when the cycle completes)"
        )
        for h in cycle.holdout_files():
            reused = f" ({h['reused_rows']} reused: the pool is spent)" if h.get("reused_rows") else ""
            name = f"{h['task']} on {h['base_model']}" if h["base_model"] else h["task"]
            pool = f"; {h['pool']} pool of {h['pool_rows']} rows, sha256 {h['pool_sha256']}"
            note = f" ({h['note']})" if h.get("note") else ""
            self.stdout.write(f"  {name}: {h['rows']} rows, sha256 {h['sha256']}{reused}{pool}{note}")
        for old in Task.objects.filter(
            status=Task.Status.ACTIVE, superseded_by__isnull=False, slug__in=cycle.holdouts
        ):
            if old.superseded_by_id in cycle.holdouts:
                self.stdout.write(
                    f"  {old.slug} runs side by side with {old.superseded_by_id};"
                    " it is superseded when this cycle completes"
                )
