"""Which tasks a probe can read (evaluator.core.applicability), on the real registry: one rule for the
board's planner and ``python -m evaluator evaluate``, in agreement with the harvester's own check
at the start of a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.axes.evaluate import _tasks_for
from evaluator.core.applicability import ProbeReads, applicability, applicable_tasks
from evaluator.core.harvest import run_inputs_check
from evaluator.core.probes import load_probe
from evaluator.data.registry.load import load_registry
from evaluator.errors import EvaluatorError

ROOT = Path(__file__).resolve().parents[2]
CITY = "onpolicy-city-country-v1"
SMOL, ENCODER = "smollm2-135m-instruct", "all-minilm-l6-v2"


@pytest.fixture(scope="module")
def reg():
    return load_registry(ROOT)


def test_a_contrast_pair_probe_cannot_read_a_task_without_that_template(reg):
    pair = ProbeReads(input="contrast_pair", position="last_token", layer=18)
    ok, why = applicability(pair, reg.task(CITY), reg.model(SMOL))
    assert not ok and "no contrast_pair template" in why
    assert applicability(pair, reg.task("cities-truth-v1"), reg.model(SMOL)) == (True, "")
    with pytest.raises(EvaluatorError, match="contrast_pair"):
        run_inputs_check(
            reg,
            CITY,
            "test",
            model_id=SMOL,
            n_layers=30,
            layers=[18],
            position="last_token",
            input_kind="contrast_pair",
        )


def test_the_encoder_cannot_read_an_on_policy_task_and_a_layer_must_exist(reg):
    single = ProbeReads(input="single", position="mean", layer=3)
    ok, why = applicability(single, reg.task(CITY), reg.model(ENCODER))
    assert not ok and "on-policy" in why
    deep = ProbeReads(input="single", position="last_token", layer=20)
    ok, why = applicability(deep, reg.task("halueval-qa-v1"), reg.model(ENCODER))
    assert not ok and "out of range" in why


def test_evaluate_leaves_out_the_tasks_a_probe_cannot_read_and_refuses_one_named(reg):
    probe = load_probe(ROOT / "registry/reference_probes/cities-cp-logreg-smollm2", registry=reg)
    tasks, not_applicable = _tasks_for(probe, reg, None)
    expected, _ = applicable_tasks(
        ProbeReads.of(probe.metadata), reg.active_tasks("hallucination"), reg.model(SMOL)
    )
    assert tasks == [t.id for t in expected] and CITY not in tasks and "cities-truth-v1" in tasks
    assert "no contrast_pair template" in not_applicable[CITY]
    with pytest.raises(EvaluatorError, match="not applicable to this probe: the task has no contrast_pair"):
        _tasks_for(probe, reg, [CITY])


def test_the_probe_vocabulary_has_one_home():
    """Positions, inputs and outputs are defined in evaluator.core.applicability; the artifact
    reader, the harvester, the submission check and the submit form read those very tuples."""
    import evaluator.core.applicability as home
    import evaluator.core.harvest as harvest
    import evaluator.core.probes as probes
    import leaderboard.validation as validation
    import leaderboard.web.forms as forms

    for module in (probes, validation, forms):
        assert module.POSITIONS is home.POSITIONS
        assert module.INPUTS is home.INPUTS
        assert module.OUTPUTS is home.OUTPUTS
    assert harvest.POSITIONS is home.POSITIONS and harvest.INPUTS is home.INPUTS
    assert set(home.TEMPLATE_FOR_INPUT) == set(home.INPUTS)
