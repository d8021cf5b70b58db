"""A completed cycle's reveal checked against its commitment (what ``verify-holdout`` runs).

The reveal (``GET /api/v1/reevaluations/<quarter>/reveal``) holds the secret seed, the commitment
as it was published before any run, and per holdout its rows and what a redraw needs (its pool's
kind and SHA-256, the size asked, the earlier quarters' rows avoided). The checks, each named:

- ``seed``: SHA-256 of the seed's 32 bytes equals the committed ``seed_sha256``;
- ``holdout``: the revealed rows, written as canonical JSON lines, hash to the committed SHA-256
  (and every committed holdout is revealed, every revealed one was committed);
- ``pool``: the pool rebuilt here (the sealed pool from the pinned source archives, or the
  committed file) hashes to the committed ``pool_sha256``;
- ``draw``: drawing again from that pool with the revealed seed gives exactly the revealed rows.

A check this checkout cannot make (no source archives, a task it does not know) is ``skip``, with
the reason; only a ``fail`` makes the verdict fail. The document comes from a server or a file,
so it is read as untrusted: every field's type is checked and a malformed one named.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaluator.data.holdouts import SCHEME, SECRET_BYTES, mint_holdout, quarter_validate, rows_to_bytes
from evaluator.errors import EvaluatorError

HEX64 = re.compile(r"[0-9a-f]{64}")
PASS, FAIL, SKIP = "pass", "fail", "skip"


class RevealError(EvaluatorError):
    """The reveal (or a saved commitment) is not a document this check can read."""


@dataclass(frozen=True)
class RevealedHoldout:
    task: str
    model: str
    pool: str
    pool_sha256: str
    size: int
    sha256: str
    rows: list[dict]
    avoided_ids: list[str]

    @property
    def name(self) -> str:
        return f"{self.task} on {self.model}" if self.model else self.task


@dataclass(frozen=True)
class Reveal:
    quarter: str
    seed: bytes
    commitment: dict[str, Any]
    holdouts: list[RevealedHoldout]


@dataclass(frozen=True)
class Check:
    check: str  # seed, holdout, pool, draw
    target: str  # the holdout ("task" or "task on model"), "" for the seed
    status: str  # pass, fail, skip
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "target": self.target, "status": self.status, "detail": self.detail}


@dataclass(frozen=True)
class PoolFound:
    """A pool rebuilt by the checker: its rows, its SHA-256 and the texts a draw from it avoids;
    or, with ``skip``, why it could not be."""

    rows: list[dict] = field(default_factory=list)
    sha256: str = ""
    forbidden_texts: set[str] = field(default_factory=set)
    skip: str = ""


# --------------------------------------------------------------------------- reading


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise RevealError(f"{what} is not a string")
    return value


def _hex64(value: Any, what: str) -> str:
    if not isinstance(value, str) or not HEX64.fullmatch(value):
        raise RevealError(f"{what} is not a SHA-256 (64 lowercase hex digits)")
    return value


def _holdout_parse(raw: Any, i: int) -> RevealedHoldout:
    where = f"holdouts[{i}]"
    if not isinstance(raw, dict):
        raise RevealError(f"{where} is not an object")
    rows = raw.get("rows")
    if not isinstance(rows, list) or not all(
        isinstance(r, dict) and isinstance(r.get("id"), str) and r.get("label") in (0, 1) for r in rows
    ):
        raise RevealError(f"{where}.rows is not a list of rows (objects with an id and a label 0 or 1)")
    avoided = raw.get("avoided_ids", [])
    if not isinstance(avoided, list) or not all(isinstance(x, str) for x in avoided):
        raise RevealError(f"{where}.avoided_ids is not a list of ids")
    size = raw.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 2:
        raise RevealError(f"{where}.size is not a whole number of at least 2")
    pool = _str(raw.get("pool"), f"{where}.pool")
    if pool not in ("sealed", "public"):
        raise RevealError(f"{where}.pool is {pool!r}, not sealed or public")
    return RevealedHoldout(
        task=_str(raw.get("task"), f"{where}.task"),
        model=_str(raw.get("base_model", ""), f"{where}.base_model"),
        pool=pool,
        pool_sha256=_hex64(raw.get("pool_sha256"), f"{where}.pool_sha256"),
        size=size,
        sha256=_hex64(raw.get("sha256"), f"{where}.sha256"),
        rows=rows,
        avoided_ids=avoided,
    )


def commitment_parse(raw: Any, what: str = "the commitment") -> dict[str, Any]:
    """A commitment (or a saved copy of a cycle's API answer, which holds one under
    ``commitment``), checked for the fields the checks read."""
    if isinstance(raw, dict) and isinstance(raw.get("commitment"), dict) and "seed_sha256" not in raw:
        raw = raw["commitment"]
    if not isinstance(raw, dict) or not raw:
        raise RevealError(f"{what} is not a commitment object (a cycle drawn before commitments has none)")
    _hex64(raw.get("seed_sha256"), f"{what}: seed_sha256")
    scheme = raw.get("scheme")
    if scheme != SCHEME:
        raise RevealError(f"{what}: scheme {scheme!r} is not {SCHEME!r}, the one this checkout draws with")
    entries = raw.get("holdouts")
    if not isinstance(entries, list):
        raise RevealError(f"{what}: holdouts is not a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise RevealError(f"{what}: holdouts[{i}] is not an object")
        _str(entry.get("task"), f"{what}: holdouts[{i}].task")
        _str(entry.get("base_model", ""), f"{what}: holdouts[{i}].base_model")
        _hex64(entry.get("sha256"), f"{what}: holdouts[{i}].sha256")
        _hex64(entry.get("pool_sha256"), f"{what}: holdouts[{i}].pool_sha256")
    return raw


def reveal_parse(doc: Any, *, quarter: str) -> Reveal:
    """The reveal document of ``quarter``; RevealError naming the first malformed field."""
    quarter_validate(quarter)
    if not isinstance(doc, dict):
        raise RevealError("the reveal is not a JSON object")
    if doc.get("quarter") != quarter:
        raise RevealError(f"the reveal is of quarter {doc.get('quarter')!r}, not {quarter}")
    seed_hex = doc.get("seed")
    if not isinstance(seed_hex, str) or not HEX64.fullmatch(seed_hex):
        raise RevealError(f"seed is not {SECRET_BYTES} bytes as 64 lowercase hex digits")
    holdouts = doc.get("holdouts")
    if not isinstance(holdouts, list):
        raise RevealError("holdouts is not a list")
    return Reveal(
        quarter=quarter,
        seed=bytes.fromhex(seed_hex),
        commitment=commitment_parse(doc.get("commitment")),
        holdouts=[_holdout_parse(raw, i) for i, raw in enumerate(holdouts)],
    )


# --------------------------------------------------------------------------- checking


def reveal_check(
    reveal: Reveal,
    *,
    pool_for: Callable[[RevealedHoldout], PoolFound],
    commitment: dict[str, Any] | None = None,
) -> list[Check]:
    """Every check of the reveal against ``commitment`` (default: the one the reveal carries).
    ``pool_for`` rebuilds a holdout's pool here (or says why it cannot)."""
    commitment = commitment if commitment is not None else reveal.commitment
    checks = [_seed_check(reveal.seed, commitment)]
    committed = {(e["task"], e.get("base_model", "")): e for e in commitment["holdouts"]}
    revealed = {(h.task, h.model) for h in reveal.holdouts}
    for task, model in sorted(set(committed) - revealed):
        name = f"{task} on {model}" if model else task
        checks.append(Check("holdout", name, FAIL, "committed before the runs but not revealed"))
    for h in reveal.holdouts:
        checks += _holdout_checks(reveal, h, committed.get((h.task, h.model)), pool_for)
    return checks


def _seed_check(seed: bytes, commitment: dict[str, Any]) -> Check:
    got = hashlib.sha256(seed).hexdigest()
    if got == commitment["seed_sha256"]:
        return Check("seed", "", PASS, f"SHA-256 of the revealed seed is the committed {got}")
    return Check(
        "seed",
        "",
        FAIL,
        f"SHA-256 of the revealed seed is {got}, the commitment says {commitment['seed_sha256']}",
    )


def _holdout_checks(
    reveal: Reveal, h: RevealedHoldout, entry: dict | None, pool_for: Callable[[RevealedHoldout], PoolFound]
) -> list[Check]:
    if entry is None:
        return [Check("holdout", h.name, FAIL, "revealed but not in the commitment")]
    out = []
    got = hashlib.sha256(rows_to_bytes(h.rows)).hexdigest()
    if got == entry["sha256"]:
        out.append(Check("holdout", h.name, PASS, f"its {len(h.rows)} rows hash to the committed {got}"))
    else:
        out.append(
            Check(
                "holdout",
                h.name,
                FAIL,
                f"its {len(h.rows)} rows hash to {got}, the commitment says {entry['sha256']}",
            )
        )
    if h.pool_sha256 != entry["pool_sha256"]:
        out.append(
            Check(
                "pool",
                h.name,
                FAIL,
                f"the reveal names pool {h.pool_sha256}, the commitment {entry['pool_sha256']}",
            )
        )
        return out
    pool = pool_for(h)
    if pool.skip:
        return out + [Check("pool", h.name, SKIP, pool.skip), Check("draw", h.name, SKIP, pool.skip)]
    if pool.sha256 != entry["pool_sha256"]:
        out.append(
            Check(
                "pool",
                h.name,
                FAIL,
                f"the {h.pool} pool rebuilt here ({len(pool.rows)} rows) hashes to {pool.sha256},"
                f" the commitment says {entry['pool_sha256']}",
            )
        )
        return out + [Check("draw", h.name, SKIP, "not drawn again: the pool rebuilt here is another one")]
    out.append(
        Check(
            "pool",
            h.name,
            PASS,
            f"the {h.pool} pool rebuilt here ({len(pool.rows)} rows) is the committed one",
        )
    )
    out.append(_draw_check(reveal, h, pool))
    return out


def _draw_check(reveal: Reveal, h: RevealedHoldout, pool: PoolFound) -> Check:
    try:
        again = mint_holdout(
            task_id=h.task,
            quarter=reveal.quarter,
            pool=pool.rows,
            secret=reveal.seed,
            model=h.model,
            used_ids=set(h.avoided_ids),
            size=h.size,
            forbidden_texts=pool.forbidden_texts,
        )
    except EvaluatorError as exc:
        return Check("draw", h.name, FAIL, f"drawing again with the revealed seed fails: {exc}")
    if again.to_bytes() == rows_to_bytes(h.rows):
        return Check(
            "draw", h.name, PASS, "drawing again with the revealed seed gives exactly the revealed rows"
        )
    revealed_ids, drawn_ids = {r["id"] for r in h.rows}, set(again.ids)
    return Check(
        "draw",
        h.name,
        FAIL,
        f"drawing again with the revealed seed gives other rows ({len(revealed_ids - drawn_ids)} revealed row(s)"
        f" not drawn, {len(drawn_ids - revealed_ids)} drawn row(s) not revealed)",
    )
