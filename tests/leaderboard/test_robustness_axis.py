"""The robustness axis on the board: the score writer reads a robustness run (the graded attack's
curves, the suffix-attacked test positives' scores) against the clean train and test runs of the
same task, the Goodhart resistance waits for a pending run and is the goodhart component once
measured (the graded area under p2, the suffix ratio under p1); under v0.0.3 an unmeasured one
gets the category's lowest measured value; the planner gives every probe a robustness run under p2
and, under p1, only probes the suffix attack applies to; the board, API, CSV and probe page show
it."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from evaluator.axes.attack import attack_metrics
from leaderboard.axes.robustness import plan as robustness_plan
from leaderboard.axes.robustness import robustness_measurements
from leaderboard.models import EvaluationRun, Task
from tests.factories import EvaluationRunFactory, ProbeFactory, ProbeVersionFactory, TaskFactory
from tests.leaderboard.board_data import ensure_models, ensure_tasks, public_probe

Run = EvaluationRun
SMOL = "smollm2-135m-instruct"


def _records(ids, labels, scores) -> list[dict]:
    return [
        {"id": i, "label": int(y), "score": float(s), "prob": float(1 / (1 + np.exp(-s)))}
        for i, y, s in zip(ids, labels, scores, strict=True)
    ]


def _runs(version, task, *, status=Run.Status.SUCCEEDED):
    """Clean train and test runs where the probe separates the classes, and a robustness run whose
    suffix pulls every attacked positive down by 3 (most fall under the threshold)."""
    rng = np.random.default_rng(0)
    y = np.array([0, 1] * 20)
    train = EvaluationRunFactory(
        probe_version=version,
        task=task,
        split="train",
        example_scores=_records([f"tr{i}" for i in range(40)], y, y * 3.0 + rng.normal(0, 0.5, 40)),
    )
    test_ids = [f"te{i}" for i in range(40)]
    test_scores = y * 3.0 + rng.normal(0, 0.5, 40)
    test = EvaluationRunFactory(
        probe_version=version, task=task, split="test", example_scores=_records(test_ids, y, test_scores)
    )
    pos = [i for i, label in enumerate(y) if label == 1]
    robust = EvaluationRunFactory(
        probe_version=version,
        task=task,
        kind=Run.Kind.ROBUSTNESS,
        split="test",
        status=status,
        example_scores=_records([test_ids[i] for i in pos], [1] * len(pos), test_scores[pos] - 3.0)
        if status == Run.Status.SUCCEEDED
        else [],
        metrics={"attack": {"steps": 100, "steps_to_half": 5, "curve": [{"step": 0, "recall": 1.0}]}},
    )
    return train, test, robust


def test_the_score_writer_recomputes_the_attack_from_the_stored_scores(registry):
    version, task = ProbeVersionFactory(), TaskFactory()
    train, test, robust = _runs(version, task)
    out, why = robustness_measurements({task.slug: robust}, {task.slug: {"train": train, "test": test}})
    expected = attack_metrics(
        train_negatives=np.array([e["score"] for e in train.example_scores if e["label"] == 0]),
        test=(
            np.array([e["label"] for e in test.example_scores]),
            np.array([e["score"] for e in test.example_scores]),
        ),
        attacked=np.array([e["score"] for e in robust.example_scores]),
    )
    assert why == ""
    t = out["robustness"][task.slug]
    assert {k: t[k] for k in expected} == expected
    assert t["steps_to_half"] == 5 and t["curve"] == [{"step": 0, "recall": 1.0}]
    assert out["goodhart_resistance"] == pytest.approx(expected["recall_attacked"] / expected["recall_clean"])
    assert out["goodhart_resistance"] < 0.5 and out["attack_recall"] == expected["recall_attacked"]


def test_an_unmeasured_goodhart_resistance_says_why(registry):
    """Pending, failed or never planned (that none is measured is the axes' contract,
    tests/leaderboard/test_axes_contract.py): the goodhart component's note says which."""
    version, task = ProbeVersionFactory(), TaskFactory()
    train, test, robust = _runs(version, task, status=Run.Status.QUEUED)
    splits = {task.slug: {"train": train, "test": test}}
    _, why = robustness_measurements({task.slug: robust}, splits)
    assert why.startswith("pending")
    robust.status = Run.Status.FAILED
    _, why = robustness_measurements({task.slug: robust}, splits)
    assert "failed" in why
    out, why = robustness_measurements({}, {})
    assert out == {} and "not measured" in why


def test_every_probe_kind_gets_robustness_runs_under_p2_and_only_suffix_ones_under_p1(registry, monkeypatch):
    """(That PROBEBENCH_AXES or PROBEBENCH_ROBUSTNESS_RUNS=False plans none is the axes' contract.)"""
    import dataclasses

    from leaderboard import runner

    tasks = list(Task.objects.filter(category_id="hallucination", status=Task.Status.ACTIVE))
    single = ProbeVersionFactory(probe=ProbeFactory(category_id="hallucination", base_model_id=SMOL))
    planned = robustness_plan(single, tasks)
    assert sorted(t.slug for _, _, t, _, _ in planned) == sorted(t.slug for t in tasks)
    assert {(kind, split, model) for _, kind, _, split, model in planned} == {
        (Run.Kind.ROBUSTNESS, "test", SMOL)
    }
    pair = ProbeVersionFactory(
        probe=ProbeFactory(category_id="hallucination", base_model_id=SMOL), input="contrast_pair"
    )
    encoder = ProbeVersionFactory(
        probe=ProbeFactory(category_id="hallucination", base_model_id="all-minilm-l6-v2")
    )
    # the graded attack reaches both prompts of a pair and an encoder's word embeddings
    assert len(robustness_plan(pair, tasks)) == len(robustness_plan(encoder, tasks)) == len(tasks)
    reg = runner.registry()
    p1 = dataclasses.replace(reg.protocol(), id="p1", attack_graded=None)
    monkeypatch.setattr(runner, "registry", lambda: dataclasses.replace(reg, protocols={"p1": p1}))
    assert len(robustness_plan(single, tasks)) == len(tasks)
    assert robustness_plan(pair, tasks) == []  # two prompts: no one suffix
    assert robustness_plan(encoder, tasks) == []  # no decoder to append to


def _graded(area_by_seed, *, not_attacked=None):
    seeds = [
        {"seed": s, "area": a, "eps50": 0.05, "recall_inserted": 0.9, "curve": [{"eps": 0.01, "relative": a}]}
        for s, a in enumerate(area_by_seed)
    ]
    return {
        "protocol": "p2",
        "caught_clean": 30,
        "n_positives": 32,
        "not_attacked": not_attacked,
        "goodhart_resistance": None if not_attacked else float(np.mean(area_by_seed)),
        "goodhart_resistance_range": None if not_attacked else [min(area_by_seed), max(area_by_seed)],
        "eps50": [0.05] * len(area_by_seed),
        "recall_inserted": [0.9] * len(area_by_seed),
        "seeds": [] if not_attacked else seeds,
    }


def test_the_graded_area_is_the_goodhart_resistance_and_the_suffix_ratio_stays_beside_it(registry):
    version, task = ProbeVersionFactory(), TaskFactory()
    train, test, robust = _runs(version, task)
    graded = _graded([0.6, 0.4]) | {
        "behaviour_kept": {
            "readout": {"applies": True, "reason": "", "readout_auroc": 0.8, "tolerance": 1.0},
            "goodhart_resistance": 0.9,
            "goodhart_resistance_range": [0.85, 0.95],
        }
    }
    robust.metrics = robust.metrics | {"graded": graded}
    out, why = robustness_measurements({task.slug: robust}, {task.slug: {"train": train, "test": test}})
    t = out["robustness"][task.slug]
    assert t["kept"]["applies"] and t["kept"]["goodhart_resistance"] == 0.9  # shown beside, never the score
    assert why == "" and out["goodhart_method"] == "graded"
    assert out["goodhart_resistance"] == pytest.approx(0.5) and out["goodhart_resistance_range"] == [0.4, 0.6]
    assert t["suffix_resistance"] == pytest.approx(t["recall_attacked"] / t["recall_clean"])
    assert t["curves"][0]["points"] == [[0.01, 0.6]] and out["attack_recall"] == t["recall_attacked"]


def test_a_pair_or_encoder_run_has_only_the_graded_curve_and_too_few_caught_says_so(registry):
    version, task = ProbeVersionFactory(input="contrast_pair"), TaskFactory()
    train, test, robust = _runs(version, task)
    robust.example_scores, robust.metrics = [], {"graded": _graded([0.3, 0.2])}
    out, why = robustness_measurements({task.slug: robust}, {task.slug: {"train": train, "test": test}})
    assert why == "" and out["goodhart_resistance"] == pytest.approx(0.25) and out["attack_recall"] is None
    robust.metrics = {"graded": _graded([0.3], not_attacked="the clean threshold catches 3 of 32")}
    out, why = robustness_measurements({task.slug: robust}, {task.slug: {"train": train, "test": test}})
    assert out["goodhart_resistance"] is None and "too few attacked positives" in why


def test_under_v003_an_unmeasured_resistance_gets_the_categorys_lowest_measured(registry):
    from leaderboard.models import Score
    from leaderboard.services.scores import goodhart_floor, goodhart_floor_refresh

    ensure_models()
    tasks = ensure_tasks("hallucination", 1)
    graded = {"goodhart_method": "graded", "attack_recall": None}
    public_probe(
        slug="tough", auroc=0.9, tasks=tasks, extra_measurements=graded | {"goodhart_resistance": 0.7}
    )
    weak = public_probe(
        slug="weak", auroc=0.9, tasks=tasks, extra_measurements=graded | {"goodhart_resistance": 0.2}
    )
    silent = public_probe(slug="silent", auroc=0.9, tasks=tasks)
    # a p1 ratio is another measurement: it never sets the graded floor
    public_probe(
        slug="old", tasks=tasks, extra_measurements={"goodhart_resistance": 0.0, "goodhart_method": "suffix"}
    )
    assert goodhart_floor("hallucination") == (0.2, "weak v1")
    assert goodhart_floor("hallucination", exclude_probe_id=weak.probe_id) == (0.7, "tough v1")
    assert goodhart_floor_refresh("hallucination") == 1  # silent, under v0.0.3 only
    component = Score.objects.get(probe_version=silent, spec_id="v0.0.3").components["goodhart"]
    assert component["value"] == 0.2 and component["imputed"] and "weak v1" in component["note"]
    assert Score.objects.get(probe_version=silent, spec_id="v0.0.2").components["goodhart"]["value"] == 0.5
    assert goodhart_floor_refresh("hallucination") == 0  # idempotent
    assert goodhart_floor("refusal") == (None, "")


@pytest.fixture
def board(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 1)
    curve = [{"step": 0, "recall": 0.9}, {"step": 5, "recall": 0.1}, {"step": 100, "recall": 0.0}]
    robustness = {
        tasks[0].slug: {
            "threshold": 1.5,
            "recall_clean": 0.9,
            "recall_attacked": 0.0,
            "goodhart_resistance": 0.0,
            "n_positives": 20,
            "steps": 100,
            "steps_to_half": 5,
            "curve": curve,
        }
    }
    public_probe(
        slug="fragile",
        name="Fragile Probe",
        auroc=0.95,
        tasks=tasks,
        extra_measurements={"goodhart_resistance": 0.0, "attack_recall": 0.0, "robustness": robustness},
    )
    public_probe(
        slug="steady",
        name="Steady Probe",
        auroc=0.85,
        tasks=tasks,
        extra_measurements={"goodhart_resistance": 0.8, "attack_recall": 0.6, "robustness": {}},
    )
    public_probe(slug="unattacked", name="Unattacked Probe", auroc=0.8, tasks=tasks)


def test_the_goodhart_column_sorts_and_counts_under_v002(client, board):
    v002 = {"sort": "goodhart", "spec": "v0.0.2"}
    page = client.get("/category/hallucination/", v002).content.decode()
    assert "Goodhart" in page
    # the measured 0.8 first, then the imputed default 0.5 (flagged), then the collapsed 0.0
    assert page.index("Steady Probe") < page.index("Unattacked Probe") < page.index("Fragile Probe")
    rows = client.get("/api/v1/leaderboard", {"category": "hallucination"} | v002).json()
    assert rows["spec"] == "v0.0.2"
    results = rows["results"]
    assert [r["components"]["goodhart"]["imputed"] for r in results] == [False, True, False]
    assert [r["attack_recall"] for r in results] == [0.6, None, 0.0]
    old = client.get("/api/v1/leaderboard", {"category": "hallucination", "spec": "v0.0.1"}).json()["results"]
    assert {r["components"]["goodhart"]["weight"] for r in old} == {0.0}
    exported = client.get("/api/v1/leaderboard.csv", {"category": "hallucination"}).content.decode()
    by_name = {r["probe"]: r for r in csv.DictReader(io.StringIO(exported))}
    assert float(by_name["steady"]["goodhart_resistance"]) == pytest.approx(0.8)
    assert float(by_name["fragile"]["attack_recall"]) == 0.0
    assert by_name["unattacked"]["goodhart_resistance"] == ""


def test_the_probe_page_shows_the_attack_per_task_and_its_curve(client, board, settings):
    page = client.get("/probes/fragile/").content.decode()
    assert "Robustness: an adversary against the frozen probe" in page
    assert "Recall under attack" in page and "<svg" in page  # the recall-vs-steps plot
    assert "step 5, recall 0.100" in page
    # no robustness run: turned off on this board (the tests' settings), else it does not apply
    unattacked = client.get("/probes/unattacked/").content.decode()
    assert "this board does not run the robustness axis" in unattacked
    settings.ROBUSTNESS_RUNS = True
    assert "n/a: not measured (under protocol p1" in client.get("/probes/unattacked/").content.decode()


@pytest.fixture
def graded_board(registry):
    """A contrast-pair probe with the graded attack's curves, on a refusal task."""
    ensure_models()
    tasks = ensure_tasks("refusal", 1)
    graded = {
        "method": "graded",
        "caught_clean": 30,
        "attacked_positives": 32,
        "not_attacked": None,
        "goodhart_resistance": 0.45,
        "goodhart_resistance_range": [0.4, 0.5],
        "eps50": [0.07, 0.09],
        "recall_inserted": [0.9, 0.85],
        "kept": {"applies": False, "reason": "the readout's AUROC against the labels is 0.512"},
        "curves": [
            {"seed": 0, "area": 0.4, "eps50": 0.07, "points": [[0.01, 1.0], [0.1, 0.3], [0.5, 0.0]]},
            {"seed": 1, "area": 0.5, "eps50": 0.09, "points": [[0.01, 1.0], [0.1, 0.5], [0.5, 0.1]]},
        ],
    }
    public_probe(
        slug="pair-graded",
        name="Pair Graded",
        auroc=0.8,
        tasks=tasks,
        category="refusal",
        input="contrast_pair",
        extra_measurements={
            "goodhart_resistance": 0.45,
            "goodhart_resistance_range": [0.4, 0.5],
            "goodhart_method": "graded",
            "robustness": {tasks[0].slug: graded},
        },
    )


def test_the_probe_page_shows_the_graded_curves_of_a_contrast_pair(client, graded_board):
    page = client.get("/probes/pair-graded/").content.decode()
    assert "The graded attack" in page and "The soft-suffix attack" not in page
    assert "30 of 32" in page and "0.400, 0.500" in page  # caught clean; the area per seed
    assert "seeds 0.400 to 0.500" in page
    assert "ε 0.1, relative recall 0.300" in page  # a point of the plot, per task and seed
    assert 'title="the readout&#x27;s AUROC against the labels is 0.512">n/a' in page


def _reference(system_account, slug: str, method: str, task, *, input_kind: str = "single"):
    """A scored reference probe of the system account with a successful test run on ``task``."""
    from tests.factories import SubmissionFactory

    probe = ProbeFactory(
        slug=slug, category_id="hallucination", base_model_id=SMOL, owner=system_account, is_reference=True
    )
    version = ProbeVersionFactory(probe=probe, input=input_kind, recipe={"method": method, "task": task.slug})
    SubmissionFactory(probe_version=version, status="scored")
    EvaluationRunFactory(probe_version=version, task=task, split="test")
    return version


def test_the_transfer_source_is_the_supervised_reference_scored_on_the_task(registry, system_account):
    from leaderboard.selectors.shared import attack_source_version

    task = Task.objects.filter(category_id="hallucination", status=Task.Status.ACTIVE).first()
    where = {"category_id": "hallucination", "base_model_id": SMOL, "task_id": task.slug}
    assert attack_source_version(**where) is None
    pca = _reference(system_account, "ref-pca", "pca_unsupervised", task)
    assert attack_source_version(**where) == pca
    _reference(system_account, "ref-pair", "logistic_regression", task, input_kind="contrast_pair")
    assert attack_source_version(**where) == pca  # a contrast pair cannot be attacked
    logreg = _reference(system_account, "ref-logreg", "logistic_regression", task)
    assert attack_source_version(**where) == logreg
    # someone else's probe never is, whatever it claims
    impostor = ProbeVersionFactory(
        probe=ProbeFactory(
            slug="aaa-logreg", category_id="hallucination", base_model_id=SMOL, is_reference=True
        ),
        recipe={"method": "logistic_regression"},
    )
    EvaluationRunFactory(probe_version=impostor, task=task, split="test")
    assert attack_source_version(**where) == logreg
    assert attack_source_version(**(where | {"base_model_id": "gemma-3-270m"})) is None


def test_the_transfer_recall_is_recomputed_from_the_stored_scores(registry):
    version, task = ProbeVersionFactory(), TaskFactory()
    train, test, robust = _runs(version, task)
    positives = [e for e in test.example_scores if e["label"] == 1]
    robust.metrics = robust.metrics | {
        "transfer": {
            "source": "ref-logreg",
            "source_version": 1,
            "self": False,
            "recall_attacked": 0.123,  # what the worker said; the writer recomputes it
            "scores": [e["score"] for e in positives],  # the suffix took nothing away
        }
    }
    out, _ = robustness_measurements({task.slug: robust}, {task.slug: {"train": train, "test": test}})
    t = out["robustness"][task.slug]
    assert t["transfer"]["source"] == "ref-logreg" and not t["transfer"]["self"]
    assert (
        t["transfer"]["recall_attacked"] == t["recall_clean"] and t["transfer"]["goodhart_resistance"] == 1.0
    )
    assert out["transfer_attack_recall"] == t["recall_clean"]
    robust.metrics = robust.metrics | {"transfer": {"source": version.probe.slug, "self": True}}
    out, _ = robustness_measurements({task.slug: robust}, {task.slug: {"train": train, "test": test}})
    assert out["robustness"][task.slug]["transfer"]["self"] and out["transfer_attack_recall"] is None


def test_a_cycle_requeues_a_transfer_attack_made_against_another_source(registry, system_account):
    from leaderboard.services.runs import transfer_attacks_refresh
    from tests.factories import SubmissionFactory

    task = Task.objects.filter(category_id="hallucination", status=Task.Status.ACTIVE).first()
    entry = ProbeVersionFactory(
        probe=ProbeFactory(slug="entry", category_id="hallucination", base_model_id=SMOL)
    )
    SubmissionFactory(probe_version=entry, status="scored")
    run = EvaluationRunFactory(
        probe_version=entry,
        task=task,
        kind=Run.Kind.ROBUSTNESS,
        metrics={"attack": {"steps": 100}, "transfer": None},  # measured when the category had no source
    )
    assert transfer_attacks_refresh(dispatch=False) == []
    source = _reference(system_account, "ref-logreg", "logistic_regression", task)
    assert [r.pk for r in transfer_attacks_refresh(dispatch=False)] == [run.pk]
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and run.metrics["attack"] == {"steps": 100}  # kept for reuse
    # measured against the current source: nothing to do
    run.status = Run.Status.SUCCEEDED
    run.metrics = {
        "attack": {"steps": 100},
        "transfer": {"source": "ref-logreg", "source_version": source.number},
    }
    run.save()
    assert transfer_attacks_refresh(dispatch=False) == []
