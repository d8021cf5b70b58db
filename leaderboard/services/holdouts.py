"""The quarter's holdouts: one secret seed, one draw per pool, every drawn file sealed under the
data directory, and the commitment the cycle publishes before any run exists.

    holdouts_draw       draw the secret (``secrets.token_bytes(32)``); for every active task (and
                        every base model of an on-policy task) choose the pool
                        (``evaluator.data.pools.pool_choose``: the sealed pool, or the public one
                        and why), draw the holdout from it (``evaluator.data.holdouts.mint_holdout``,
                        avoiding the rows of earlier quarters' holdouts) and seal it; returns the
                        cycle's ``holdouts`` entries and the secret
    commitment_build    what is published while the cycle runs: the SHA-256 of the secret, and per
                        holdout the SHA-256 of its bytes and of its pool, the pool's kind and size

The secret and the rows stay private until the cycle completes; then
``leaderboard.selectors.cycles.reevaluation_reveal`` publishes them and anyone can check the draw
(``python -m evaluator verify-holdout QUARTER``).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.utils import timezone

from evaluator.data.holdouts import SCHEME, SECRET_BYTES, mint_holdout
from evaluator.data.pools import POOL_RATIO, Pool, forbidden_texts, holdout_size, pool_choose
from evaluator.data.registry.load import Registry
from leaderboard.models import ReevaluationCycle, Task, holdout_items
from leaderboard.sealed import holdout_write, sealing_key

log = logging.getLogger(__name__)
Cycle = ReevaluationCycle


def holdouts_draw(*, registry: Registry, cycle: ReevaluationCycle) -> tuple[dict[str, dict[str, Any]], bytes]:
    """Every active task's holdout of ``cycle`` drawn with a fresh secret and sealed; its entries
    (task → entry, an on-policy task's ``{"by_model": {model → entry}}``) and the secret.

    An on-policy task's labels are each base model's own behaviour, so it has one pool per model
    (``splits_by_model``): one holdout per model, drawn from that model's pool; a probe is measured
    on its own model's (``ReevaluationCycle.holdout_for``). A model without a pool gets none."""
    used: dict[tuple[str, str], set[str]] = defaultdict(set)
    for earlier in Cycle.objects.exclude(pk=cycle.pk).exclude(status=Cycle.Status.FAILED):
        for task_id, model, h in holdout_items(earlier.holdouts):
            used[(task_id, model)].update(h.get("ids", []))
    secret = secrets.token_bytes(SECRET_BYTES)
    key = sealing_key()
    holdouts: dict[str, dict[str, Any]] = {}
    for task in Task.objects.filter(status=Task.Status.ACTIVE).order_by("slug"):
        spec = registry.task(task.slug)
        if not spec.on_policy:
            holdouts[task.slug] = _draw(registry, cycle, task.slug, "", secret, used, key)
            continue
        by_model = {
            model: _draw(registry, cycle, task.slug, model, secret, used, key)
            for model, splits in sorted(spec.splits_by_model.items())
            if "holdout_pool" in splits
        }
        if by_model:
            holdouts[task.slug] = {"by_model": by_model}
        else:
            log.info("cycle %s: on-policy task %s has no model with a holdout pool", cycle.quarter, task.slug)
    return holdouts, secret


def _draw(
    registry: Registry,
    cycle: ReevaluationCycle,
    task_id: str,
    model: str,
    secret: bytes,
    used: dict[tuple[str, str], set[str]],
    key: bytes,
) -> dict[str, Any]:
    """Draw one holdout (a task's, or one base model's of an on-policy task), seal it, and return
    its cycle entry (private while the cycle runs: ``ids``, ``avoided_ids``, ``path``)."""
    pool: Pool = pool_choose(
        registry,
        task_id,
        model,
        data_dir=settings.DATA_DIR,
        key=key,
        sources_dir=settings.HOLDOUT_SOURCES_DIR,
        size=settings.HOLDOUT_SIZE,
        floor=settings.HOLDOUT_MIN_SIZE,
    )
    size = holdout_size(len(pool.rows), size=settings.HOLDOUT_SIZE, floor=settings.HOLDOUT_MIN_SIZE)
    pool_ids = {r["id"] for r in pool.rows}
    avoided = sorted(used[(task_id, model)] & pool_ids)  # only the pool's own rows change the draw
    h = mint_holdout(
        task_id=task_id,
        quarter=cycle.quarter,
        pool=pool.rows,
        secret=secret,
        model=model,
        used_ids=set(avoided),
        size=size,
        forbidden_texts=forbidden_texts(registry, pool),
    )
    notes = [pool.note] if pool.note else []
    if len(pool.rows) < POOL_RATIO * len(h.rows):
        notes.append(
            f"the pool holds {len(pool.rows)} rows, fewer than {POOL_RATIO}× this holdout's {len(h.rows)}"
        )
    entry: dict[str, Any] = {
        "path": holdout_write(cycle.quarter, task_id, model, h.to_bytes()),
        "rows": len(h.rows),
        "size": size,
        "sha256": h.sha256,
        "ids": h.ids,
        "avoided_ids": avoided,
        "reused_rows": h.reused_rows,
        "pool": pool.kind,
        "pool_sha256": pool.sha256,
        "pool_rows": len(pool.rows),
        "note": "; ".join(notes),
    }
    if pool.sealed_rows is not None:
        entry["sealed_pool_rows"] = pool.sealed_rows
    return entry


#: a holdout's fields in the commitment (``commitment_build``), besides its task and base model
COMMITTED_FIELDS = ("rows", "sha256", "pool", "pool_sha256", "pool_rows", "note")


def commitment_build(*, secret: bytes, holdouts: dict) -> dict[str, Any]:
    """What the cycle publishes before any run: the draw's scheme and sizes, the SHA-256 of the
    secret's 32 bytes, and per holdout the SHA-256 of its bytes and of its pool's."""
    return {
        "scheme": SCHEME,
        "seed_sha256": hashlib.sha256(secret).hexdigest(),
        "committed_at": timezone.now().isoformat(),
        "holdout_size": settings.HOLDOUT_SIZE,
        "min_size": settings.HOLDOUT_MIN_SIZE,
        "pool_ratio": POOL_RATIO,
        "holdouts": [
            {"task": task, "base_model": model, **{k: entry[k] for k in COMMITTED_FIELDS if k in entry}}
            for task, model, entry in holdout_items(holdouts)
        ],
    }
