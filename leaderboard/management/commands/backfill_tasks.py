from django.core.management.base import BaseCommand

from leaderboard.services.coverage import coverage_missing, coverage_start


class Command(BaseCommand):
    help = (
        "Score every active probe on the active tasks of its category it has not been measured on"
        " (a task added or refreshed since it was scored); its Score follows once the runs finish."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="list what is missing, plan nothing")

    def handle(self, *args, dry_run: bool = False, **options):
        missing = coverage_missing()
        for version, tasks in missing.items():
            self.stdout.write(f"{version.probe.slug} v{version.number}: {', '.join(t.slug for t in tasks)}")
        if dry_run:
            self.stdout.write(f"{len(missing)} probe(s) to backfill (dry run: nothing planned)")
            return
        runs = coverage_start()
        self.stdout.write(
            self.style.SUCCESS(f"{len(missing)} probe(s) to backfill: {len(runs)} run(s) queued")
        )
