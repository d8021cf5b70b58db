"""The result bundles this board published or imported, for the API and the pages
(``leaderboard.services.bundles`` writes them)."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

from leaderboard.models import ResultBundle

BUNDLE_ID = re.compile(r"^[0-9a-f]{64}$")


def bundles_list() -> list[ResultBundle]:
    """Every bundle, newest first."""
    return list(ResultBundle.objects.order_by("-created_at", "id"))


def bundle_file_path(bundle_id: str) -> Path | None:
    """The file of a bundle this board published and kept (None for any other id)."""
    if not BUNDLE_ID.match(bundle_id or ""):
        return None
    row = ResultBundle.objects.filter(id=bundle_id, role=ResultBundle.Role.PUBLISHED).exclude(path="").first()
    if row is None:
        return None
    root = (Path(settings.DATA_DIR) / "bundles").resolve()
    path = (root / row.path).resolve()
    return path if path.is_relative_to(root) and path.is_file() else None
