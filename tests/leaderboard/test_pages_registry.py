"""Task, model and methodology pages: rendered from the registry rows, never from hard-coded numbers."""

import pytest
from django.urls import reverse

from leaderboard import models as m
from tests.leaderboard.board_data import MODEL_A, add_spec, ensure_models, ensure_tasks, public_probe


@pytest.fixture
def task(registry):
    ensure_models()
    task = ensure_tasks("hallucination", 1)[0]
    task.card = (
        "# Board test task\n\nBuilt from **real** items; see [the paper](https://example.org/p).\n\n"
        "- a list item\n- <script>alert('card')</script>\n\n| split | rows |\n|---|---|\n| test | 300 |\n"
        "[bad link](javascript:alert(1))\n"
    )
    task.caveats = "Labels are noisy."
    task.source = {
        "package": "eval-suite",
        "version": "2.1.4",
        "license": "MIT",
        "citation": "Li et al. 2023",
    }
    task.save()
    return task


def test_the_task_page_shows_source_splits_and_probes(client, task):
    public_probe(slug="on-task", name="On Task", tasks=[task], auroc=0.81)
    public_probe(slug="other-task", name="Elsewhere", tasks=[], auroc=0.9)
    html = client.get(reverse("leaderboard:task", args=[task.slug])).content.decode()
    assert "eval-suite" in html and "2.1.4" in html and "MIT" in html and "Li et al. 2023" in html
    for split in task.splits.all():
        assert split.sha256 in html
        assert f'<td class="num">{split.rows}</td>' in html
    assert "On Task" in html and "0.810" in html and "[0.780, 0.840]" in html
    assert "Elsewhere" not in html
    assert "Labels are noisy." in html


def test_the_task_card_is_rendered_as_safe_markdown(client, task):
    html = client.get(reverse("leaderboard:task", args=[task.slug])).content.decode()
    assert "<h2>Board test task</h2>" in html
    assert "<strong>real</strong>" in html
    assert '<a href="https://example.org/p" rel="nofollow noopener">the paper</a>' in html
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html
    assert '<th scope="col">split</th>' in html and "<td>300</td>" in html


def test_a_task_with_no_probe_is_an_open_slot(client, task):
    html = client.get(reverse("leaderboard:task", args=[task.slug])).content.decode()
    assert "be the first" in html


def test_a_task_whose_reference_probes_are_queued_says_they_are_being_measured(client, task):
    from tests.factories import EvaluationRunFactory, ProbeFactory, ProbeVersionFactory, SubmissionFactory

    def reference(status: str, run_status: str, task_on=task) -> None:
        version = ProbeVersionFactory(probe=ProbeFactory(is_reference=True))
        SubmissionFactory(probe_version=version, status=status)
        EvaluationRunFactory(probe_version=version, task=task_on, status=run_status)

    reference("queued", "queued")
    reference("running", "running")
    reference("running", "queued")  # running elsewhere, still queued on this task
    other = ensure_tasks("hallucination", 2)[1]
    reference("queued", "queued", task_on=other)  # queued on another task only
    page = client.get(reverse("leaderboard:task", args=[task.slug])).content.decode()
    assert "be the first" not in page
    assert 'id="task-pending"' in page
    assert "3 reference probes are being measured (1 running, 2 queued)" in page
    # once one is scored on it, the others are still said to be measured
    public_probe(slug="on-task", name="On Task", tasks=[task], auroc=0.81)
    page = client.get(reverse("leaderboard:task", args=[task.slug])).content.decode()
    assert "On Task" in page and "On this task, 3 reference probes are being measured" in page


def test_every_registry_task_page_renders(client, registry):
    for slug in m.Task.objects.values_list("slug", flat=True):
        assert client.get(reverse("leaderboard:task", args=[slug])).status_code == 200
    html = client.get(reverse("leaderboard:tasks")).content.decode()
    for slug in m.Task.objects.values_list("slug", flat=True):
        assert slug in html
    assert client.get(reverse("leaderboard:task", args=["nope-v1"])).status_code == 404


def test_a_superseded_task_points_at_its_successor(client, task):
    new = ensure_tasks("hallucination", 2)[1]
    task.status, task.superseded_by = "superseded", new
    task.save()
    html = client.get(reverse("leaderboard:task", args=[task.slug])).content.decode()
    assert "Superseded" in html and new.slug in html
    assert task.slug in client.get(reverse("leaderboard:task", args=[new.slug])).content.decode()


def test_model_pages(client, registry):
    ensure_models()
    public_probe(slug="on-a", name="Probe On A", base_model=MODEL_A)
    public_probe(slug="ea-on-a", name="EA On A", base_model=MODEL_A, category="eval_awareness")
    html = client.get(reverse("leaderboard:models")).content.decode()
    assert "Board Model A" in html and "Board Model B" in html
    html = client.get(reverse("leaderboard:model", args=[MODEL_A])).content.decode()
    assert "Probe On A" in html and "EA On A" in html and "576" in html
    html = client.get(reverse("leaderboard:model", args=["board-model-b"])).content.decode()
    assert "No probe on this model has been scored yet" in html
    assert client.get(reverse("leaderboard:model", args=["nope"])).status_code == 404


def test_the_methodology_page_renders_weights_and_licenses_from_the_rows(client, registry):
    spec = add_spec(
        "v0.0.9",
        auroc=0.27,
        auroc_ea=0.23,
        auroc_ds=0.15,
        calibration=0.10,
        rho_ce=0.10,
        latency=0.10,
        license=0.05,
    )
    m.License.objects.filter(spdx_id="custom").update(score=0.44)
    html = client.get(reverse("leaderboard:methodology")).content.decode()
    assert "v0.0.1" in html and "v0.0.9" in html
    assert "0.27" in html and "0.23" in html  # only in the v0.0.9 row
    assert "0.44" in html  # the changed license score
    assert spec.sha256 in html
    for name in ("Component cap", "License floor", "Silence costs", "Quarterly re-evaluation"):
        assert name in html
    assert "more than 5 AUROC points" in html and "more than 10" in html


def test_the_methodology_page_states_the_protocol_file_tolerances(client, registry, settings, tmp_path):
    """The tolerances shown are read from registry/protocols/<id>.yaml: change the file, the page follows."""
    import shutil

    source = settings.REGISTRY_ROOT
    root = tmp_path / "registry-root"
    (root / "registry").mkdir(parents=True)
    shutil.copy(source / "tasks.yaml", root / "tasks.yaml")
    for entry in (source / "registry").iterdir():
        if entry.name != "protocols":
            (root / "registry" / entry.name).symlink_to(entry)
    shutil.copytree(source / "registry" / "protocols", root / "registry" / "protocols")
    protocol = root / "registry" / "protocols" / "p2.yaml"
    protocol.write_text(protocol.read_text().replace("auroc: 0.002", "auroc: 0.0037"))
    html = client.get(reverse("leaderboard:methodology")).content.decode()
    assert "Measurement protocol p2" in html and "AUROC 0.002" in html
    settings.REGISTRY_ROOT = root
    html = client.get(reverse("leaderboard:methodology")).content.decode()
    assert "AUROC 0.0037" in html and "AUROC 0.002," not in html
