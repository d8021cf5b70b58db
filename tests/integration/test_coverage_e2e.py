"""A task added to a category after a probe was scored, on real runs: a real SmolLM2 probe scored
by a real worker, a refreshed truth task (the same rows under a new id) added to tasks.yaml and
synced, ``backfill_tasks`` queues the missing runs, the worker runs them, and the probe's Score
follows: measured on both tasks, the new one exactly as the old (the same rows give the same
per-example scores)."""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from leaderboard.models import EvaluationRun, Score, Submission
from tests.integration.conftest import settled, submit_dir, wait_for
from tests.leaderboard.test_reevaluation_supersession import NEW_TASK, add_refreshed_task

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]
TRUTH = "cities-truth-v1"


def test_a_task_added_after_scoring_is_backfilled_by_the_worker(
    mini, trained, start_worker, worker_env, settings, researcher, tmp_path
):
    settings.ENABLED_MODELS = [settings.ENABLED_MODELS[0]]  # no transfer runs: not what this is about
    root = Path(shutil.copytree(mini, tmp_path / "registry"))
    settings.REGISTRY_ROOT = root
    worker_env["PROBEBENCH_REGISTRY_ROOT"] = str(root)
    worker_env["PROBEBENCH_MODELS"] = settings.ENABLED_MODELS[0]
    worker = start_worker("backfill")

    sub = submit_dir(researcher, trained["truth"])
    wait_for(
        lambda: settled(sub.pk),
        timeout=900,
        what="the truth probe to be scored",
        workers=[worker],
    )
    version = Submission.objects.get(pk=sub.pk).probe_version
    before = Score.objects.get(probe_version=version, spec_id="v0.0.1")
    assert sorted(before.per_task) == [TRUTH]

    add_refreshed_task(root)
    out = StringIO()
    call_command("sync_registry", stdout=out)
    assert f"not measured on active task(s) {NEW_TASK}" in out.getvalue()
    out = StringIO()
    call_command("backfill_tasks", stdout=out)
    assert "3 run(s) queued" in out.getvalue(), out.getvalue()

    def rescored() -> bool:
        failed = EvaluationRun.objects.filter(probe_version=version, task_id=NEW_TASK, status="failed")
        assert not failed.exists(), [(r.split, r.error) for r in failed]
        return NEW_TASK in Score.objects.get(probe_version=version, spec_id="v0.0.1").per_task

    wait_for(rescored, timeout=600, what="the Score to include the new task", workers=[worker])
    runs = EvaluationRun.objects.filter(probe_version=version, task_id=NEW_TASK)
    assert sorted(runs.values_list("split", "status")) == [
        ("distshift", "succeeded"),
        ("test", "succeeded"),
        ("train", "succeeded"),
    ]
    after = Score.objects.get(probe_version=version, spec_id="v0.0.1")
    old, new = after.per_task[TRUTH], after.per_task[NEW_TASK]
    assert new["auroc"] == pytest.approx(old["auroc"]) and new["n_test"] == old["n_test"]
    assert after.measurements["auroc"] == pytest.approx(before.measurements["auroc"])
    out = StringIO()
    call_command("sync_registry", stdout=out)
    assert "not measured" not in out.getvalue()
