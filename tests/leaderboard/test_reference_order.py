"""The reference probes are submitted eval-awareness references first, then one probe per category,
then the rest, so that every category shows a measured entry early (the score runs are queued in
submission order on the primary queue)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from evaluator.registry import CATEGORIES, EVAL_AWARENESS
from leaderboard.management.commands.install_reference_probes import submission_order

ROOT = Path(__file__).resolve().parents[2]


def test_eval_awareness_first_then_one_per_category_in_board_order_then_the_rest():
    entries = [
        {"slug": "refusal-a", "role": ""},
        {"slug": "halu-a", "role": ""},
        {"slug": "halu-b", "role": ""},
        {"slug": "ea-1", "role": EVAL_AWARENESS},
        {"slug": "refusal-b", "role": ""},
        {"slug": "deception-a", "role": ""},
    ]
    categories = {
        "refusal-a": "refusal",
        "refusal-b": "refusal",
        "halu-a": "hallucination",
        "halu-b": "hallucination",
        "ea-1": "eval_awareness",
        "deception-a": "deception",
    }
    order = [e["slug"] for e in submission_order(entries, categories)]
    assert order == ["ea-1", "halu-a", "deception-a", "refusal-a", "halu-b", "refusal-b"]


def test_the_committed_manifest_covers_every_category_before_any_second_probe():
    entries = yaml.safe_load((ROOT / "registry/reference_probes/manifest.yaml").read_text())["probes"]
    categories = {
        e["slug"]: json.loads((ROOT / e["path"] / "probe.json").read_text())["category"] for e in entries
    }
    order = submission_order(entries, categories)
    assert sorted(e["slug"] for e in order) == sorted(e["slug"] for e in entries)
    n_ea = sum(e.get("role") == EVAL_AWARENESS for e in entries)
    assert all(e.get("role") == EVAL_AWARENESS for e in order[:n_ea])
    others = [c for c in CATEGORIES if c != EVAL_AWARENESS]
    leaders = [categories[e["slug"]] for e in order[n_ea : n_ea + len(others)]]
    assert leaders == others  # every other category has a reference probe, in board order
    rest = [e["slug"] for e in order[n_ea + len(others) :]]
    assert rest == [e["slug"] for e in entries if e["slug"] in rest]  # manifest order kept
