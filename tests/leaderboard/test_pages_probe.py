"""The probe page: metadata, scores, per-task results, charts, history, records, artifact download."""

import xml.etree.ElementTree as ET

import pytest
from django.urls import reverse

from tests.factories import CycleResultFactory, LeakageRecordFactory, ReevaluationCycleFactory
from tests.leaderboard.board_data import (
    add_spec,
    board_owner,
    ensure_models,
    ensure_tasks,
    public_probe,
    score_for,
)


@pytest.fixture
def probe_version(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 2)
    return public_probe(
        slug="halu-lr",
        name="HaluEval LR",
        auroc=0.86,
        auroc_ea=0.8,
        tasks=tasks,
        authors=["Ada Lovelace", "Grace Hopper"],
        paper_url="https://example.org/paper",
        description="A logistic probe on the residual stream.",
        recipe={"method": "logistic_regression", "task": tasks[0].slug, "layer": 15, "seed": 0},
        reproduced=True,
        reproduction={"cosine": 0.99, "auroc_diff": 0.001},
        declared_metrics={"auroc": 0.95, "ece": 0.05},
        declared_gaps={"auroc": {"declared": 0.95, "measured": 0.86, "gap": -0.09}},
        training_data={"tasks": [tasks[0].slug], "external": ""},
        extra_measurements={"transfer": {"board-model-b": 0.42}},
    )


def get(client, slug="halu-lr", **params):
    response = client.get(reverse("leaderboard:probe", args=[slug]), params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_the_probe_page_shows_metadata_score_and_per_task_results(client, probe_version):
    html = get(client)
    assert "HaluEval LR" in html and "Ada Lovelace, Grace Hopper" in html
    assert probe_version.artifact_sha256 in html
    assert "A logistic probe on the residual stream." in html
    score = probe_version.scores.get(spec="v0.0.2")
    assert f"{score.total:.3f}" in html
    for task in ensure_tasks("hallucination", 2):
        assert task.slug in html
    assert "[0.830, 0.890]" in html  # per-task 95% interval
    assert "&quot;logistic_regression&quot;" in html  # the recipe, escaped in a <pre>
    assert ">reproduced<" in html
    # baselines and lift
    assert "Random direction" in html and "0.520" in html
    # transfer table
    assert "Board Model B" in html and "0.420" in html
    # imputed components are marked with their note
    assert "imputed 0.7× raw AUROC" in html


def test_declared_vs_measured_is_shown_and_flagged(client, probe_version):
    html = get(client)
    assert "declared≠measured" in html
    assert 'class="flagged"' in html and "0.950" in html and "-0.090" in html


def test_roc_and_reliability_charts_are_inline_svg(client, probe_version):
    html = get(client)
    assert html.count("<svg") == 2  # no history yet
    assert "False-positive rate" in html and "True-positive rate" in html
    assert "Mean predicted probability" in html and "Observed positive rate" in html
    assert "Not re-evaluated yet" in html


def test_history_over_quarters(client, probe_version):
    owner = board_owner()
    for quarter, holdout, outcome in (("2026Q1", 0.85, "held"), ("2026Q2", 0.79, "dropped")):
        cycle = ReevaluationCycleFactory(quarter=quarter, triggered_by=owner)
        CycleResultFactory(
            cycle=cycle,
            probe_version=probe_version,
            reference_auroc=0.86,
            holdout_auroc=holdout,
            test_auroc=0.86,
            outcome=outcome,
        )
    html = get(client)
    assert html.count("<svg") == 3
    assert "History over quarters" in html and "2026Q1" in html and "2026Q2" in html
    assert "dropped" in html and "7.0" in html  # the drop in points


def test_confirmed_leakage_records_are_shown_forever(client, probe_version):
    LeakageRecordFactory(
        probe=probe_version.probe,
        status="confirmed",
        summary="trained on the test split",
        public_note="Overlap of 120 test items with the declared training data.",
        evidence={"overlap": 120},
    )
    LeakageRecordFactory(probe=probe_version.probe, status="open", summary="an open suspicion")
    LeakageRecordFactory(probe=probe_version.probe, status="dismissed", summary="a dismissed suspicion")
    html = get(client)
    assert "leakage detected" in html and "trained on the test split" in html
    assert "Overlap of 120 test items" in html
    assert "an open suspicion" not in html and "a dismissed suspicion" not in html


def test_deprecated_probe_shows_the_reason(client, probe_version):
    probe = probe_version.probe
    probe.status, probe.deprecated_reason = "deprecated", "holdout AUROC dropped 12 points in 2026Q3"
    probe.save()
    html = get(client)
    assert "Deprecated" in html and "holdout AUROC dropped 12 points in 2026Q3" in html


def test_versions_and_the_spec_switch(client, probe_version):
    v2 = public_probe(slug="halu-lr", probe=probe_version.probe, number=2, auroc=0.9)
    public_probe(slug="halu-lr", probe=probe_version.probe, number=3, auroc=0.5, status="rejected")
    html = get(client)
    assert "v2" in html and "(latest)" in html and "v3" not in html
    html = get(client, version="1")
    assert probe_version.artifact_sha256 in html
    assert client.get(reverse("leaderboard:probe", args=["halu-lr"]), {"version": "3"}).status_code == 404
    add_spec("v0.0.9")
    score_for(v2, spec="v0.0.9", auroc=0.9)
    html = get(client, spec="v0.0.9")
    assert "under weights spec v0.0.9" in html
    assert f"{v2.scores.get(spec='v0.0.9').total:.3f}" in html
    html = get(client, spec="v0.0.1")
    assert "v0.0.9" in html  # the switch offers the other spec


def test_eval_awareness_probe_shows_auroc_ea_as_not_applicable(client, registry):
    ensure_models()
    tasks = ensure_tasks("eval_awareness", 1)
    public_probe(slug="ea-ref", name="EA reference", category="eval_awareness", tasks=tasks)
    html = get(client, "ea-ref")
    assert "n/a" in html


def test_a_probe_without_a_public_version_is_a_404(client, registry):
    ensure_models()
    for status in ("queued", "failed", "rejected"):
        public_probe(slug=f"hidden-{status}", status=status)
        assert client.get(reverse("leaderboard:probe", args=[f"hidden-{status}"])).status_code == 404
    assert client.get(reverse("leaderboard:probe", args=["nope"])).status_code == 404


def test_the_artifact_of_a_public_version_downloads(client, probe_version, settings, tmp_path):
    settings.ARTIFACT_ROOT = tmp_path
    path = tmp_path / probe_version.artifact_path
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    response = client.get(reverse("leaderboard:artifact", args=["halu-lr", 1]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert (
        "attachment" in response["Content-Disposition"]
        and "halu-lr-v1.safetensors" in response["Content-Disposition"]
    )
    assert response["X-Artifact-SHA256"] == probe_version.artifact_sha256
    assert b"".join(response.streaming_content) == path.read_bytes()


def test_artifacts_of_hidden_versions_or_outside_the_root_are_refused(
    client, probe_version, settings, tmp_path
):
    settings.ARTIFACT_ROOT = tmp_path / "artifacts"
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "secret.txt").write_text("not an artifact")
    hidden = public_probe(slug="halu-lr", probe=probe_version.probe, number=2, status="rejected")
    (tmp_path / "artifacts" / "x").mkdir()
    for version in (hidden,):
        version.artifact_path = "x/hidden.safetensors"
        version.save()
        (tmp_path / "artifacts" / "x" / "hidden.safetensors").write_bytes(b"hidden")
    assert client.get(reverse("leaderboard:artifact", args=["halu-lr", 2])).status_code == 404
    probe_version.artifact_path = "../secret.txt"
    probe_version.save()
    assert client.get(reverse("leaderboard:artifact", args=["halu-lr", 1])).status_code == 404
    assert client.get(reverse("leaderboard:artifact", args=["halu-lr", 9])).status_code == 404


def test_the_probe_page_runs_a_constant_number_of_queries(
    client, probe_version, django_assert_max_num_queries
):
    owner = board_owner()
    for i in range(6):
        cycle = ReevaluationCycleFactory(
            quarter=f"2027Q{i % 4 + 1}" if i < 4 else f"2028Q{i - 3}", triggered_by=owner
        )
        CycleResultFactory(cycle=cycle, probe_version=probe_version)
        LeakageRecordFactory(probe=probe_version.probe, status="confirmed")
    # + the tasks it can read (tasks, own split files) and its pending axes: 3, whatever the data
    with django_assert_max_num_queries(15):
        get(client)


def test_the_svg_is_well_formed(client, probe_version):
    html = get(client)
    start = html.index("<svg")
    end = html.index("</svg>", start) + len("</svg>")
    root = ET.fromstring(html[start:end])
    assert root.get("role") == "img"
