"""The metric reliability table measured again when a quarterly cycle completes
(evaluator.commands.reliability), written to ``DATA_DIR/reliability/QUARTER.json``; the methodology page
shows the newest (leaderboard.selectors.reliability)."""

from __future__ import annotations

import json
import os
from typing import Any

from django.conf import settings
from django.utils import timezone

from evaluator.data.holdouts import quarter_validate
from leaderboard import runner
from leaderboard.selectors.reliability import reliability_dir


def reliability_measure(quarter: str) -> dict[str, Any]:
    """Measure the table on the worker's registry and cache and write it for ``quarter``
    (atomically: a reader sees the old file or the new one)."""
    from evaluator.commands.reliability import run_reliability

    quarter = quarter_validate(quarter)
    result = run_reliability(
        runner.registry(), cache_dir=settings.CACHE_DIR, device=settings.EVALUATION_DEVICE
    )
    result |= {"quarter": quarter, "measured_at": timezone.now().isoformat(), "command": f"cycle {quarter}"}
    directory = reliability_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{quarter}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return {"quarter": quarter, "flagged": result["flagged"], "path": str(path)}
