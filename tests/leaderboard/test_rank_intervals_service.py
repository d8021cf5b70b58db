"""Rank intervals are computed from the stored per-example scores when scores change, stored, and
kept in step with the board (a new version, a deprecation)."""

from __future__ import annotations

import numpy as np
import pytest
from django.utils import timezone

from leaderboard import models as m
from leaderboard.services.rank_intervals import (
    board_rank_intervals_write,
    rank_intervals_reconcile,
    rank_intervals_refresh,
)
from leaderboard.services.scores import submission_score
from tests.factories import ProbeFactory, ProbeVersionFactory, SubmissionFactory
from tests.leaderboard.board_data import MODEL_A, board_owner, ensure_models, ensure_tasks

pytestmark = pytest.mark.django_db
Run = m.EvaluationRun
N_ROWS = 160
LATENCY = {"probe_ms": 0.2, "device": "cpu", "model_forward_ms": 12.0}


def records(task: m.Task, split: str, *, signal: float, seed: int, shared: np.ndarray | None) -> list[dict]:
    """Per-example results on a task's rows (row ids are the task's): score = signal·label + noise."""
    rng = np.random.default_rng(seed)
    n = N_ROWS if split != "distshift" else N_ROWS // 2
    y = np.arange(n) % 2
    s = signal * y + rng.normal(size=n) + (0 if shared is None or split != "test" else shared[:n])
    p = 1 / (1 + np.exp(-s))
    return [
        {"id": f"{task.slug}-{split}-{i:04d}", "label": int(y[i]), "score": float(s[i]), "prob": float(p[i])}
        for i in range(n)
    ]


def worker_scored(
    slug: str,
    *,
    signal: float,
    seed: int,
    tasks: list[m.Task],
    shared: dict | None = None,
    number: int = 1,
    probe: m.Probe | None = None,
    base_model: str = MODEL_A,
) -> m.ProbeVersion:
    """A probe version scored as the pipeline scores it: score runs with per-example results on
    every task (test, train, distshift), then the score writer."""
    probe = probe or ProbeFactory(
        slug=slug,
        name=slug.title(),
        category_id="hallucination",
        base_model_id=base_model,
        owner=board_owner(),
    )
    version = ProbeVersionFactory(probe=probe, number=number, license_id="MIT")
    submission = SubmissionFactory(probe_version=version, status=m.Submission.Status.SCORED)
    runs = []
    for k, task in enumerate(tasks):
        for split in ("test", "train", "distshift"):
            runs.append(
                Run.objects.create(
                    probe_version=version,
                    submission=submission,
                    kind=Run.Kind.SCORE,
                    task=task,
                    split=split,
                    base_model=probe.base_model,
                    status=Run.Status.SUCCEEDED,
                    finished_at=timezone.now(),
                    example_scores=records(
                        task, split, signal=signal, seed=seed * 100 + k, shared=(shared or {}).get(task.slug)
                    ),
                    metrics={"latency": LATENCY, "baselines": None} if split == "test" else {},
                )
            )
    submission_score(submission=submission, runs=runs)
    return version


def interval(version: m.ProbeVersion, spec: str = "v0.0.1") -> m.RankInterval:
    return m.RankInterval.objects.get(score__probe_version=version, score__spec_id=spec)


@pytest.fixture
def tasks(registry):
    ensure_models()
    return ensure_tasks("hallucination", 2)


@pytest.fixture
def board(tasks, django_capture_on_commit_callbacks):
    """A clear leader and two twins that read the same weak signal and differ by their own noise."""
    rng = np.random.default_rng(0)
    shared = {t.slug: 3 * rng.normal(size=N_ROWS) for t in tasks}
    with django_capture_on_commit_callbacks(execute=True):
        strong = worker_scored("strong", signal=3.0, seed=1, tasks=tasks)
        twin_a = worker_scored("twin-a", signal=0.8, seed=2, tasks=tasks, shared=shared)
        twin_b = worker_scored("twin-b", signal=0.8, seed=3, tasks=tasks, shared=shared)
    return {"strong": strong, "twin-a": twin_a, "twin-b": twin_b}


def test_scoring_computes_and_stores_the_rank_intervals_of_the_board(board):
    strong, twin_a, twin_b = board["strong"], board["twin-a"], board["twin-b"]
    assert m.RankInterval.objects.filter(score__spec_id="v0.0.1").count() == 3
    top = interval(strong)
    assert (top.rank, top.rank_lo, top.rank_hi, top.tie_group) == (1, 1, 1, 1)
    assert not top.tied_for_first  # alone at the top
    assert top.score_lo < m.Score.objects.get(probe_version=strong, spec_id="v0.0.1").total < top.score_hi
    a, b = interval(twin_a), interval(twin_b)
    assert a.tie_group == b.tie_group == 2  # noise only: they cannot be told apart
    assert {a.rank, b.rank} == {2, 3} and (a.rank_lo, a.rank_hi) == (b.rank_lo, b.rank_hi) == (2, 3)
    assert a.n_entries == 3 and a.n_resamples == 1000


def test_a_current_board_is_not_recomputed(board):
    assert rank_intervals_refresh(category_id="hallucination") == {"v0.0.1": None}
    assert rank_intervals_reconcile() == 0
    assert board_rank_intervals_write(category_id="hallucination", spec_id="v0.0.1", force=True) == 3


def test_a_new_version_replaces_the_old_entry(board, tasks, django_capture_on_commit_callbacks):
    old = board["twin-b"]
    with django_capture_on_commit_callbacks(execute=True):
        new = worker_scored("twin-b", signal=6.0, seed=9, tasks=tasks, probe=old.probe, number=2)
    assert not m.RankInterval.objects.filter(score__probe_version=old).exists()
    assert interval(new).rank == 1 and interval(new).tie_group == 1
    assert interval(board["strong"]).rank == 2


def test_a_deprecated_probe_leaves_the_board_and_the_reconciler_recomputes_it(board):
    m.Probe.objects.filter(slug="strong").update(status=m.Probe.Status.DEPRECATED)
    assert rank_intervals_reconcile() == 1
    assert not m.RankInterval.objects.filter(score__probe_version=board["strong"]).exists()
    a, b = interval(board["twin-a"]), interval(board["twin-b"])
    assert a.n_entries == 2 and a.tied_for_first and b.tied_for_first
