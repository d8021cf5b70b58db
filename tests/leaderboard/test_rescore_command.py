"""``manage.py rescore``: every entry's Score recomputed from its stored runs after a change of how
a stored number is derived (here: a Score whose lift was measured against the old bag of words)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluator.data.registry.load import load_registry
from leaderboard import models as m
from leaderboard.registry_sync import registry_sync
from leaderboard.services.scores import submission_score
from tests.leaderboard.test_onpolicy_tasks import SMOL, _finish, _queued, _scored_test_rows

pytestmark = pytest.mark.django_db


def test_rescore_recomputes_the_lift_over_the_committed_panel():
    registry_sync()
    registry = load_registry()
    version = _queued("old-lift", SMOL)
    runs = _finish(version, {"cities-truth-v1": 0.9})
    test_run = next(r for r in runs if r.split == "test")
    test_run.example_scores = _scored_test_rows(registry, "cities-truth-v1", None, seed=5)
    test_run.save(update_fields=["example_scores"])
    [score, *_] = submission_score(submission=version.submission, runs=runs)
    m.Submission.objects.filter(pk=version.submission.pk).update(status=m.Submission.Status.SCORED)
    measured = dict(score.per_task["cities-truth-v1"])
    # as a Score written before the panel: the lift over a bag of words, no interval
    stale = score.per_task["cities-truth-v1"] | {"text_baseline": {"bow": 0.444}, "lift_over_text": 0.3}
    stale.pop("lift_over_text_ci")
    m.Score.objects.filter(probe_version=version).update(  # under every weights spec
        per_task={"cities-truth-v1": stale}, measurements=score.measurements | {"lift_over_text": 0.3}
    )
    out = StringIO()
    call_command("rescore", "--category", version.probe.category_id, stdout=out)
    assert "old-lift v1" in out.getvalue() and "lift over text +0.3000 →" in out.getvalue()
    after = m.Score.objects.filter(probe_version=version, spec_id=score.spec_id).latest("computed_at")
    task = after.per_task["cities-truth-v1"]
    assert (
        task["text_baseline"] == measured["text_baseline"] and task["text_baseline"]["name"] != "bag_of_words"
    )
    assert task["lift_over_text"] == pytest.approx(measured["lift_over_text"])
    assert task["lift_over_text_ci"] == pytest.approx(measured["lift_over_text_ci"])
    assert after.measurements["lift_over_text"] == pytest.approx(measured["lift_over_text"])


def test_rescore_names_an_unknown_category():
    with pytest.raises(CommandError, match="unknown category nope; accepted: .*hallucination"):
        call_command("rescore", "--category", "nope", stdout=StringIO())
