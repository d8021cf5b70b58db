"""Installing the second eval-awareness reference probe of SmolLM2 on a board.

The committed artifacts of registry/reference_probes/ea-smollm2 (the first reference) and
ea-lofo-smollm2 (the second, which ``replaces`` it in the manifest) are submitted with
``install_reference_probes`` through the normal submission path, on the small registry's rows,
with a real SmolLM2 (eager tasks in this process). Installing the second one must make it the
base model's current reference, keep the first as a record, and go through the reference-update
path: the dependent's auroc_ea is recomputed from the stored per-example scores of its own test
run and the new reference's run on the same items, its own runs untouched, and the diff published.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from leaderboard.models import EvaluationRun, ReferenceUpdate, Score, Submission
from tests.integration.conftest import SOURCE, submit_dir

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]
Run = EvaluationRun
ROOT = Path(__file__).resolve().parents[2]
OLD, NEW = "ea-smollm2", "ea-lofo-smollm2"


@pytest.fixture
def board(mini, settings):
    from probebench.celery import app

    settings.ENABLED_MODELS = [SOURCE]  # no cross-model transfer runs: ρ_CE is not what this is about
    app.conf.task_always_eager = True  # the runs execute here (worker_env turned it off; it restores it)
    return mini


def install(slug: str) -> tuple[Submission, str]:
    out = StringIO()
    # the committed artifacts are read beside the repository's manifest; the tasks are the small registry's
    manifest = ROOT / "registry" / "reference_probes" / "manifest.yaml"
    call_command("install_reference_probes", only=slug, manifest=str(manifest), wait=900, stdout=out)
    sub = Submission.objects.filter(probe_version__probe__is_reference=True).latest("pk")
    return sub, out.getvalue()


def test_installing_the_second_reference_recomputes_the_dependents_auroc_ea_and_publishes_the_diff(
    board, trained, researcher, client
):
    from evaluator.metrics.metrics import auroc_ea
    from leaderboard.selectors.shared import ea_reference_version

    old_sub, _ = install(OLD)
    assert old_sub.status == "scored", old_sub.failure_reason
    old = old_sub.probe_version
    assert old.probe.reference_role == "eval_awareness" and old.probe.is_reference

    dependent_sub = submit_dir(researcher, trained["truth"])
    dependent_sub.refresh_from_db()
    assert dependent_sub.status == "scored", dependent_sub.failure_reason
    dependent = dependent_sub.probe_version
    before = Score.objects.get(probe_version=dependent, spec_id="v0.0.2")
    assert not before.components["auroc_ea"]["imputed"]
    own_runs = sorted(
        Run.objects.filter(probe_version=dependent).values_list("pk", "attempts", "finished_at")
    )

    new_sub, output = install(NEW)
    assert new_sub.status == "scored", new_sub.failure_reason
    new = new_sub.probe_version
    assert new.probe_id != old.probe_id  # a probe of its own; the first stays on the board as a record
    assert new.probe.reference_role == "eval_awareness"
    assert ea_reference_version(base_model=new.probe.base_model) == new
    assert Submission.objects.get(pk=old_sub.pk).status == "scored"

    update = ReferenceUpdate.objects.get(new_version=new)
    assert update.status == "completed" and update.error == "" and update.old_version == old
    [entry] = update.diff
    test_run = Run.objects.get(probe_version=dependent, kind=Run.Kind.SCORE, split="test")
    new_run = Run.objects.get(probe_version=new, kind=Run.Kind.REFERENCE, task=test_run.task)
    old_run = Run.objects.get(probe_version=old, kind=Run.Kind.REFERENCE, task=test_run.task)
    scores = [e["score"] for e in test_run.example_scores]
    labels = [e["label"] for e in test_run.example_scores]

    def ea_with(run):
        ref = {e["id"]: e["score"] for e in run.example_scores}
        return auroc_ea(scores, labels, [ref[e["id"]] for e in test_run.example_scores])

    assert entry["probe"] == dependent.probe.slug and entry["version"] == dependent.number
    assert entry["auroc_ea_before"] == pytest.approx(ea_with(old_run), abs=1e-9)
    assert entry["auroc_ea_before"] == before.measurements["auroc_ea"]
    assert entry["auroc_ea_after"] == pytest.approx(ea_with(new_run), abs=1e-9)
    after = Score.objects.get(probe_version=dependent, spec_id="v0.0.2")
    assert after.measurements["auroc_ea"] == pytest.approx(entry["auroc_ea_after"], abs=1e-9)
    assert after.measurements["auroc"] == before.measurements["auroc"]  # only auroc_ea moved
    assert entry["total_after"] == pytest.approx(after.total)
    # the dependent's own runs were not re-run: the recompute read stored scores
    assert own_runs == sorted(
        Run.objects.filter(probe_version=dependent).values_list("pk", "attempts", "finished_at")
    )

    # the diff is published, and the command printed it
    published = {u["reference_probe"]: u for u in client.get("/api/v1/reference-updates").json()}
    body = published[new.probe.slug]
    assert body["old_version"] == old.number and body["new_version"] == new.number
    assert body["diff"][0]["auroc_ea_after"] == pytest.approx(entry["auroc_ea_after"], abs=1e-9)
    assert published[old.probe.slug]["diff"] == []  # the first reference: nothing depended on it yet
    assert client.get(f"/reevaluations/reference-updates/{update.pk}/").status_code == 200
    assert f"reference update {update.pk}: completed" in output and dependent.probe.slug in output

    # installing it again submits nothing
    _, again = install(NEW)
    assert "already submitted" in again
    assert ReferenceUpdate.objects.filter(new_version=new).count() == 1
