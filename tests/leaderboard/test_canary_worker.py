"""The canary at a worker's start (leaderboard.tasks.canary_at_worker_start, the ``worker_init``
handler): it does nothing when PROBEBENCH_CANARY is off; it refuses to start (WorkerShutdown, exit
status 1, the row and the difference logged) when the committed values differ, both where the
runs execute in the worker's own process (solo: measured in process, the model kept for the runs)
and where a prefork pool forks them (measured by ``python -m evaluator canary`` apart); it lets
an agreeing worker start; a missing canary refuses too. The real SmolLM2."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.concurrency.solo import TaskPool as SoloPool
from celery.exceptions import WorkerShutdown
from django.conf import settings

from evaluator.axes.canary import canary_path
from leaderboard import runner, tasks

SMOLLM = "smollm2-135m-instruct"


@pytest.fixture
def canary_on(settings):
    settings.CANARY = True
    settings.ENABLED_MODELS = [SMOLLM]
    return settings


def moved_canary(tmp_path: Path) -> tuple[Path, str]:
    """A copy of the committed canary with one SmolLM2 row's expected score moved by 0.5."""
    data = json.loads(canary_path(settings.REGISTRY_ROOT).read_text())
    row = next(m for m in data["models"] if m["model"] == SMOLLM)["rows"][3]
    row["expected"] += 0.5
    path = tmp_path / "canary.json"
    path.write_text(json.dumps(data))
    return path, row["id"]


def worker(pool) -> SimpleNamespace:
    return SimpleNamespace(pool_cls=pool)


def test_off_the_handler_checks_nothing(settings, monkeypatch):
    settings.CANARY = False
    monkeypatch.setattr(runner, "canary_refusal", lambda **kw: pytest.fail("the canary ran"))
    assert tasks.canary_at_worker_start(sender=worker(SoloPool)) is None


def test_the_pools_that_run_tasks_in_the_workers_process():
    assert tasks.pool_runs_in_process(worker(SoloPool)) and tasks.pool_runs_in_process(worker("threads"))
    assert not tasks.pool_runs_in_process(worker(PreforkPool)) and not tasks.pool_runs_in_process(
        worker("prefork")
    )


def test_the_models_a_worker_serves(settings):
    settings.ENABLED_MODELS = []
    served = runner.canary_models()
    assert SMOLLM in served and "qwen2.5-coder-0.5b-instruct" not in served  # loaded on request only
    settings.ENABLED_MODELS = [SMOLLM, "not-a-model"]
    assert runner.canary_models() == [SMOLLM]


def test_a_missing_canary_refuses_to_start(canary_on, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(runner, "canary_file", lambda: tmp_path / "nowhere.json")
    with pytest.raises(WorkerShutdown) as stopped:
        tasks.canary_at_worker_start(sender=worker(SoloPool))
    assert stopped.value.code == 1
    assert "no canary file" in capsys.readouterr().err


@pytest.mark.model
def test_a_mismatch_in_process_refuses_to_start_naming_the_row(
    canary_on, monkeypatch, tmp_path, capsys, caplog
):
    path, row_id = moved_canary(tmp_path)
    monkeypatch.setattr(runner, "canary_file", lambda: path)
    with caplog.at_level(logging.INFO, logger="leaderboard.runner"), pytest.raises(WorkerShutdown) as stopped:
        tasks.canary_at_worker_start(sender=worker(SoloPool))
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert "refusing to start" in err and row_id in err and "|Δ| 0.5" in err and "> tolerance" in err
    assert any(r.levelno == logging.ERROR and row_id in r.getMessage() for r in caplog.records)


@pytest.mark.model
def test_a_mismatch_measured_apart_for_a_prefork_pool_refuses_to_start(
    canary_on, monkeypatch, tmp_path, capsys
):
    path, row_id = moved_canary(tmp_path)
    monkeypatch.setattr(runner, "canary_file", lambda: path)
    monkeypatch.setattr(runner, "canary_in_process", lambda models: pytest.fail("measured in the parent"))
    with pytest.raises(WorkerShutdown) as stopped:
        tasks.canary_at_worker_start(sender=worker(PreforkPool))
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert "refusing to start" in err and row_id in err and "|Δ| 0.5" in err


@pytest.mark.model
def test_an_agreeing_canary_lets_the_worker_start_with_its_model_loaded(canary_on, caplog):
    with caplog.at_level(logging.INFO, logger="leaderboard.runner"):
        assert tasks.canary_at_worker_start(sender=worker(SoloPool)) is None
    assert any(f"canary: {SMOLLM}: agree" in r.getMessage() for r in caplog.records)
    assert any(key.startswith(f"{SMOLLM}@") for key in runner._models)  # the first run finds it loaded
