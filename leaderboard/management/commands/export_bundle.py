"""Write the board's public entries to one signed result bundle (a completed quarterly cycle
publishes one too)."""

import re
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluator.errors import EvaluatorError
from leaderboard.errors import ServiceError
from leaderboard.services.bundles import bundle_export


class Command(BaseCommand):
    help = (
        "Write every public entry (artifact, metadata, every run with its per-example scores) to a bundle"
        " signed with the board's Ed25519 key: at --out, or DATA_DIR/bundles/<id>.tar (then listed at"
        " /api/v1/bundles)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, default=None, help="where to write the bundle file")
        parser.add_argument(
            "--commit",
            default="",
            help="the commit the entries were measured at (default: this checkout's HEAD)",
        )

    def handle(self, *args, out=None, commit="", **options):
        if commit and not re.fullmatch(r"[0-9a-f]{7,40}", commit):
            raise CommandError(
                f"--commit {commit[:50]!r}: a git commit (7 to 40 lower-case hex digits) expected"
            )
        try:
            row = bundle_export(out=out, commit=commit)
        except (EvaluatorError, ServiceError) as exc:
            raise CommandError(str(exc)) from None
        where = out or f"DATA_DIR/bundles/{row.path}"
        self.stdout.write(
            self.style.SUCCESS(
                f"bundle {row.id}: {row.entries} entries, {row.bytes} bytes, signed by key {row.signer_fingerprint},"
                f" written to {where}"
            )
        )
