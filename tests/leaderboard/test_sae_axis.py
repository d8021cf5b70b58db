"""The SAE axis (leaderboard/axes/sae.py): planned for SAE-feature probes only, one run per task
they read; its runs are shown on the probe page and in the probe API beside the probe (the same-k
neuron and dense baselines with their intervals, in-domain first, and the feature cards), and the
section says why while it shows nothing. The model page shows each registered SAE's card."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse
from django.utils import timezone

from leaderboard import models as m
from leaderboard.axes import sae as sae_axis
from tests.leaderboard.board_data import public_probe

pytestmark = pytest.mark.django_db
Run = m.EvaluationRun
SMOL = "smollm2-135m-instruct"
TRAIN_TASK, OTHER_TASK = "cities-truth-v1", "halueval-qa-v1"
SAE_ID = "smollm2-135m-instruct-l15-topk-w4608-k32-s0"
RECIPE = {
    "method": "sae_topk_meandiff",
    "task": TRAIN_TASK,
    "layer": 15,
    "position": "last_token",
    "input": "single",
    "hyperparameters": {"sae": SAE_ID, "k": 2},
}


def _task_record(task: str, *, in_domain: bool, sae: float, neurons: float) -> dict:
    return {
        "task_id": task,
        "in_domain": in_domain,
        "n": 120,
        "sae_auroc": sae,
        "sae_ci": [sae - 0.05, sae + 0.04],
        "neurons_auroc": neurons,
        "neurons_ci": [neurons - 0.05, neurons + 0.04],
        "dense_auroc": 0.97,
        "dense_ci": [0.95, 0.99],
        "sae_minus_neurons": sae - neurons,
        "sae_minus_neurons_ci": [sae - neurons - 0.03, sae - neurons + 0.03],
        "sae_minus_dense": sae - 0.97,
        "sae_minus_dense_ci": [sae - 1.0, sae - 0.94],
    }


FEATURES = [
    {
        "latent": 4021,
        "weight": 1.25,
        "frequency": 0.0125,
        "mean_when_active": 3.1,
        "max": 9.5,
        "top": [
            {
                "value": 9.5,
                "text_before": "the city of Lyon is in",
                "token": " Spain",
                "text_after": ", said the <b>",
                "document": 3,
                "position": 41,
            }
        ],
    },
    {"latent": 17, "weight": -0.5, "frequency": 0.0, "mean_when_active": None, "max": 0.0, "top": []},
]


@pytest.fixture
def sae_probe(registry):
    return public_probe(slug="cities-sae2", base_model=SMOL, kind="sae_features", recipe=RECIPE)


def _sae_run(version, task, record, *, features=None, status=Run.Status.SUCCEEDED):
    return Run.objects.create(
        probe_version=version,
        submission=version.submission,
        kind=sae_axis.KIND,
        task_id=task,
        split="test",
        base_model_id=SMOL,
        status=status,
        finished_at=timezone.now() if status == Run.Status.SUCCEEDED else None,
        metrics={
            "sae": {
                "sae_id": SAE_ID,
                "k": 2,
                "layer": 15,
                "train_task": TRAIN_TASK,
                "neurons": {"k": 2, "indices": [12, 400], "C": 0.1, "cv_auroc": 0.91},
                "dense": {"k": 576, "C": 0.01, "cv_auroc": 0.98},
                "tasks": [record],
                "features": features or [],
            }
        }
        if status == Run.Status.SUCCEEDED
        else {},
    )


def test_it_is_planned_for_an_sae_probe_on_every_task_it_reads_and_for_no_other_kind(sae_probe):
    tasks = list(m.Task.objects.filter(slug__in=[TRAIN_TASK, OTHER_TASK]))
    planned = sae_axis.plan(sae_probe, tasks)
    assert sorted((kind, t.slug, split) for _, kind, t, split, _ in planned) == [
        ("sae", TRAIN_TASK, "test"),
        ("sae", OTHER_TASK, "test"),
    ]
    linear = public_probe(
        slug="cities-linear", base_model=SMOL, recipe={**RECIPE, "method": "logistic_regression"}
    )
    assert sae_axis.plan(linear, tasks) == []


def test_without_one_registry_training_task_there_is_no_baseline(sae_probe):
    sae_probe.recipe = None
    sae_probe.metadata = {"trained_on": ["external"]}
    assert sae_axis.training_task(sae_probe) is None
    assert sae_axis.plan(sae_probe, list(m.Task.objects.filter(slug=TRAIN_TASK))) == []


def test_the_probe_page_and_api_show_the_baselines_in_domain_first_and_the_feature_cards(sae_probe, client):
    _sae_run(sae_probe, OTHER_TASK, _task_record(OTHER_TASK, in_domain=False, sae=0.61, neurons=0.70))
    _sae_run(
        sae_probe,
        TRAIN_TASK,
        _task_record(TRAIN_TASK, in_domain=True, sae=0.93, neurons=0.90),
        features=FEATURES,
    )
    page = client.get(reverse("leaderboard:probe", args=["cities-sae2"])).content.decode()
    section = page[page.index('id="h-sae"') :]
    section = section[: section.index("</section>")]
    assert section.index(TRAIN_TASK) < section.index(OTHER_TASK)  # in-domain first
    assert "(in-domain)" in section
    assert "0.930" in section and "0.700" in section and "−0.090" in section  # SAE − neurons, cross-domain
    assert "dimensions 12, 400" in section
    assert "4021" in section and "1.25%" in section
    assert "[<strong> Spain</strong>]" in section
    assert (
        "&lt;b&gt;" in section and "<b>" not in section.split("Strongest activations")[1]
    )  # snippets escaped
    assert "never fires on the held-out text" in section

    body = client.get(reverse("api:probe", args=["cities-sae2"])).json()
    assert body["sae"]["sae_id"] == SAE_ID and body["sae"]["train_task"] == TRAIN_TASK
    assert [t["task_id"] for t in body["sae"]["tasks"]] == [TRAIN_TASK, OTHER_TASK]
    assert body["sae"]["features"][0]["latent"] == 4021
    assert body["sae"]["note"] == ""


def test_while_its_runs_are_queued_the_section_says_so(sae_probe, client):
    _sae_run(sae_probe, TRAIN_TASK, {}, status=Run.Status.QUEUED)
    page = html.unescape(client.get(reverse("leaderboard:probe", args=["cities-sae2"])).content.decode())
    assert "pending: its sae runs are queued or running (0 of 1 finished)" in page
    body = client.get(reverse("api:probe", args=["cities-sae2"])).json()
    assert body["sae"]["tasks"] == [] and body["sae"]["note"].startswith("pending")


def test_another_kind_has_no_sae_section(registry, client):
    public_probe(slug="plain-linear", base_model=SMOL)
    page = client.get(reverse("leaderboard:probe", args=["plain-linear"])).content.decode()
    assert 'id="h-sae"' not in page
    assert client.get(reverse("api:probe", args=["plain-linear"])).json()["sae"] is None


def test_the_model_page_and_api_show_each_registered_sae_with_its_card(registry, client):
    import json
    from pathlib import Path

    from django.conf import settings

    from evaluator.data.registry.saes import load_saes

    saes = load_saes(Path(settings.REGISTRY_ROOT)).saes
    spec = saes[SAE_ID]
    card = json.loads((spec.directory(Path(settings.REGISTRY_ROOT)) / "card.json").read_text())
    page = client.get(reverse("leaderboard:model", args=[SMOL])).content.decode()
    section = page[page.index('id="h-saes"') :]
    assert (
        SAE_ID in section and f"{card['fve']:.3f}" in section and f"{card['loss_recovered']:.3f}" in section
    )
    assert f"{card['dead_latents']} of {spec.width}" in section
    models = {m_["slug"]: m_ for m_ in client.get(reverse("api:models")).json()}
    [listed] = models[SMOL]["saes"]
    assert listed["id"] == SAE_ID and listed["weights_sha256"] == spec.weights_sha256
    assert listed["card"]["fve"] == pytest.approx(card["fve"]) and listed["card"]["dead_latents"] == 0
    assert models["all-minilm-l6-v2"]["saes"] == []  # an encoder has none
    encoder = client.get(reverse("leaderboard:model", args=["all-minilm-l6-v2"])).content.decode()
    assert "No sparse autoencoder is registered for this model." in encoder
