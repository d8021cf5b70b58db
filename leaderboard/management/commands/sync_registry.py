from django.core.management.base import BaseCommand, CommandError

from evaluator.errors import RegistryError
from leaderboard.registry_sync import registry_sync
from leaderboard.services.coverage import coverage_missing


class Command(BaseCommand):
    help = "Mirror tasks.yaml and registry/ into the database (idempotent; verifies split hashes)."

    def add_arguments(self, parser):
        parser.add_argument("--no-verify", action="store_true", help="skip re-hashing split files")

    def handle(self, *args, no_verify: bool = False, **options):
        try:
            report = registry_sync(verify_hashes=not no_verify)
        except RegistryError as exc:
            raise CommandError(str(exc)) from None
        for line in report.created:
            self.stdout.write(f"created {line}")
        for line in report.updated:
            self.stdout.write(f"updated {line}")
        for line in report.notes:
            self.stdout.write(self.style.WARNING(f"note: {line}"))
        missing = coverage_missing()
        if missing:
            tasks = sorted({t.slug for ts in missing.values() for t in ts})
            self.stdout.write(
                self.style.WARNING(
                    f"note: {len(missing)} scored probe(s) are not measured on active task(s)"
                    f" {', '.join(tasks)}: `python manage.py backfill_tasks` scores them there"
                    " (the next quarterly cycle does it too)"
                )
            )
        self.stdout.write(self.style.SUCCESS(f"registry in sync: {report.changed} change(s)"))
