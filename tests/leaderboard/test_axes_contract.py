"""Every declared axis keeps the contract the runner, the planner, the score writer and the pages
rely on (leaderboard.axes): its declaration is complete, its run kind is stored without a
migration, its queue is one a worker consumes, its metric rows are rows of the metric table,
turning it off takes its runs out of a plan, and its summary reads pending, failed and succeeded
runs (a pending or failed run leaves its numbers unmeasured; a succeeded one measures them)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from evaluator.metrics import metric_table
from evaluator.metrics.measure import aggregate_measurements
from evaluator.metrics.records import aggregate_stored
from leaderboard.axes import AXES, KINDS, PRIMARY_KINDS, UnknownAxisError, axes_enabled, axis, run_queue
from leaderboard.axes.base import QUEUES, AxisRuns, Summary
from leaderboard.models import BaseModel, EvaluationRun, Task, WeightsSpec
from leaderboard.services import runs as run_services
from leaderboard.services.scores import measurements_compute
from tests.factories import (
    EvaluationRunFactory,
    ProbeFactory,
    ProbeVersionFactory,
    SubmissionFactory,
    TaskFactory,
)

Run = EvaluationRun
SMOL, GEMMA = "smollm2-135m-instruct", "gemma-3-270m"
RECIPE = {"method": "logistic_regression", "task": "halueval-qa-v1", "layer": 15, "position": "last_token"}
ALL_AXES = pytest.mark.parametrize("ax", AXES, ids=KINDS)
OPTIONAL = [a for a in AXES if a.optional]
SUMMARISED = [a for a in AXES if a.summarise is not None]


# --------------------------------------------------------------------------- the declaration


@ALL_AXES
def test_the_declaration_is_complete(ax, settings):
    assert ax.name and ax.label and ax.description
    assert callable(ax.execute)
    assert ax.plan is None or callable(ax.plan)
    assert ax.summarise is None or callable(ax.summarise)
    assert axis(ax.name) is ax
    if ax.legacy_setting:
        assert ax.optional  # an axis the board ranks on cannot be turned off, by any name
        assert isinstance(getattr(settings, ax.legacy_setting), bool)


@ALL_AXES
def test_its_queue_is_one_a_worker_consumes(ax):
    assert ax.queue in QUEUES
    assert run_queue(ax.name) == ax.queue
    assert ax.name in run_services.queue_kinds(ax.queue)
    # the axes the board ranks on are the primary ones, and may not be left out
    assert (ax.name in PRIMARY_KINDS) == (not ax.optional)


@ALL_AXES
def test_its_metric_rows_are_rows_of_the_metric_table(ax):
    for name in ax.metric_rows:
        assert metric_table.metric(name).name == name


def test_every_metric_of_the_table_is_filled_by_exactly_one_axis():
    filled = [name for a in AXES for name in a.metric_rows]
    assert sorted(filled) == sorted(m.name for m in metric_table.metrics())


def test_the_run_kind_constants_name_declared_axes():
    assert set(Run.Kind.values) <= set(KINDS)
    assert len(set(KINDS)) == len(AXES)


def test_an_undeclared_kind_is_refused_with_the_declared_ones():
    with pytest.raises(UnknownAxisError, match=r"'stres'.*did you mean 'stress'"):
        axis("stres")


# --------------------------------------------------------------------------- stored without a migration


def test_the_kind_field_takes_any_declared_kind():
    field = Run._meta.get_field("kind")
    assert not field.choices  # validated against AXES in code: a new axis needs no migration
    assert max(len(k) for k in KINDS) <= field.max_length


@ALL_AXES
def test_its_kind_is_planned_and_stored(ax, registry):
    version = ProbeVersionFactory(probe=ProbeFactory(base_model_id=SMOL))
    task = Task.objects.get(slug="halueval-qa-v1")
    [run] = run_services.runs_get_or_create([(version, ax.name, task, "test", SMOL)], submission=None)
    assert Run.objects.get(pk=run.pk).kind == ax.name


def test_the_planner_refuses_an_undeclared_kind(registry):
    version = ProbeVersionFactory(probe=ProbeFactory(base_model_id=SMOL))
    task = Task.objects.get(slug="halueval-qa-v1")
    with pytest.raises(UnknownAxisError):
        run_services.runs_get_or_create([(version, "novel", task, "test", SMOL)], submission=None)
    assert not Run.objects.filter(kind="novel").exists()


# --------------------------------------------------------------------------- turned off by the settings


def _planned_kinds(kind: str = "linear") -> set[str]:
    """The kinds planned for a new submission of a hallucination probe on SmolLM2 with a recipe: a
    linear, single-prompt probe on a decoder, which every optional axis but the SAE one applies to
    (that one applies to ``kind`` "sae_features" only)."""
    version = ProbeVersionFactory(probe=ProbeFactory(base_model_id=SMOL), recipe=RECIPE, kind=kind)
    submission = SubmissionFactory(probe_version=version)
    return {r.kind for r in run_services.evaluation_runs_plan(version=version, submission=submission)}


@pytest.fixture
def every_axis_on(registry, settings):
    settings.ENABLED_AXES = []
    for a in AXES:
        if a.legacy_setting:
            setattr(settings, a.legacy_setting, True)
    return settings


@pytest.mark.parametrize("ax", OPTIONAL, ids=[a.name for a in OPTIONAL])
def test_turning_it_off_takes_its_runs_out_of_a_plan(ax, every_axis_on):
    settings = every_axis_on
    kind = "sae_features" if ax.name == "sae" else "linear"
    everything = _planned_kinds(kind)
    assert ax.name in everything and "score" in everything

    settings.ENABLED_AXES = [a.name for a in AXES if a is not ax]
    assert _planned_kinds(kind) == everything - {ax.name}

    if ax.legacy_setting:
        settings.ENABLED_AXES = []
        setattr(settings, ax.legacy_setting, False)  # the deprecated alias does the same
        assert ax.name not in _planned_kinds(kind)


@pytest.mark.parametrize(
    "ax", [a for a in AXES if not a.optional], ids=[a.name for a in AXES if not a.optional]
)
def test_an_axis_the_board_ranks_on_stays_on(ax, every_axis_on):
    every_axis_on.ENABLED_AXES = ["steer"]
    assert ax in axes_enabled()


def test_settings_naming_an_undeclared_axis_fail_at_start_up(settings):
    from django.core.exceptions import ImproperlyConfigured

    from leaderboard.axes import axes_settings_check

    settings.ENABLED_AXES = ["score", "stres"]
    with pytest.raises(ImproperlyConfigured, match="PROBEBENCH_AXES.*did you mean 'stress'"):
        axes_settings_check()


# --------------------------------------------------------------------------- its part of the Score


def _records(ids, labels, scores) -> list[dict]:
    return [
        {"id": i, "label": int(y), "score": float(s), "prob": float(1 / (1 + np.exp(-s)))}
        for i, y, s in zip(ids, labels, scores, strict=True)
    ]


Y = np.array([0, 1] * 20)
TEST_IDS = [f"te{i}" for i in range(40)]
POSITIVES = [i for i, label in enumerate(Y) if label == 1]
TEST_SCORES = Y * 3.0 + np.random.default_rng(1).normal(0, 0.5, 40)


def _succeeded(kind: str) -> dict:
    """What a succeeded run of ``kind`` stores (its worker's outcome), on the clean runs below: each
    axis with a summary has one here."""
    rng = np.random.default_rng(2)
    attacked = TEST_SCORES[POSITIVES] - 3.0
    return {
        "transfer": {"base_model_id": GEMMA, "metrics": {"transfer": {"pearson": 0.6}}},
        "reproduce": {"split": "train", "metrics": {"reproduction": {"reproduced": True}}},
        "steer": {
            "metrics": {
                "steer": {
                    "judged": True,
                    "utility_z": 2.5,
                    "p_value": 0.01,
                    "readout": {"auroc": 0.9, "n": 40},
                    "addition": {"effect": 0.2, "utility_z": 2.5},
                }
            }
        },
        "stress": {
            "splits": ["stress", "stress_content_end"],
            "example_scores": _records([f"{i}~chat" for i in TEST_IDS], Y, Y * 3.0 + rng.normal(0, 0.5, 40)),
        },
        "robustness": {
            "example_scores": _records([TEST_IDS[i] for i in POSITIVES], [1] * len(POSITIVES), attacked),
            "metrics": {
                "attack": {"steps": 100, "steps_run": 100, "steps_to_half": 5, "curve": []},
                "transfer": {
                    "source": "reference",
                    "source_version": 1,
                    "self": False,
                    "scores": list(TEST_SCORES[POSITIVES] - 1.0),
                },
            },
        },
    }[kind]


def test_every_axis_with_a_summary_has_a_succeeded_run_here():
    for a in SUMMARISED:
        assert _succeeded(a.name)


@pytest.fixture
def clean(registry):
    """A probe version with a recipe, scored on one task: its clean train and test runs."""
    version = ProbeVersionFactory(probe=ProbeFactory(base_model_id=SMOL), recipe=RECIPE)
    task = TaskFactory()
    rng = np.random.default_rng(0)
    EvaluationRunFactory(
        probe_version=version,
        task=task,
        split="train",
        example_scores=_records([f"tr{i}" for i in range(40)], Y, Y * 3.0 + rng.normal(0, 0.5, 40)),
    )
    EvaluationRunFactory(
        probe_version=version,
        task=task,
        split="test",
        example_scores=_records(TEST_IDS, Y, TEST_SCORES),
        metrics={"latency": {"probe_ms": 0.2, "device": "cpu"}},
    )
    return version, task


def _axis_run(ax, version, task, status) -> list[EvaluationRun]:
    """The axis's runs of one task (one per split it plans: the stress axis reads two), all in
    ``status``."""
    stored = _succeeded(ax.name)
    return [
        EvaluationRunFactory(
            probe_version=version,
            task=task,
            kind=ax.name,
            split=split,
            base_model=BaseModel.objects.get(slug=stored.get("base_model_id", SMOL)),
            status=status,
            example_scores=stored.get("example_scores", []) if status == Run.Status.SUCCEEDED else [],
            metrics=stored.get("metrics", {}) if status == Run.Status.SUCCEEDED else {},
            error="it failed" if status == Run.Status.FAILED else "",
        )
        for split in stored.get("splits", [stored.get("split", "test")])
    ]


def _score(version) -> dict:
    spec = WeightsSpec.objects.order_by("-version").first()
    return measurements_compute(
        version=version,
        runs=list(Run.objects.filter(probe_version=version)),
        reference_runs={},
        imputation=spec.imputation,
    )


def _measured(ax, computed) -> dict[str, bool]:
    """Whether the Score shows each of the axis's metric rows as measured (a number, not imputed)."""
    m = computed["aggregate"]
    return {row: m.get(row) is not None and row not in (m.get("imputed") or {}) for row in ax.metric_rows}


def _keywords(fn) -> set[str]:
    return set(inspect.signature(fn).parameters)


@pytest.mark.parametrize("ax", SUMMARISED, ids=[a.name for a in SUMMARISED])
@pytest.mark.parametrize("status", [Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.FAILED])
def test_a_pending_or_failed_run_leaves_its_numbers_unmeasured(ax, status, clean):
    version, task = clean
    _axis_run(ax, version, task, status)
    assert not any(_measured(ax, _score(version)).values())


@pytest.mark.parametrize("ax", SUMMARISED, ids=[a.name for a in SUMMARISED])
def test_a_succeeded_run_measures_its_numbers(ax, clean):
    version, task = clean
    before = ax.summarise(AxisRuns(runs=[], clean={}))
    runs = _axis_run(ax, version, task, Run.Status.QUEUED)
    clean_runs = {r.split: r for r in Run.objects.filter(probe_version=version, kind="score")}
    pending = ax.summarise(AxisRuns(runs=runs, clean={task.slug: clean_runs}))
    for run in runs:
        run.delete()
    runs = _axis_run(ax, version, task, Run.Status.SUCCEEDED)
    computed = _score(version)
    assert all(_measured(ax, computed).values())
    done = ax.summarise(AxisRuns(runs=runs, clean={task.slug: clean_runs}))
    assert done != pending and done != before  # what it stored changes the Score


@pytest.mark.parametrize("ax", SUMMARISED, ids=[a.name for a in SUMMARISED])
def test_its_summary_fills_only_keywords_the_score_writer_passes_on(ax, clean):
    version, task = clean
    runs = _axis_run(ax, version, task, Run.Status.SUCCEEDED)
    clean_runs = {r.split: r for r in Run.objects.filter(probe_version=version, kind="score")}
    summary = ax.summarise(AxisRuns(runs=runs, clean={task.slug: clean_runs}))
    assert isinstance(summary, Summary)
    assert set(summary.stored) <= _keywords(aggregate_stored)
    assert set(summary.scored) <= _keywords(aggregate_measurements)
    assert set(summary.computed).isdisjoint(
        {"measurements", "aggregate", "per_task", "protocol", "environment"}
    )
    # with no run at all it still answers (an axis that was never planned for the probe)
    assert isinstance(ax.summarise(AxisRuns(runs=[], clean={})), Summary)
