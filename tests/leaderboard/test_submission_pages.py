"""The researcher's pages: the submission form, a submission's live status, the API token."""

import pytest
from django.urls import reverse

from tests.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def submission(registry, researcher):
    from tests.factories import ProbeFactory, ProbeVersionFactory

    version = ProbeVersionFactory(probe=ProbeFactory(owner=researcher))
    return SubmissionFactory(
        probe_version=version, submitter=researcher, status="running", step="1 of 6 runs finished"
    )


def test_the_submitter_sees_the_status_page_and_its_live_fragment(client, submission, researcher):
    client.force_login(researcher)
    page = client.get(reverse("submit:detail", args=[submission.pk]))
    assert page.status_code == 200
    assert b'data-status="running"' in page.content and b"1 of 6 runs finished" in page.content
    fragment = client.get(reverse("submit:status", args=[submission.pk]))
    assert fragment.status_code == 200
    assert fragment.content.lstrip().startswith(b'<div id="submission-status"')


def test_a_failed_submission_shows_why(client, submission, researcher):
    submission.status, submission.failure_reason = "failed", "cities-truth-v1/test: tensor 'weight' has NaN"
    submission.save()
    client.force_login(researcher)
    page = client.get(reverse("submit:detail", args=[submission.pk]))
    assert b"Why it failed" in page.content and b"has NaN" in page.content


def test_someone_elses_submission_page_is_404(client, submission, stranger):
    client.force_login(stranger)
    assert client.get(reverse("submit:detail", args=[submission.pk])).status_code == 404
    assert client.get(reverse("submit:status", args=[submission.pk])).status_code == 404


def test_the_form_needs_a_signed_in_user(client, registry):
    response = client.get(reverse("submit:new"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_token_form_is_csrf_protected(researcher):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(researcher)
    assert client.post(reverse("submit:token")).status_code == 403


# --------------------------------------------------------------------------- a directory `train` wrote


@pytest.fixture
def trained_dir(tmp_path, monkeypatch):
    """What ``python -m evaluator train`` writes (probe.safetensors + probe.json), by the command
    itself, with the model and its activations replaced (no model may load in these tests)."""
    from types import SimpleNamespace

    import numpy as np

    import evaluator.core.models
    from evaluator.commands import cli, train_cli
    from evaluator.core.recipes import TrainResult

    rng = np.random.default_rng(7)
    split = SimpleNamespace(
        ids=[f"r{i}" for i in range(20)],
        X=rng.normal(size=(20, 576)).astype(np.float32),  # smollm2-135m-instruct's width
        labels=np.array([0, 1] * 10),
        cache_key="k",
        cache_hit=True,
        split_sha256="0" * 64,
    )

    def train_recipe(recipe, lm, **kwargs):
        weight = rng.normal(size=576).astype(np.float32)
        tensors = {"weight": weight, "bias": np.zeros((), dtype=np.float32)}
        return TrainResult(recipe=recipe, model_id=lm.id, tensors=tensors, train=split, seconds=0.1)

    monkeypatch.setattr(
        evaluator.core.models,
        "load_model",
        lambda model, **kwargs: SimpleNamespace(id=model, describe=lambda: {"id": model}),
    )
    monkeypatch.setattr(train_cli, "train_recipe", train_recipe)
    monkeypatch.setattr(train_cli, "split_activations", lambda *args, layers, **kwargs: {layers[0]: split})
    out = tmp_path / "probe"
    argv = ["train", "--task", "halueval-qa-v1", "--model", "smollm2-135m-instruct", "--layer", "15"]
    argv += ["--method", "logistic_regression", "--out", str(out), "--cache-dir", str(tmp_path / "cache")]
    train_cli.run_train(cli.build_parser().parse_args(argv))
    return out


def test_the_web_form_takes_the_probe_json_that_train_wrote(client, registry, researcher, trained_dir):
    import json

    from django.core.files.uploadedfile import SimpleUploadedFile

    from leaderboard.models import ProbeVersion

    written = json.loads((trained_dir / "probe.json").read_text())
    assert written["recipe"]["task"] == "halueval-qa-v1"  # the file train writes, recipe inside
    client.force_login(researcher)
    page = client.get(reverse("submit:new")).content.decode()
    assert 'name="metadata"' in page and "probe.json" in page

    def files():
        return {
            "artifact": SimpleUploadedFile(
                "probe.safetensors", (trained_dir / "probe.safetensors").read_bytes()
            ),
            "metadata": SimpleUploadedFile("probe.json", (trained_dir / "probe.json").read_bytes()),
        }

    # nothing else filled in: the file describes the probe, its recipe included
    response = client.post(reverse("submit:new"), files())
    assert response.status_code == 302, response.context["form"].errors
    version = ProbeVersion.objects.get()
    assert version.probe.name == written["name"] and version.probe.owner == researcher
    assert (version.layer, version.position, version.license_id) == (15, "last_token", "Apache-2.0")
    assert version.recipe["task"] == "halueval-qa-v1"
    assert version.submission.via == "web"


def test_a_metadata_file_the_api_would_refuse_is_refused_next_to_it(
    client, registry, researcher, trained_dir
):
    import json

    from django.core.files.uploadedfile import SimpleUploadedFile

    from leaderboard.models import Probe

    client.force_login(researcher)
    artifact = (trained_dir / "probe.safetensors").read_bytes()
    broken = json.loads((trained_dir / "probe.json").read_text()) | {"layer": 99}
    for body, words in (
        (b"{not json", "metadata"),
        (b"[1, 2]", "must be a JSON object"),
        (json.dumps(broken).encode(), "layer"),
    ):
        response = client.post(
            reverse("submit:new"),
            {
                "artifact": SimpleUploadedFile("probe.safetensors", artifact),
                "metadata": SimpleUploadedFile("probe.json", body),
            },
        )
        assert response.status_code == 400, body
        errors = response.context["form"].errors
        assert list(errors) == ["metadata"], errors
        assert words in " ".join(errors["metadata"]), errors
    assert not Probe.objects.exists()
    # without the file, the fields it would fill are required as before
    response = client.post(
        reverse("submit:new"), {"artifact": SimpleUploadedFile("probe.safetensors", artifact)}
    )
    assert response.status_code == 400 and "name" in response.context["form"].errors
