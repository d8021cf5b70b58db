from django.core.management.base import BaseCommand

from leaderboard.artifacts import ORPHAN_MIN_AGE_S, artifacts_orphaned_remove


class Command(BaseCommand):
    help = (
        "Remove stored artifact files that no probe version references (an upload whose transaction"
        " failed after the file was written) and abandoned temporary files, older than --min-age-hours."
        " A file a row references is never removed."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--min-age-hours",
            type=float,
            default=ORPHAN_MIN_AGE_S / 3600,
            help="only files older than this (an upload still in flight is younger); default %(default)s",
        )

    def handle(self, *args, min_age_hours: float, **options):
        removed = artifacts_orphaned_remove(min_age_s=min_age_hours * 3600)
        for relpath in removed:
            self.stdout.write(f"removed {relpath}")
        self.stdout.write(self.style.SUCCESS(f"{len(removed)} orphaned file(s) removed"))
