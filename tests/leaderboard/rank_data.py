"""Probes scored the way the pipeline scores them (score runs with per-example results on a
task's rows, then the score writer), for the rank-interval, compare and operating-point tests."""

from __future__ import annotations

import numpy as np
from django.utils import timezone

from leaderboard import models as m
from leaderboard.services.scores import submission_score
from tests.factories import ProbeFactory, ProbeVersionFactory, SubmissionFactory
from tests.leaderboard.board_data import MODEL_A, board_owner

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


def twins_and_leader(tasks: list[m.Task]) -> dict[str, m.ProbeVersion]:
    """A clear leader and two twins that read the same weak signal and differ only by their own
    noise (the data cannot tell the twins apart)."""
    rng = np.random.default_rng(0)
    shared = {t.slug: 3 * rng.normal(size=N_ROWS) for t in tasks}
    return {
        "strong": worker_scored("strong", signal=3.0, seed=1, tasks=tasks),
        "twin-a": worker_scored("twin-a", signal=0.8, seed=2, tasks=tasks, shared=shared),
        "twin-b": worker_scored("twin-b", signal=0.8, seed=3, tasks=tasks, shared=shared),
    }
