"""The client's pure parts: the per-metric verdict, the protocol's tolerances, SLUG@vN, and that it
stays light (the HTTP paths are tested against a live server in tests/integration/test_client_*)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.commands.client.reproduce import (
    DEFAULT_TOLERANCES,
    numbers_compare,
    probe_spec_parse,
    protocol_tolerances,
)
from evaluator.commands.client.transport import ClientError

ROOT = Path(__file__).resolve().parents[2]


def board_detail(**task_overrides) -> dict:
    task = {
        "task": "cities-truth-v1",
        "auroc": 0.91,
        "auroc_ci": [0.85, 0.95],
        "auroc_ea": 0.88,
        "auroc_ds": 0.8,
        "ece": 0.1,
        "brier": 0.15,
        "recall_at_1pct_fpr": 0.25,
    } | task_overrides
    return {
        "version": {"reproduced": True},
        "tasks": [task],
        "score": {"measurements": {"auroc": 0.91, "ece": 0.1, "rho_ce": None, "latency_ms": 0.2}},
    }


def local_run(**metric_overrides) -> dict:
    metrics = {
        "auroc": 0.9105,
        "auroc_ci": [0.851, 0.949],
        "auroc_ea": 0.881,
        "auroc_ds": 0.8,
        "ece": 0.104,
        "brier": 0.152,
        "recall_at_1pct_fpr": 0.25,
    } | metric_overrides
    return {
        "tasks": {"cities-truth-v1": {"metrics": metrics}},
        "aggregate": {"auroc": 0.9105, "ece": 0.104, "rho_ce": None, "latency_ms": 9.0},
        "reproduction": {"reproduced": True},
    }


def verdicts(rows) -> dict:
    return {(r["task"], r["metric"]): r["verdict"] for r in rows}


def test_numbers_within_tolerance_agree_and_latency_is_never_judged():
    rows = numbers_compare(board_detail(), local_run(), DEFAULT_TOLERANCES)
    v = verdicts(rows)
    assert set(v.values()) == {"agree", "n/a"}
    assert v[("aggregate", "rho_ce")] == "n/a"  # imputed on both sides
    assert v[("aggregate", "reproduced")] == "agree"
    assert ("cities-truth-v1", "auroc_ci_hi") in v
    assert not any(metric == "latency_ms" for _, metric in v)


def test_a_number_outside_its_tolerance_or_measured_on_one_side_only_disagrees():
    rows = numbers_compare(board_detail(ece=0.2), local_run(auroc_ea=None), DEFAULT_TOLERANCES)
    bad = {k for k, verdict in verdicts(rows).items() if verdict == "disagree"}
    assert bad == {("cities-truth-v1", "ece"), ("cities-truth-v1", "auroc_ea")}
    ece = next(r for r in rows if r["metric"] == "ece" and r["task"] != "aggregate")
    assert ece["diff"] == pytest.approx(0.096) and ece["tolerance"] == 0.005


def test_a_flipped_reproduction_verdict_disagrees():
    local = local_run()
    local["reproduction"]["reproduced"] = False
    assert verdicts(numbers_compare(board_detail(), local, DEFAULT_TOLERANCES))[
        ("aggregate", "reproduced")
    ] == ("disagree")


def test_tolerances_come_from_the_protocol_file_when_there_is_one(tmp_path):
    folder = tmp_path / "registry" / "protocols"
    folder.mkdir(parents=True)
    (folder / "p1.yaml").write_text("id: p1\ntolerances:\n  auroc: 0.001\n  ece: 0.01\n")
    protocol, tolerances = protocol_tolerances(tmp_path, "p1")
    assert protocol == "p1"
    assert tolerances["auroc"] == 0.001 and tolerances["ece"] == 0.01
    assert tolerances["auroc_ea"] == tolerances["auroc_ds"] == 0.001  # as the protocol's AUROC
    assert tolerances["brier"] == 0.01  # as its ECE
    assert tolerances["rho_ce"] == DEFAULT_TOLERANCES["rho_ce"]
    assert protocol_tolerances(tmp_path / "elsewhere", None) == (None, DEFAULT_TOLERANCES)


def test_probe_argument_names_a_slug_and_optionally_a_version():
    assert probe_spec_parse("my-probe") == ("my-probe", None)
    assert probe_spec_parse("my-probe@v3") == ("my-probe", 3)
    assert probe_spec_parse("my-probe@3") == ("my-probe", 3)
    with pytest.raises(ClientError, match="SLUG@vN"):
        probe_spec_parse("my-probe@latest")


def test_the_client_loads_neither_django_nor_torch():
    code = (
        "import sys, evaluator.commands.client.reproduce, evaluator.commands.client.submit, evaluator.commands.cli;"
        " evaluator.commands.cli.build_parser();"
        " print(','.join(m for m in ('django', 'torch', 'transformers', 'sklearn') if m in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
