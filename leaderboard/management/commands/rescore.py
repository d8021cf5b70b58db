"""Recompute every board entry's Score from its stored runs (no model is run)."""

from django.core.management.base import BaseCommand, CommandError

from evaluator.errors import RegistryError
from leaderboard.models import Category
from leaderboard.registry_sync import registry_sync
from leaderboard.services.coverage import rescore_category


class Command(BaseCommand):
    help = (
        "Sync the registry, then recompute the Score of the latest scored version of every probe from"
        " its stored per-example scores (after a change of how a stored number is derived, e.g. the"
        " text-baseline panel the lift over text is measured against). No forward is run."
    )

    def add_arguments(self, parser):
        parser.add_argument("--category", action="append", default=None, help="category slug (repeatable)")

    def handle(self, *args, category=None, **options):
        try:
            registry_sync()
        except RegistryError as exc:
            raise CommandError(str(exc)) from None
        known = list(Category.objects.values_list("slug", flat=True))
        unknown = sorted(set(category or []) - set(known))
        if unknown:
            raise CommandError(f"unknown category {', '.join(unknown)}; accepted: {', '.join(known)}")
        total = 0
        for slug in category or known:
            for change in rescore_category(slug, force=True):
                total += 1
                self.stdout.write(
                    f"{change['probe']} v{change['version']}: ProbeScore {change['total_before']:.4f} →"
                    f" {change['total_after']:.4f}, lift over text {_n(change['lift_over_text_before'])} →"
                    f" {_n(change['lift_over_text_after'])}"
                )
        self.stdout.write(self.style.SUCCESS(f"rescored {total} entr{'y' if total == 1 else 'ies'}"))


def _n(value) -> str:
    return "—" if value is None else f"{value:+.4f}"
