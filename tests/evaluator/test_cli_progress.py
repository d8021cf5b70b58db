"""The progress of ``train`` and ``evaluate`` (minutes each): on stderr only, a bar on a terminal
and one line per split harvested anywhere else (a log, a pipe), never in the JSON on stdout."""

from __future__ import annotations

import io
import json
import sys

from evaluator.commands import cli, train_cli
from evaluator.commands.train_cli import ProgressBar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def evaluate_steps(progress) -> None:
    """The steps ``evaluate`` reports on one task: the model loaded, train harvested (a start and
    each batch), test read from the cache, the reference probe's test rows harvested, latency."""
    progress(0.0, "cities-v1/train load model")
    for done in (0.0, 0.1, 0.2):
        progress(0.05 + done, "cities-v1/train harvest")
    progress(0.3, "cities-v1/train scored")
    progress(0.4, "cities-v1/test harvest")
    progress(0.5, "cities-v1/test scored")
    progress(0.6, "cities-v1/test reference harvest")
    progress(0.8, "cities-v1/test reference harvest")
    progress(0.9, "latency")
    progress(1.0, "done")


def test_off_a_terminal_each_split_harvested_is_one_line():
    log = io.StringIO()
    bar = ProgressBar("evaluate", stream=log)
    evaluate_steps(bar)
    bar.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith("evaluate [ 25%] cities-v1/train: harvested in ")
    assert lines[0].endswith(" s")
    assert lines[1] == "evaluate [ 40%] cities-v1/test: read from the cache"
    assert lines[2].startswith("evaluate [ 80%] cities-v1/test reference: harvested in ")


def test_a_split_harvested_last_is_reported_when_the_bar_closes():
    log = io.StringIO()
    bar = ProgressBar("train logistic_regression", stream=log)
    bar(0.0, "cities-v1/train harvest")
    bar(0.8, "cities-v1/train harvest")
    bar(0.8, "cities-v1/test harvest")
    bar.close()
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("train logistic_regression [ 80%] cities-v1/train: harvested in ")
    assert lines[1] == "train logistic_regression [ 80%] cities-v1/test: read from the cache"


def test_on_a_terminal_a_bar_shows_the_split_being_harvested():
    terminal = Terminal()  # a terminal that reports no size: the bar is drawn 80 columns wide
    bar = ProgressBar("evaluate", stream=terminal)
    assert bar.bar is not None
    bar.bar.mininterval = 0  # redraw on every step (tqdm waits 0.1 s between redraws)
    evaluate_steps(bar)
    bar.close()
    drawn = terminal.getvalue()
    assert "\r" in drawn and "cities-v1/train harvest" in drawn and "%|" in drawn
    assert "harvested in" not in drawn  # the lines are for logs only


class Evaluation:
    """What ``evaluate_probe`` returns, as far as the command reads it."""

    protocol = "p2"

    def to_dict(self, *, include_examples: bool = False) -> dict:
        return {"aggregate": {"auroc": 0.9}, "notes": [], "examples": include_examples}


def test_evaluate_prints_its_progress_on_stderr_and_the_json_alone_on_stdout(monkeypatch, capsys, tmp_path):
    def evaluate_probe(probe, **kwargs):
        evaluate_steps(kwargs["progress"])
        return Evaluation()

    monkeypatch.setattr(train_cli, "evaluate_probe", evaluate_probe)
    code = cli.main(["evaluate", "--probe", str(tmp_path), "--no-reference-probe", "--json"])
    assert code == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["aggregate"] == {"auroc": 0.9}
    assert "harvest" not in out
    assert [line.split("]")[1].split(":")[0] for line in err.splitlines()] == [
        " cities-v1/train",
        " cities-v1/test",
        " cities-v1/test reference",
    ]


def test_the_bar_uses_stderr_by_default(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    bar = ProgressBar("evaluate")
    bar(1.0, "harvest")
    bar.close()
    assert log.getvalue() == "evaluate [100%]: read from the cache\n"
