"""Write a quarter's per-example bulk export (normally written when the quarter's cycle completes)."""

from django.core.management.base import BaseCommand, CommandError

from evaluator.errors import EvaluatorError
from leaderboard.services.exports import examples_export_write


class Command(BaseCommand):
    help = (
        "Write <DATA_DIR>/exports/<quarter>/examples.jsonl.gz: every public entry's per-row scores on"
        " the public splits (train, test, distshift), with its manifest."
    )

    def add_arguments(self, parser):
        parser.add_argument("--quarter", required=True, help="e.g. 2026Q4")

    def handle(self, *args, quarter: str, **options):
        try:
            manifest = examples_export_write(quarter)
        except EvaluatorError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"{quarter}: {manifest['rows']} rows of {manifest['entries']} entries, {manifest['bytes']} bytes,"
                f" sha256 {manifest['sha256']}"
            )
        )
