"""The breakdown by domain and by source on the board: the score writer stores it per task (and a
rescore adds it to a Score stored before it), the probe page and the probe API show it, and the
category page says which of the methodology's named domains no task of the category has rows in.

The test split's rows are given their domain and source here (a copy of the real file with the two
keys added, pinned in the TaskSplit row), so the numbers checked do not depend on the committed data."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from django.urls import reverse

from evaluator.metrics import metrics as mt
from evaluator.metrics.breakdown import MIN_ROWS_PER_CLASS, wilson_interval
from leaderboard import models as m
from leaderboard.services.coverage import rescore_category
from leaderboard.services.scores import submission_score
from tests.leaderboard.test_onpolicy_tasks import SMOL, _finish, _queued, _scored_test_rows, synced  # noqa: F401

pytestmark = pytest.mark.django_db

TASK = "cities-truth-v1"
#: a source name that is markup: the pages must escape it
MARKUP_SOURCE = "<b>geo</b>"


def _domain(k: int) -> str:
    return "medicine" if k % 10 == 0 else "geography"  # medicine: too few rows of each class


def _source(k: int) -> str:
    return MARKUP_SOURCE if k % 2 else "geonames"


def _labelled_split(tmp_path, domain=_domain) -> tuple[str, str]:
    """The task's real test split with a domain and a source on each row, as a pinned file."""
    from django.conf import settings

    split = m.TaskSplit.objects.get(task_id=TASK, name="test", base_model=None)
    rows = [json.loads(line) for line in (settings.REGISTRY_ROOT / split.path).read_text().splitlines()]
    data = "".join(
        json.dumps({**row, "domain": domain(k), "source": _source(k)}) + "\n" for k, row in enumerate(rows)
    ).encode()
    path = tmp_path / f"{TASK}-test.jsonl"
    path.write_bytes(data)
    return str(path), hashlib.sha256(data).hexdigest()


def _pin(category: str, path: str, sha: str) -> None:
    """Every active test split of ``category`` points at the labelled file (an absolute path wins
    over the registry root it is joined to)."""
    m.TaskSplit.objects.filter(
        task__category_id=category, task__status=m.Task.Status.ACTIVE, name="test"
    ).update(path=path, sha256=sha)


@pytest.fixture
def scored(synced, tmp_path):  # noqa: F811
    """A scored probe on TASK whose Score was stored before the breakdown existed, then rescored
    with the labelled split pinned."""
    version = _queued("by-domain", SMOL)
    runs = _finish(version, {TASK: 0.9})
    test_run = next(r for r in runs if r.split == "test")
    test_run.example_scores = _scored_test_rows(synced, TASK, None, seed=7)
    test_run.save(update_fields=["example_scores"])
    [score, *_] = submission_score(submission=version.submission, runs=runs)
    m.Submission.objects.filter(pk=version.submission.pk).update(status=m.Submission.Status.SCORED)
    old = {k: v for k, v in score.per_task[TASK].items() if k not in ("by_domain", "by_source")}
    m.Score.objects.filter(probe_version=version).update(per_task={TASK: old})
    path, sha = _labelled_split(tmp_path)
    _pin("hallucination", path, sha)
    assert rescore_category("hallucination", force=True)
    return version, test_run


def test_a_rescored_score_carries_the_breakdown_by_domain_and_source(scored):
    version, test_run = scored
    after = m.Score.objects.filter(probe_version=version).latest("computed_at")
    task = after.per_task[TASK]
    ids = [e["id"] for e in test_run.example_scores]
    y = np.array([e["label"] for e in test_run.example_scores])
    s = np.array([e["score"] for e in test_run.example_scores])
    order = {json.loads(line)["id"]: k for k, line in enumerate(Path(_split_path()).read_text().splitlines())}
    geo = [i for i, row_id in enumerate(ids) if _domain(order[row_id]) == "geography"]
    g = task["by_domain"]["geography"]
    assert g["status"] == "measured" and g["n_pos"] == int(y[geo].sum())
    assert g["auroc"] == pytest.approx(mt.auroc(s[geo], y[geo]))
    assert g["auroc_ci"] == pytest.approx(list(mt.auroc_ci(s[geo], y[geo])))
    threshold = task["threshold_1pct_fpr"]
    hits = int((s[geo][y[geo] == 1] > threshold).sum())
    assert g["recall_at_1pct_fpr"] == pytest.approx(hits / int(y[geo].sum()))
    assert g["recall_at_1pct_fpr_ci"] == pytest.approx(list(wilson_interval(hits, int(y[geo].sum()))))
    med = task["by_domain"]["medicine"]
    assert med["status"] == "too_few_rows" and med["auroc"] is None
    assert min(med["n_pos"], med["n_neg"]) < MIN_ROWS_PER_CLASS
    assert sorted(task["by_source"]) == sorted(["geonames", MARKUP_SOURCE])


def _split_path() -> str:
    return m.TaskSplit.objects.get(task_id=TASK, name="test", base_model=None).path


def test_the_probe_page_shows_the_tables_escaped(scored, client):
    version, _ = scored
    page = client.get(reverse("leaderboard:probe", args=[version.probe.slug])).content.decode()
    assert "By domain and by source" in page
    assert f'id="by-domain-{TASK}"' in page and f'id="by-source-{TASK}"' in page
    assert f"too few rows (n &lt; {MIN_ROWS_PER_CLASS} per class)" in page
    after = m.Score.objects.filter(probe_version=version).latest("computed_at")
    geo = after.per_task[TASK]["by_domain"]["geography"]
    assert f"{geo['auroc']:.3f} [{geo['auroc_ci'][0]:.3f}, {geo['auroc_ci'][1]:.3f}]" in page
    assert "&lt;b&gt;geo&lt;/b&gt;" in page and MARKUP_SOURCE not in page


def test_the_probe_api_publishes_the_breakdown(scored, client):
    version, _ = scored
    body = client.get(reverse("api:probe", args=[version.probe.slug])).json()
    [task] = [t for t in body["tasks"] if t["task"] == TASK]
    groups = {g["group"]: g for g in task["by_domain"]}
    assert list(groups) == ["geography", "medicine"]
    assert groups["medicine"]["status"] == "too_few_rows" and groups["medicine"]["auroc_ci"] is None
    assert groups["geography"]["status"] == "measured" and len(groups["geography"]["auroc_ci"]) == 2
    assert set(groups["geography"]) == {
        "group", "n_pos", "n_neg", "status", "auroc", "auroc_ci", "recall_at_1pct_fpr", "recall_at_1pct_fpr_ci"
    }  # fmt: skip
    assert {g["group"] for g in task["by_source"]} == {"geonames", MARKUP_SOURCE}


def test_the_api_schema_documents_the_fields(client):
    schema = client.get(reverse("api:schema"), {"format": "json"}).json()
    props = schema["components"]["schemas"]["TaskResultOutput"]["properties"]
    assert "domain" in props["by_domain"]["description"] and "source" in props["by_source"]["description"]
    group = schema["components"]["schemas"]["GroupResultOutput"]["properties"]
    assert "Wilson" in group["recall_at_1pct_fpr_ci"]["description"]


def test_the_category_page_names_the_domains_no_task_has(synced, client, tmp_path):  # noqa: F811
    path, sha = _labelled_split(tmp_path)  # geography and medicine rows only
    _pin("hallucination", path, sha)
    page = client.get(reverse("leaderboard:category", args=["hallucination"])).content.decode()
    assert (
        "No task of this category has law or code rows: the board cannot say how its probes do there." in page
    )


def test_the_category_page_says_nothing_when_every_named_domain_is_there(synced, client, tmp_path):  # noqa: F811
    path, sha = _labelled_split(tmp_path, domain=lambda k: ("medicine", "law", "code")[k % 3])
    _pin("hallucination", path, sha)
    page = client.get(reverse("leaderboard:category", args=["hallucination"])).content.decode()
    assert 'id="missing-domains"' not in page
