"""Check a result bundle and import its entries: nothing is written unless every check passes."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluator.errors import EvaluatorError
from leaderboard.errors import ServiceError
from leaderboard.services.bundles import bundle_import


class Command(BaseCommand):
    help = (
        "Verify a bundle's Ed25519 signature (by this board's key, a key in registry/keys, or --key) and"
        " every part's SHA-256, check that this board has its tasks, splits, models and protocols as it"
        " measured them, then import every entry not already here, each Score recomputed from the"
        " published per-example scores. Any failure refuses the whole bundle, naming what failed."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument(
            "--key", type=Path, action="append", default=[], help="a trusted public key (PEM)"
        )

    def handle(self, *args, path: Path, key: list[Path], **options):
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            report = bundle_import(path, extra_keys=[k.read_bytes() for k in key])
        except (EvaluatorError, ServiceError, OSError) as exc:
            raise CommandError(str(exc)) from None
        for probe, specs in sorted(report["differs"].items()):
            for spec, d in sorted(specs.items()):
                self.stderr.write(
                    f"{probe}: ProbeScore under {spec} recomputed here {d['recomputed']:.6f},"
                    f" published {d['published']:.6f}"
                )
        self.stdout.write(
            self.style.SUCCESS(
                f"bundle {report['bundle'][:12]}: imported {len(report['imported'])} entries"
                f" ({len(report['already_here'])} already here, {len(report['differs'])} whose total differs)"
            )
        )
