"""A refreshed task (a new id with ``supersedes: old-id`` in tasks.yaml) runs side by side with the
old one for one cycle; when that cycle completes, the old task is superseded, and sync_registry
does not undo it."""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from evaluator.data.registry.load import load_registry
from evaluator.errors import RegistryError
from leaderboard.models import Task
from leaderboard.registry_sync import registry_sync
from tests.leaderboard.reevaluation_data import TRUTH_TASK, run_cycle, scored

pytestmark = pytest.mark.django_db
NEW_TASK = "cities-truth-v2"


def edit_tasks(root: Path, change) -> None:
    data = yaml.safe_load((root / "tasks.yaml").read_text())
    change({t["id"]: t for t in data["tasks"]}, data)
    (root / "tasks.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def add_refreshed_task(root: Path, **fields) -> None:
    """cities-truth-v2: the same rows under new paths, declared as superseding v1."""

    def change(tasks, data):
        new = yaml.safe_load(yaml.safe_dump(tasks[TRUTH_TASK]))
        new.update(id=NEW_TASK, supersedes=TRUTH_TASK, **fields)
        for split in new["splits"].values():
            old_path = root / split["path"]
            split["path"] = split["path"].replace(TRUTH_TASK, NEW_TASK)
            (root / split["path"]).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(old_path, root / split["path"])
        if new.get("text_panel"):  # the same rows: the same panel, under the new task's name
            from evaluator.axes.text_baselines import panel_relpath

            shutil.copy(root / panel_relpath(TRUTH_TASK, None), root / panel_relpath(NEW_TASK, None))
        data["tasks"].append(new)

    edit_tasks(root, change)


@pytest.fixture
def refreshing(small_registry):
    add_refreshed_task(small_registry)
    registry_sync()
    return small_registry


def test_the_registry_validates_supersedes(small_registry):
    add_refreshed_task(small_registry)
    assert load_registry(small_registry).task(NEW_TASK).supersedes == TRUTH_TASK

    cases = [
        (lambda t, d: t[NEW_TASK].update(supersedes="nope-v1"), "not a task"),
        (lambda t, d: t[NEW_TASK].update(supersedes=NEW_TASK), "cannot supersede itself"),
        (lambda t, d: t[NEW_TASK].update(supersedes="benchmark-vs-user-v1"), "keeps its category"),
        (
            lambda t, d: t[TRUTH_TASK].update(status="superseded", superseded_by="benchmark-vs-user-v1"),
            "says superseded_by",
        ),
    ]
    original = (small_registry / "tasks.yaml").read_text()
    for change, message in cases:
        (small_registry / "tasks.yaml").write_text(original)
        edit_tasks(small_registry, change)
        with pytest.raises(RegistryError, match=message):
            load_registry(small_registry)


def test_both_tasks_are_active_side_by_side_after_the_sync(refreshing):
    old, new = Task.objects.get(slug=TRUTH_TASK), Task.objects.get(slug=NEW_TASK)
    assert old.status == new.status == Task.Status.ACTIVE
    assert old.superseded_by_id == NEW_TASK  # pending: retired by the next completed cycle


def test_new_submissions_run_on_both_while_side_by_side(refreshing):
    from leaderboard.services.runs import evaluation_runs_plan

    version = scored("newcomer", status="queued")
    runs = evaluation_runs_plan(version=version, submission=version.submission)
    assert {r.task_id for r in runs if r.kind == "score"} == {TRUTH_TASK, NEW_TASK}


def test_the_cycle_that_runs_both_supersedes_the_old_task(refreshing, maintainer, client):
    scored("truthful", reference_auroc=0.85)
    cycle = run_cycle("2026Q4", maintainer, {"truthful": 0.85})

    assert {r.task_id for r in cycle.runs.all()} == {TRUTH_TASK, NEW_TASK}  # side by side
    old = Task.objects.get(slug=TRUTH_TASK)
    assert old.status == Task.Status.SUPERSEDED and old.superseded_by_id == NEW_TASK
    assert cycle.diff["superseded_tasks"] == [{"task": TRUTH_TASK, "superseded_by": NEW_TASK}]
    assert "Tasks superseded" in client.get("/reevaluations/2026Q4/").content.decode()
    assert (
        client.get("/api/v1/reevaluations/2026Q4").json()["diff"]["superseded_tasks"][0]["task"] == TRUTH_TASK
    )

    # the next cycle mints no holdout for the old task
    nxt = run_cycle("2027Q1", maintainer, {"truthful": 0.85})
    assert TRUTH_TASK not in nxt.holdouts and NEW_TASK in nxt.holdouts


def test_sync_registry_does_not_undo_the_cycle_and_says_the_file_lags(refreshing, maintainer):
    scored("truthful", reference_auroc=0.85)
    run_cycle("2026Q4", maintainer, {"truthful": 0.85})

    out = StringIO()
    call_command("sync_registry", stdout=out)
    assert Task.objects.get(slug=TRUTH_TASK).status == Task.Status.SUPERSEDED
    assert f"task {TRUTH_TASK} was superseded by {NEW_TASK}" in out.getvalue()
    assert "registry in sync: 0 change(s)" in out.getvalue()

    # the maintainer brings tasks.yaml in line: nothing changes, the note goes away
    edit_tasks(refreshing, lambda t, d: t[TRUTH_TASK].update(status="superseded", superseded_by=NEW_TASK))
    out = StringIO()
    call_command("sync_registry", stdout=out)
    assert "0 change(s)" in out.getvalue() and "note:" not in out.getvalue()
    assert Task.objects.get(slug=TRUTH_TASK).status == Task.Status.SUPERSEDED


def test_a_cycle_before_the_refresh_was_synced_does_not_supersede(small_registry, maintainer):
    scored("truthful", reference_auroc=0.85)
    run_cycle("2026Q3", maintainer, {"truthful": 0.85})
    add_refreshed_task(small_registry)
    registry_sync()
    assert Task.objects.get(slug=TRUTH_TASK).status == Task.Status.ACTIVE  # waits for a cycle with both


def test_the_command_tells_the_maintainer_which_tasks_run_side_by_side(refreshing, maintainer):
    scored("truthful", reference_auroc=0.85)
    out = StringIO()
    call_command("start_reevaluation", "2026Q4", stdout=out)
    assert (
        f"{TRUTH_TASK} runs side by side with {NEW_TASK}; it is superseded when this cycle completes"
        in out.getvalue()
    )
