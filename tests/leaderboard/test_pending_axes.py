"""A probe is scored once the runs the board ranks on have finished; its secondary axes (transfer,
reproduce, steer) are shown as pending, with progress, on the board row, the probe page and in
the probe API, and the Score is recomputed from stored results as each of them finishes."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse
from django.utils import timezone

from leaderboard import models as m
from leaderboard.selectors.progress import pending_axes
from leaderboard.services.lifecycle import evaluation_run_fan_out, evaluation_runs_reconcile
from leaderboard.services.submissions import submission_advance
from tests.leaderboard.board_data import public_probe
from tests.leaderboard.reevaluation_data import synthetic_scores

pytestmark = pytest.mark.django_db
Run = m.EvaluationRun
SMOL, GEMMA, ENCODER = "smollm2-135m-instruct", "gemma-3-270m", "all-minilm-l6-v2"
TASK = "halueval-qa-v1"


@pytest.fixture
def queued(registry):
    """A submission whose score runs succeeded while its secondary runs are still queued."""
    recipe = {"method": "logistic_regression", "task": TASK, "layer": 15, "position": "last_token"}
    version = public_probe(
        slug="half-done", base_model=SMOL, status=m.Submission.Status.RUNNING, recipe=recipe
    )
    sub = version.submission

    def run(kind, split="test", model=SMOL, **kwargs):
        return Run.objects.create(
            probe_version=version,
            submission=sub,
            kind=kind,
            task_id=TASK,
            split=split,
            base_model_id=model,
            **kwargs,
        )

    for split in ("test", "train"):
        run(
            Run.Kind.SCORE,
            split,
            status=Run.Status.SUCCEEDED,
            finished_at=timezone.now(),
            example_scores=synthetic_scores(0.8),
            metrics={"latency": {"probe_ms": 0.2, "device": "cpu"}} if split == "test" else {},
        )
    transfers = [run(Run.Kind.TRANSFER, model=GEMMA), run(Run.Kind.TRANSFER, model=ENCODER)]
    run(Run.Kind.REPRODUCE, "train")
    run(Run.Kind.STEER)
    return version, transfers


def _finish_transfer(run: Run, pearson: float) -> None:
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.SUCCEEDED, finished_at=timezone.now(), metrics={"transfer": {"pearson": pearson}}
    )


def test_a_submission_is_scored_before_its_secondary_runs_and_says_what_is_pending(queued, client):
    version, _ = queued
    assert submission_advance(submission=version.submission) is not None
    version.refresh_from_db()
    assert version.submission.status == m.Submission.Status.SCORED
    assert version.submission.step == "scored; 4 secondary run(s) pending"
    assert version.submission.progress == pytest.approx(2 / 6)  # 1.0 only once every axis is in
    assert version.reproduced is None  # not "not reproduced": its run has not run yet
    score = version.scores.order_by("-spec_id").first()
    assert score.measurements["imputed"]["rho_ce"].startswith("pending: transfer to")
    labels = [a.label for a in pending_axes(version_ids=[version.pk])[version.pk]]
    assert labels == ["transfer pending", "reproduce pending", "steer pending"]

    board = client.get(reverse("leaderboard:category", args=["hallucination"])).content.decode()
    assert "pending: transfer pending, reproduce pending, steer pending" in board
    page = client.get(reverse("leaderboard:probe", args=["half-done"])).content.decode()
    assert 'id="pending-axes"' in page and "transfer pending" in page
    body = client.get("/api/v1/probes/half-done").json()
    assert body["pending_axes"][0] == {"axis": "transfer", "done": 0, "total": 2, "label": "transfer pending"}


def test_the_score_is_recomputed_as_each_secondary_run_finishes(queued, client):
    version, (to_gemma, to_encoder) = queued
    submission_advance(submission=version.submission)
    _finish_transfer(to_gemma, 0.6)
    evaluation_run_fan_out(Run.objects.get(pk=to_gemma.pk))
    score = version.scores.order_by("-spec_id").first()
    assert "pending" in score.measurements["imputed"]["rho_ce"]  # one target still to go
    assert [a.label for a in pending_axes(version_ids=[version.pk])[version.pk]][0] == "transfer 1/2"
    assert client.get("/api/v1/probes/half-done").json()["pending_axes"][0]["label"] == "transfer 1/2"

    _finish_transfer(to_encoder, 0.4)  # its fan-out is lost: the reconciler rescored it
    report = evaluation_runs_reconcile(dispatch=lambda run_id: None)
    assert report["secondary_rescored"] == 1
    score = version.scores.order_by("-spec_id").first()
    assert "rho_ce" not in score.measurements["imputed"]
    assert score.measurements["transfer"] == {GEMMA: 0.6, ENCODER: 0.4}
    assert [a.axis for a in pending_axes(version_ids=[version.pk])[version.pk]] == ["reproduce", "steer"]
    assert evaluation_runs_reconcile(dispatch=lambda run_id: None)["secondary_rescored"] == 0

    for run in Run.objects.filter(probe_version=version, kind__in=[Run.Kind.REPRODUCE, Run.Kind.STEER]):
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error="x", finished_at=timezone.now())
        evaluation_run_fan_out(run)
    sub = m.Submission.objects.get(pk=version.submission.pk)
    assert (sub.status, sub.step, sub.progress) == ("scored", "scored", 1.0)
    assert pending_axes(version_ids=[version.pk]) == {}


def _section(page: str, anchor: str) -> str:
    start = page.index(anchor)
    return page[start : page.index("</section>", start)]


def _component_row(page: str, label: str) -> str:
    start = page.index(f'<th scope="row">{label}</th>')
    return page[start : page.index("</tr>", start)]


def test_the_probe_page_says_pending_where_an_axis_is_pending_and_n_a_only_where_it_cannot_apply(
    queued, client
):
    version, (to_gemma, to_encoder) = queued
    submission_advance(submission=version.submission)
    page = html.unescape(client.get(reverse("leaderboard:probe", args=["half-done"])).content.decode())
    assert "steer pending" in page  # the badge
    # a linear probe on a decoder: direction utility applies; its run is queued
    steer = _section(page, 'id="h-steer"')
    assert "pending: its steer runs are queued or running (0 of 1 finished)" in steer
    assert "n/a" not in steer and "needs a linear probe" not in steer
    # it has a recipe, whose reproduction is queued
    assert "Reproduction</dt><dd>pending: its run is queued or running" in page
    assert "no recipe" not in page and "<h3>Recipe</h3>" in page
    # ρ_CE: imputed while its transfer runs are queued, and said so
    rho = _component_row(page, "Transfer ρ")
    assert "<em>pending</em>" in rho and "pending: transfer to" in rho
    assert "no re-fit possible" not in rho and "imputed:" not in rho
    transfer = _section(page, 'id="h-transfer"')
    assert transfer.count("<em>pending</em>") == 2  # each target's run is queued

    # the runs finish: one transfer succeeds, one fails; the steer and reproduce runs fail
    _finish_transfer(to_gemma, 0.6)
    for run in Run.objects.filter(probe_version=version).exclude(pk=to_gemma.pk).exclude(kind=Run.Kind.SCORE):
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error="x", finished_at=timezone.now())
    for run in Run.objects.filter(probe_version=version).exclude(kind=Run.Kind.SCORE):
        evaluation_run_fan_out(run)
    page = html.unescape(client.get(reverse("leaderboard:probe", args=["half-done"])).content.decode())
    assert 'id="pending-axes"' not in page
    assert "not measured: its steer run failed" in _section(page, 'id="h-steer"')
    assert "Reproduction</dt><dd>not run: its run failed" in page
    rho = _component_row(page, "Transfer ρ")
    assert "pending" not in rho and "transfer failed on" in rho
    transfer = _section(page, 'id="h-transfer"')
    assert "<em>failed</em>" in transfer and "0.600" in transfer


def test_a_probe_with_no_recipe_and_no_secondary_run_says_so(registry, client, settings):
    public_probe(slug="no-recipe", base_model=SMOL)

    def page() -> str:
        return html.unescape(client.get(reverse("leaderboard:probe", args=["no-recipe"])).content.decode())

    # the tests' settings turn the steer, stress and robustness axes off: the page says so
    assert "this board does not run the direction utility axis" in _section(page(), 'id="h-steer"')
    settings.STEER_RUNS = settings.STRESS_RUNS = True
    shown = page()
    assert "Reproduction</dt><dd>not run (no recipe)" in shown
    assert "n/a: not measured (direction utility needs a linear probe" in _section(shown, 'id="h-steer"')
    assert "the probe has no recipe, so it cannot be re-fit" in _section(shown, 'id="h-transfer"')
    assert "n/a: not measured (no task of this probe has a stress split" in _section(shown, 'id="h-stress"')
    assert "pending" not in _section(shown, 'id="h-stress"')
