"""``python -m evaluator evaluate`` prints a short summary table on a terminal and its JSON when
piped or given ``--json`` (scripts that read its stdout keep the JSON)."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys

import pytest

from evaluator.commands.cli import build_parser, wants_summary
from evaluator.metrics.summary import evaluation_summary
from tests.evaluator.conftest import PROJECT_ROOT, SMOLLM, TASK


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_summary_is_for_a_terminal_without_json():
    parser = build_parser()
    plain = parser.parse_args(["evaluate", "--probe", "p"])
    asked = parser.parse_args(["evaluate", "--probe", "p", "--json"])
    assert wants_summary(plain, Terminal()) is True
    assert wants_summary(plain, io.StringIO()) is False  # piped: JSON
    assert wants_summary(asked, Terminal()) is False  # --json: JSON
    other = parser.parse_args(["score", "--components", "c.json"])
    assert wants_summary(other, Terminal()) is False  # a command without a summary keeps its JSON


RESULT = {
    "probe": {"name": "capitals LR", "base_model": SMOLLM, "layer": 15},
    "model": {"id": SMOLLM},
    "protocol": "p1",
    "tasks": {
        TASK: {
            "metrics": {
                "n_test": 28,
                "auroc": 0.9617,
                "auroc_ci": [0.9, 1.0],
                "auroc_ea": None,
                "auroc_ea_status": "imputed",
                "auroc_ds": 0.81,
                "auroc_ds_imputed": False,
                "ece": 0.0812,
                "recall_at_1pct_fpr": 0.5,
            }
        }
    },
    "aggregate": {"n_tasks": 1, "auroc": 0.9617, "ece": 0.0812, "brier": 0.1, "latency_ms": 0.0123},
    "imputed": {"auroc_ea": "no eval-awareness reference probe for this base model"},
    "probe_score": {
        "spec": "v0.0.1",
        "total": 0.8123,
        "measured_total": 0.8311,
        "components": {
            "auroc": {
                "value": 0.9617,
                "weight": 0.3,
                "contribution": 0.2885,
                "imputed": False,
                "raw": 0.9617,
            },
            "auroc_ea": {
                "value": 0.8174,
                "weight": 0.2,
                "contribution": 0.1635,
                "imputed": True,
                "raw": None,
            },
            "latency": {"value": 1.0, "weight": 0.1, "contribution": 0.1, "imputed": False, "raw": 0.0123},
        },
    },
    "reproduction": {"reproduced": True},
    "notes": ["a note"],
}


def test_the_summary_shows_tasks_components_and_the_probescore():
    text = evaluation_summary(RESULT)
    lines = text.splitlines()
    assert lines[0].startswith("capitals LR · smollm2-135m-instruct · layer 15 · protocol p1")
    task_line = next(line for line in lines if line.startswith(TASK))
    assert task_line.split() == [TASK, "28", "0.962", "[0.90,", "1.00]", "imputed", "0.810", "0.081", "0.500"]
    assert any(line.startswith("AUROC-EA*") and "imputed" in line for line in lines)
    assert any(line.startswith("Latency") and "0.0123 ms" in line for line in lines)
    assert "ProbeScore 0.812  (measured components only: 0.831)" in lines
    assert "* AUROC-EA imputed: no eval-awareness reference probe for this base model" in lines
    assert "note: a note" in lines and "recipe reproduced" in text
    assert len(lines) < 40


def on_a_terminal(cmd: list[str], *, env: dict, cwd, timeout: float = 300) -> tuple[int, str]:
    """Run ``cmd`` with its stdout on a pseudo-terminal; (exit status, what it printed there)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        cmd, stdout=slave, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env, cwd=cwd
    )
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                proc.kill()
                raise AssertionError(f"no output for {timeout} s")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.model
def test_evaluate_prints_a_table_on_a_terminal_and_json_with_json(tiny_root, cache_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    common = [
        "--registry",
        str(tiny_root),
        "--cache-dir",
        str(cache_dir),
        "--device",
        "cpu",
        "--dtype",
        "float32",
    ]
    train = subprocess.run(
        [sys.executable, "-m", "evaluator", "train", "--task", TASK, "--model", SMOLLM, "--layer", "12",
         "--method", "diff_of_means", "--out", str(tmp_path / "p"), *common],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr
    evaluate = [sys.executable, "-m", "evaluator", "evaluate", "--probe", str(tmp_path / "p"), "--tasks", TASK,
                "--no-transfer", "--no-reproduce", "--latency-reps", "100", *common]  # fmt: skip
    status, shown = on_a_terminal(evaluate, env=env, cwd=tmp_path)
    assert status == 0, shown
    assert not shown.lstrip().startswith("{")
    assert any(line.startswith(TASK) for line in shown.splitlines())
    assert "ProbeScore " in shown and "add --json" in shown
    status, shown = on_a_terminal([*evaluate, "--json"], env=env, cwd=tmp_path)
    assert status == 0, shown
    out = json.loads(shown)
    assert out["tasks"][TASK]["metrics"]["auroc"] > 0.8
    # the table shows the JSON's numbers
    table = evaluation_summary(out)
    assert f"ProbeScore {out['probe_score']['total']:.3f}" in table
