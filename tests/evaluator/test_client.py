"""The client's pure parts: the per-metric verdict, the protocol's tolerances, SLUG@vN, what
``reproduce`` prints (a table on a terminal, the JSON alone with --json) and that it stays light
(the HTTP paths are tested against a live server in tests/integration/test_client_*)."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.commands import cli
from evaluator.commands.client import reproduce
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


def test_a_number_outside_its_tolerance_disagrees():
    rows = numbers_compare(board_detail(ece=0.2), local_run(), DEFAULT_TOLERANCES)
    bad = {k for k, verdict in verdicts(rows).items() if verdict == "disagree"}
    assert bad == {("cities-truth-v1", "ece")}
    ece = next(r for r in rows if r["metric"] == "ece" and r["task"] != "aggregate")
    assert ece["diff"] == pytest.approx(0.096) and ece["tolerance"] == 0.005


def test_a_number_on_one_side_only_is_not_compared_and_says_why():
    detail = board_detail(auroc_ds=None)
    detail["pending_axes"] = [{"axis": "transfer", "done": 1, "total": 2, "label": "transfer 1/2"}]
    local = local_run(auroc_ea=None)
    local["aggregate"]["rho_ce"] = 0.41  # measured locally while the board's transfer is pending
    rows = {(r["task"], r["metric"]): r for r in numbers_compare(detail, local, DEFAULT_TOLERANCES)}
    assert not any(r["verdict"] == "disagree" for r in rows.values())
    rho = rows[("aggregate", "rho_ce")]
    assert rho["verdict"] == "not compared" and rho["reason"] == "pending on the board (transfer 1/2)"
    assert rows[("cities-truth-v1", "auroc_ds")]["reason"] == "not on the board"
    assert rows[("cities-truth-v1", "auroc_ea")]["reason"] == "not measured locally"
    # with the local re-fit skipped (reproduce does while transfer is pending), still said so
    local["aggregate"]["rho_ce"] = None
    rows = {(r["task"], r["metric"]): r for r in numbers_compare(detail, local, DEFAULT_TOLERANCES)}
    assert rows[("aggregate", "rho_ce")]["verdict"] == "not compared"


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


# --------------------------------------------------------------------------- what reproduce prints


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def reproduced(monkeypatch):
    """``reproduce`` against a board whose transfer runs are pending (ρ_CE a default there), with
    the download, the split check and the local ``evaluate`` run replaced: the local run measures
    ρ_CE as the user's did. Returns the argv the local run got."""
    detail = board_detail()
    detail |= {
        "name": "cities probe",
        "category": "truthfulness",
        "base_model": "smollm2-135m-instruct",
        "spec": "v0.0.3",
        "transfer": [{"model": "gemma-3-270m", "name": "Gemma", "pearson": None}],
        "pending_axes": [{"axis": "transfer", "done": 0, "total": 1, "label": "transfer pending"}],
    }
    detail["version"] |= {"number": 1, "artifact_sha256": "ab" * 32}
    local = local_run()
    local["aggregate"]["rho_ce"] = 0.37
    local["probe_score"] = {"total": 0.5}
    seen: list[list[str]] = []
    monkeypatch.setattr(reproduce, "probe_download", lambda **kw: detail)
    monkeypatch.setattr(reproduce, "splits_check", lambda **kw: None)
    monkeypatch.setattr(reproduce, "_evaluate_locally", lambda argv: seen.append(argv) or local)
    return seen


ARGS = ["reproduce", "--server", "http://127.0.0.1:9", "--probe", "cities-probe@v1"]


def test_reproduce_agrees_when_a_pending_number_is_the_only_difference(reproduced, capsys):
    assert cli.main([*ARGS, "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)  # the JSON alone on stdout
    assert report["verdict"] == "agree" and report["disagreements"] == []
    assert report["not_compared"] == ["rho_ce on aggregate: pending on the board (transfer pending)"]
    assert "verdict" not in err and "error" not in err  # --json: no table beside it
    assert "--no-transfer" in reproduced[0]  # nothing to compare a local re-fit with


def test_a_transfer_said_to_be_pending_is_still_re_fitted_where_the_board_shows_a_rho_ce(tmp_path):
    args = argparse.Namespace(registry=None, cache_dir=None, device=None)
    detail = board_detail() | {
        "spec": "v0.0.3",
        "transfer": [{"model": "gemma-3-270m", "pearson": 0.5}],
        "pending_axes": [{"axis": "transfer", "done": 0, "total": 1, "label": "transfer pending"}],
    }
    argv, _ = reproduce._evaluate_argv(args, detail=detail, probe_dir=tmp_path, protocol=None)
    assert "--no-transfer" in argv  # the board shows no ρ_CE yet
    detail["score"]["measurements"]["rho_ce"] = 0.5
    argv, _ = reproduce._evaluate_argv(args, detail=detail, probe_dir=tmp_path, protocol=None)
    assert "--transfer-targets=gemma-3-270m" in argv  # a number shown is a number checked


def test_reproduce_prints_a_table_with_the_latency_on_a_terminal(reproduced, capsys, monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert cli.main(ARGS) == 0
    table = terminal.getvalue()
    with pytest.raises(json.JSONDecodeError):
        json.loads(table)
    lines = table.splitlines()
    assert lines[0].split() == ["task", "metric", "board", "local", "verdict"]
    latency = next(line for line in lines if "latency_ms" in line)
    assert "0.2 ms" in latency and "9 ms" in latency and "not judged" in latency
    rho = next(line for line in lines if " rho_ce " in line)
    assert rho.endswith("not compared: pending on the board (transfer pending)")
    assert lines[-1].startswith("verdict: agree: cities-probe@v1 on http://127.0.0.1:9")
    assert capsys.readouterr().err == ""


def test_reproduce_into_a_pipe_prints_the_json_and_the_table_on_stderr(reproduced, capsys):
    assert cli.main(ARGS) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["verdict"] == "agree"
    assert "not judged" in err and "verdict: agree" in err


def test_reproduce_still_exits_1_on_a_disagreement(reproduced, capsys, monkeypatch):
    local = local_run(ece=0.3)
    monkeypatch.setattr(reproduce, "_evaluate_locally", lambda argv: local)
    assert cli.main([*ARGS, "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["verdict"] == "disagree"
    assert [line for line in err.splitlines() if line.startswith("error: ")] == [
        "error: the board and the local run disagree: ece on cities-truth-v1"
        " (board 0.1, local 0.3, tolerance 0.005)"
    ]
