"""The stress axis on the board: the score writer reads a stress run against the clean train and
test runs of the same task (evaluator.axes.stress), the means wait for a pending run, and the number is
a column of the board (sortable, n/a where not measured), a field of the API and the CSV, and a
table on the probe page; never part of the ProbeScore."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from evaluator.axes.stress import stress_metrics, stress_summary
from leaderboard.axes.stress import plan as stress_plan
from leaderboard.axes.stress import stress_measurements
from leaderboard.models import EvaluationRun
from tests.factories import EvaluationRunFactory, ProbeVersionFactory, TaskFactory
from tests.leaderboard.board_data import ensure_models, ensure_tasks, public_probe

Run = EvaluationRun
TRANSFORMS = ("chat", "json", "dilution")


def _records(ids, labels, scores) -> list[dict]:
    return [
        {"id": i, "label": int(y), "score": float(s), "prob": float(1 / (1 + np.exp(-s)))}
        for i, y, s in zip(ids, labels, scores, strict=True)
    ]


def _runs(version, task, *, stress_status=Run.Status.SUCCEEDED):
    """Clean train and test runs where the probe separates the classes, and a stress run where
    dilution leaves it at chance."""
    rng = np.random.default_rng(0)
    y = np.array([0, 1] * 20)
    train = EvaluationRunFactory(
        probe_version=version,
        task=task,
        split="train",
        example_scores=_records([f"tr{i}" for i in range(40)], y, y * 3.0 + rng.normal(0, 0.5, 40)),
    )
    test_ids = [f"te{i}" for i in range(40)]
    test = EvaluationRunFactory(
        probe_version=version,
        task=task,
        split="test",
        example_scores=_records(test_ids, y, y * 3.0 + rng.normal(0, 0.5, 40)),
    )
    ids, labels, scores = [], [], []
    for name in TRANSFORMS:
        noise = rng.normal(0, 0.5, 40)
        ids += [f"{i}~{name}" for i in test_ids]
        labels += list(y)
        scores += list(noise if name == "dilution" else y * 3.0 + noise)
    stress = EvaluationRunFactory(
        probe_version=version,
        task=task,
        kind=Run.Kind.STRESS,
        split="stress",
        status=stress_status,
        example_scores=_records(ids, labels, scores) if stress_status == Run.Status.SUCCEEDED else [],
    )
    return train, test, stress


def test_the_score_writer_reads_the_stress_run_against_the_clean_runs(registry):
    version = ProbeVersionFactory()
    task = TaskFactory()
    train, test, stress = _runs(version, task)
    out = stress_measurements({task.slug: stress}, {task.slug: {"train": train, "test": test}})
    # the same numbers as evaluator.axes.stress on the stored scores
    tr = {e["id"]: e for e in train.example_scores}
    expected = stress_metrics(
        train_negatives=np.array([e["score"] for e in tr.values() if e["label"] == 0]),
        test=(
            [e["id"] for e in test.example_scores],
            np.array([e["label"] for e in test.example_scores]),
            np.array([e["score"] for e in test.example_scores]),
        ),
        stress=(
            [e["id"] for e in stress.example_scores],
            np.array([e["label"] for e in stress.example_scores]),
            np.array([e["score"] for e in stress.example_scores]),
        ),
    )
    assert out == stress_summary({task.slug: expected})
    assert list(out["stress"][task.slug]["transforms"]) == list(TRANSFORMS)
    # dilution is the worst transform: at chance, and the mean over one task is its AUROC
    assert out["stress_auroc"] == pytest.approx(expected["transforms"]["dilution"]["auroc"])
    assert out["stress_auroc"] < 0.7 < out["stress"][task.slug]["transforms"]["chat"]["auroc"]
    assert out["stress_recall"] == pytest.approx(expected["worst"]["recall"])


def test_a_pending_stress_run_holds_the_means_and_a_failed_one_leaves_its_task_out(registry):
    """(That neither is measured is the axes' contract, tests/leaderboard/test_axes_contract.py.)"""
    version = ProbeVersionFactory()
    task = TaskFactory()
    train, test, stress = _runs(version, task, stress_status=Run.Status.QUEUED)
    pending = stress_measurements({task.slug: stress}, {task.slug: {"train": train, "test": test}})
    assert pending == {
        "stress_auroc": None,
        "stress_recall": None,
        "stress_auroc_content_end": None,
        "stress": {},
    }
    stress.status = Run.Status.FAILED
    failed = stress_measurements({task.slug: stress}, {task.slug: {"train": train, "test": test}})
    assert failed["stress"] == {}
    assert stress_measurements({}, {}) == {}  # no stress run (only on-policy tasks): nothing stored


@pytest.fixture
def board(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 1)
    stress = {
        "t": {
            "threshold": 1.0,
            "clean": {"auroc": 1.0, "recall": 1.0, "fpr": 0.0},
            "worst": {"auroc": 0.52, "recall": 0.0},
            "transforms": {"dilution": {"auroc": 0.52, "recall": 0.0, "fpr": 0.9, "n": 40}},
        }
    }
    public_probe(
        slug="brittle",
        name="Brittle Probe",
        auroc=0.95,
        tasks=tasks,
        extra_measurements={"stress_auroc": 0.52, "stress_recall": 0.0, "stress": stress},
    )
    public_probe(
        slug="sturdy",
        name="Sturdy Probe",
        auroc=0.85,
        tasks=tasks,
        extra_measurements={"stress_auroc": 0.81, "stress_recall": 0.6, "stress": {}},
    )
    public_probe(slug="unmeasured", name="Unmeasured Probe", auroc=0.8, tasks=tasks)


def test_the_stress_column_sorts_and_says_n_a_where_not_measured(client, board):
    page = client.get("/category/hallucination/", {"sort": "stress"}).content.decode()
    assert "Stress" in page
    assert page.index("Sturdy Probe") < page.index("Brittle Probe") < page.index("Unmeasured Probe")
    assert '<td class="num stress" title="' in page and "0.810</td>" in page
    assert '<td class="num stress na">' in page
    rows = client.get("/api/v1/leaderboard", {"category": "hallucination", "sort": "stress"}).json()[
        "results"
    ]
    assert [r["stress_auroc"] for r in rows] == [0.81, 0.52, None]
    exported = client.get("/api/v1/leaderboard.csv", {"category": "hallucination"}).content.decode()
    by_name = {r["probe"]: r for r in csv.DictReader(io.StringIO(exported))}
    assert float(by_name["brittle"]["stress_auroc"]) == pytest.approx(0.52)
    assert float(by_name["sturdy"]["stress_recall"]) == pytest.approx(0.6)


def test_the_probe_page_shows_every_transform(client, board, settings):
    page = client.get("/probes/brittle/").content.decode()
    assert "Stress: the same rows, rewritten in form" in page
    assert '<th scope="row">dilution</th>' in page
    # no stress run: turned off on this board (the tests' settings), else it does not apply
    assert "this board does not run the stress axis" in client.get("/probes/unmeasured/").content.decode()
    settings.STRESS_RUNS = True
    assert "n/a: not measured (no task of this probe" in client.get("/probes/unmeasured/").content.decode()


def test_a_stress_run_is_planned_for_each_task_with_a_stress_split(registry):
    """(That PROBEBENCH_AXES or PROBEBENCH_STRESS_RUNS=False plans none is the axes' contract.)"""
    from leaderboard.models import Task
    from tests.factories import ProbeFactory

    probe = ProbeFactory(category_id="hallucination", base_model_id="smollm2-135m-instruct")
    version = ProbeVersionFactory(probe=probe)
    tasks = list(Task.objects.filter(category_id="hallucination", status=Task.Status.ACTIVE))
    planned = stress_plan(version, tasks)
    slugs = sorted({t.slug for _, _, t, _, _ in planned})
    # every task about its text has a stress split; an on-policy task (its labels are what the model
    # did with the exact prompt) has none
    assert slugs == sorted(t.slug for t in tasks if not t.on_policy)
    assert "onpolicy-city-country-v1" not in slugs and slugs
    # two readings per task: where the probe reads, and where the content ends
    assert len(planned) == 2 * len(slugs)
    assert {(kind, split, model) for _, kind, _, split, model in planned} == {
        (Run.Kind.STRESS, "stress", "smollm2-135m-instruct"),
        (Run.Kind.STRESS, "stress_content_end", "smollm2-135m-instruct"),
    }


def test_the_summary_reads_the_content_end_run_beside_the_stress_run(registry):
    """A content-end run where dilution's rows, cut before the filler's tail, are read well: the
    deployed worst stays dilution's chance AUROC, the content-end worst is far higher; while the
    content-end run is queued both wait."""
    from leaderboard.axes.base import AxisRuns
    from leaderboard.axes.stress import summarise

    version = ProbeVersionFactory()
    task = TaskFactory()
    train, test, stress = _runs(version, task)
    y = np.array([0, 1] * 20)
    ids = [f"te{i}~{name}" for name in TRANSFORMS for i in range(40)]
    cut = EvaluationRunFactory(
        probe_version=version,
        task=task,
        kind=Run.Kind.STRESS,
        split="stress_content_end",
        example_scores=_records(ids, np.tile(y, 3), np.tile(y * 3.0, 3)),
    )
    clean = {task.slug: {"train": train, "test": test}}
    out = summarise(AxisRuns(runs=[stress, cut], clean=clean)).stored["stress"]
    dilution = out["stress"][task.slug]["transforms"]["dilution"]
    assert dilution["auroc"] < 0.7 and dilution["auroc_content_end"] == 1.0
    assert out["stress_auroc"] < 0.7 and out["stress_auroc_content_end"] == 1.0
    cut.status = Run.Status.QUEUED
    waiting = summarise(AxisRuns(runs=[stress, cut], clean=clean)).stored["stress"]
    assert waiting["stress_auroc"] is None and waiting["stress"] == {}
