"""On-policy tasks in the leaderboard: sync_registry mirrors the per-model split files, a probe is
planned on its own model's files only (the encoder on none), ρ_CE re-fits only on targets that have
the behaviour, and every Score carries lift over text (probe AUROC − the strongest text-only
baseline's on the same rows, with DeLong's paired interval)."""

from __future__ import annotations

import pytest

from evaluator.data.builders.onpolicy import CITY_COUNTRY_ID
from evaluator.data.registry.load import load_registry
from leaderboard import models as m
from leaderboard.registry_sync import registry_sync
from leaderboard.services.runs import evaluation_runs_plan
from leaderboard.services.scores import submission_score
from tests.leaderboard.board_data import public_probe
from tests.leaderboard.reevaluation_data import synthetic_scores

pytestmark = pytest.mark.django_db
SMOL, GEMMA, ENCODER = "smollm2-135m-instruct", "gemma-3-270m", "all-minilm-l6-v2"
QWEN = "qwen2.5-coder-0.5b-instruct"
Run = m.EvaluationRun


@pytest.fixture
def synced():
    registry_sync()
    return load_registry()


def test_sync_mirrors_each_models_files_and_the_text_baselines(synced):
    task = m.Task.objects.get(slug=CITY_COUNTRY_ID)
    spec = synced.task(CITY_COUNTRY_ID)
    assert task.on_policy
    rows = {(s.base_model_id, s.name): s.sha256 for s in task.splits.all()}
    assert rows == {
        (model, name): split.sha256
        for model, splits in spec.splits_by_model.items()
        for name, split in splits.items()
    }
    assert task.measured_on(SMOL) and not task.measured_on(ENCODER)
    assert task.text_panel(SMOL)["sha256"] == spec.text_panel_sha256(SMOL)
    assert task.text_panel(SMOL)["model"] == SMOL and "scores" not in task.text_panel(SMOL)
    assert task.text_panel(ENCODER) == {}
    halueval = m.Task.objects.get(slug="halueval-qa-v1")
    assert not halueval.on_policy and halueval.splits.filter(base_model__isnull=False).count() == 0
    assert halueval.text_panel()["sha256"] == synced.task("halueval-qa-v1").text_panel_sha256()
    assert set(halueval.text_panel()["members"]) >= {"length", "word_tfidf", "char_tfidf", "minilm", "stack"}
    assert registry_sync().changed == 0


def _queued(slug: str, base_model: str, **kwargs) -> m.ProbeVersion:
    return public_probe(slug=slug, base_model=base_model, status=m.Submission.Status.QUEUED, **kwargs)


def test_a_probe_is_planned_on_its_own_models_files_and_the_encoder_on_none(synced):
    smol = _queued("smol-probe", SMOL)
    planned = evaluation_runs_plan(version=smol, submission=smol.submission)
    assert {r.split for r in planned if r.task_id == CITY_COUNTRY_ID and r.kind == Run.Kind.SCORE} == {
        "train",
        "test",
        "distshift",
    }
    encoder = _queued("encoder-probe", ENCODER, layer=3)
    planned = evaluation_runs_plan(version=encoder, submission=encoder.submission)
    assert CITY_COUNTRY_ID not in {r.task_id for r in planned}
    assert {r.task_id for r in planned if r.kind == Run.Kind.SCORE} >= {"halueval-qa-v1", "cities-truth-v1"}


def test_transfer_re_fits_only_on_models_with_the_behaviour(synced, settings):
    settings.ENABLED_MODELS = [SMOL, GEMMA, ENCODER]
    recipe = {"method": "logistic_regression", "task": CITY_COUNTRY_ID, "layer": 15, "position": "last_token"}
    version = _queued("recipe-probe", SMOL, recipe=recipe)
    planned = evaluation_runs_plan(version=version, submission=version.submission)
    targets = {r.base_model_id for r in planned if r.kind == Run.Kind.TRANSFER}
    has_behaviour = set(synced.task(CITY_COUNTRY_ID).splits_by_model) & set(settings.ENABLED_MODELS) - {SMOL}
    assert targets == has_behaviour and ENCODER not in targets
    # a deployment that turns the recipe runs off plans neither the re-fits nor the reproduction
    settings.RECIPE_RUNS = False
    other = _queued("recipe-probe-2", SMOL, recipe=recipe)
    kinds = {r.kind for r in evaluation_runs_plan(version=other, submission=other.submission)}
    assert Run.Kind.SCORE in kinds and not kinds & {Run.Kind.TRANSFER, Run.Kind.REPRODUCE}


def _finish(version: m.ProbeVersion, auroc_by_task: dict[str, float]) -> list[Run]:
    runs = []
    for task_id, auroc in auroc_by_task.items():
        for split in ("test", "train"):
            runs.append(
                Run.objects.create(
                    probe_version=version,
                    submission=version.submission,
                    kind=Run.Kind.SCORE,
                    task_id=task_id,
                    split=split,
                    base_model_id=version.probe.base_model_id,
                    status=Run.Status.SUCCEEDED,
                    example_scores=synthetic_scores(auroc),
                    metrics={"latency": {"probe_ms": 0.2, "device": "cpu"}} if split == "test" else {},
                )
            )
    return runs


def _scored_test_rows(registry, task_id: str, model: str | None, seed: int) -> list[dict]:
    """Per-row test scores on the task's real test rows (what the panel is paired with)."""
    import numpy as np

    from evaluator.core.activations import read_split

    rows = read_split(registry, task_id, "test", model=model)
    rng = np.random.default_rng(seed)
    scores = np.asarray(rows.labels) * 1.2 + rng.standard_normal(len(rows.ids))
    return [
        {"id": i, "label": int(y), "score": float(v), "prob": 0.5}
        for i, y, v in zip(rows.ids, rows.labels, scores, strict=True)
    ]


def test_every_score_carries_lift_over_text_per_task_and_its_mean(synced):
    import math

    from evaluator.axes.text_baselines import controlled_auroc, load_panel, member_scores, strongest
    from evaluator.metrics.compare import delong_test

    version = _queued("lifted", SMOL)
    runs = _finish(version, {CITY_COUNTRY_ID: 0.8, "cities-truth-v1": 0.9})
    for run in runs:  # the test runs score the tasks' real test rows
        if run.split == "test":
            model = SMOL if run.task_id == CITY_COUNTRY_ID else None
            run.example_scores = _scored_test_rows(synced, run.task_id, model, seed=len(run.task_id))
            run.save(update_fields=["example_scores"])
    [score, *_] = submission_score(submission=version.submission, runs=runs)
    lifts = []
    for task_id in (CITY_COUNTRY_ID, "cities-truth-v1"):
        panel = load_panel(synced.root, synced.task(task_id), SMOL)
        best = strongest(panel, "test")
        rows = next(r for r in runs if r.task_id == task_id and r.split == "test").example_scores
        text = member_scores(panel, best)
        test = delong_test(
            [r["score"] for r in rows], [text[r["id"]] for r in rows], [r["label"] for r in rows]
        )
        stored = score.per_task[task_id]
        assert stored["text_baseline"] == {"name": best, "auroc": pytest.approx(test.auroc_b, abs=1e-6)}
        assert stored["text_baseline"]["auroc"] == pytest.approx(
            panel["members"][best]["splits"]["test"]["auroc"], abs=1e-4
        )
        assert stored["lift_over_text"] == pytest.approx(test.delta, abs=1e-6)
        half = 1.959964 * math.sqrt(test.variance)
        assert stored["lift_over_text_ci"] == pytest.approx([test.delta - half, test.delta + half], abs=1e-5)
        lifts.append((test.delta, half))
        controlled = controlled_auroc(panel, [(r["id"], r["label"], r["score"]) for r in rows])
        assert stored["controlled_auroc"] == pytest.approx(controlled["delta"], abs=1e-6)
        assert stored["controlled_auroc_ci"] == pytest.approx(controlled["ci"], abs=1e-6)
    assert score.measurements["lift_over_text"] == pytest.approx(sum(v for v, _ in lifts) / 2, abs=1e-6)
    mean_half = 1.959964 * math.sqrt(sum((h / 1.959964) ** 2 for _, h in lifts)) / 2
    assert score.measurements["lift_over_text_ci"] == pytest.approx(
        [score.measurements["lift_over_text"] - mean_half, score.measurements["lift_over_text"] + mean_half],
        abs=1e-5,
    )
    assert score.measurements["controlled_auroc"] == pytest.approx(
        sum(score.per_task[t]["controlled_auroc"] for t in (CITY_COUNTRY_ID, "cities-truth-v1")) / 2
    )
    assert score.measurements["not_measured_on_policy"] == []


def test_a_test_run_on_rows_the_panel_never_scored_leaves_the_lift_unmeasured_and_says_why(synced):
    version = _queued("elsewhere", SMOL)
    runs = _finish(version, {"cities-truth-v1": 0.9})  # synthetic row ids: not the split's
    [score, *_] = submission_score(submission=version.submission, runs=runs)
    task = score.per_task["cities-truth-v1"]
    assert task["auroc"] == pytest.approx(0.9) and task["lift_over_text"] is None
    assert task["text_baseline"] == {"name": None, "auroc": None}
    assert any("scored no row 'neg-0' of this test split" in n for n in task["notes"])
    assert score.measurements["lift_over_text"] is None


def test_the_encoders_score_says_which_on_policy_tasks_it_was_not_measured_on(synced):
    version = _queued("encoded", ENCODER, layer=3)
    runs = _finish(version, {"cities-truth-v1": 0.7})
    test_run = next(r for r in runs if r.split == "test")
    test_run.example_scores = _scored_test_rows(synced, "cities-truth-v1", None, seed=3)
    test_run.save(update_fields=["example_scores"])
    [score, *_] = submission_score(submission=version.submission, runs=runs)
    assert score.measurements["not_measured_on_policy"] == [CITY_COUNTRY_ID]


def test_lift_over_text_is_a_sortable_board_column_in_the_api_and_the_csv(registry, client):
    import csv
    import io

    from tests.leaderboard.board_data import ensure_models, ensure_tasks

    ensure_models()
    tasks = ensure_tasks("hallucination", 1)
    intervals = {"wordy": [-0.04, 0.06], "deep": [0.2, 0.4]}
    for slug, auroc, lift in (("wordy", 0.95, 0.01), ("deep", 0.80, 0.30), ("unknown", 0.85, None)):
        extra = {} if lift is None else {"lift_over_text": lift, "lift_over_text_ci": intervals[slug]}
        if lift is not None:  # what it adds over the text controls: here half the lift
            extra |= {"controlled_auroc": lift / 2, "controlled_auroc_ci": [v / 2 for v in intervals[slug]]}
        # the board's lift and controlled columns are the in-domain means (here its one task)
        for name in ("lift_over_text", "controlled_auroc"):
            if name in extra:
                extra |= {f"{name}_in_domain": extra[name], f"{name}_in_domain_ci": extra[f"{name}_ci"]}
        public_probe(slug=slug, auroc=auroc, tasks=tasks, extra_measurements=extra)
    rows = client.get("/api/v1/leaderboard", {"sort": "lift", "limit": 100}).json()["results"]
    assert [(r["probe"], r["lift_over_text"], r["lift_over_text_ci"]) for r in rows] == [
        ("deep", 0.3, [0.2, 0.4]),
        ("wordy", 0.01, [-0.04, 0.06]),
        ("unknown", None, None),
    ]
    response = client.get("/api/v1/leaderboard.csv", {"sort": "lift", "dir": "asc"})
    exported = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [
        (r["probe"], r["lift_over_text"], r["lift_over_text_ci_lo"], r["lift_over_text_ci_hi"])
        for r in exported
    ] == [
        ("wordy", "0.01", "-0.04", "0.06"),
        ("deep", "0.3", "0.2", "0.4"),
        ("unknown", "", "", ""),
    ]
    by_controlled = client.get("/api/v1/leaderboard", {"sort": "controlled", "limit": 100}).json()["results"]
    assert [(r["probe"], r["controlled_auroc"]) for r in by_controlled] == [
        ("deep", 0.15),
        ("wordy", 0.005),
        ("unknown", None),
    ]
    assert {r["probe"]: r["controlled_auroc_ci_lo"] for r in exported} == {
        "wordy": "-0.02",
        "deep": "0.1",
        "unknown": "",
    }
    page = client.get("/category/hallucination/", {"sort": "lift"}).content.decode().replace("<wbr>", "")
    assert "Lift/text" in page and "Ctrl AUROC" in page and page.index("deep") < page.index("wordy")
    # the interval that includes 0 is marked, the one above 0 is not
    cells = {
        slug: page[page.index(f"/probes/{slug}/") :].split('class="num lift"', 1)[1][:400]
        for slug in intervals
    }
    assert "≈0" in cells["wordy"] and "[-0.040, 0.060]" in cells["wordy"]
    assert "≈0" not in cells["deep"].split("</td>", 1)[0] and "[0.200, 0.400]" in cells["deep"]


def test_task_pages_show_the_text_baselines_and_mark_on_policy_tasks(synced, client):
    from evaluator.axes.text_baselines import chosen_by_cv, strongest

    page = client.get(f"/tasks/{CITY_COUNTRY_ID}/").content.decode()
    assert "On-policy task." in page and f"{SMOL}/test.jsonl" in page
    panel = m.Task.objects.get(slug=CITY_COUNTRY_ID).text_panel(SMOL)
    best = panel["members"][strongest(panel)]["splits"]["test"]["auroc"]
    assert 'id="text-baselines"' in page and f"{best:.3f}" in page
    n_models = len(synced.task(CITY_COUNTRY_ID).splits_by_model)
    assert page.count(">strongest</span>") == n_models == 3  # one per base model's file
    assert page.count(">CV pick</span>") == n_models
    text_task = client.get("/tasks/harmful-requests-v1/").content.decode()
    assert "On-policy task." not in text_task
    harmful = m.Task.objects.get(slug="harmful-requests-v1").text_panel()
    for member in harmful["members"].values():
        assert f"{member['splits']['test']['auroc']:.3f}" in text_task
    assert chosen_by_cv(harmful) in harmful["members"]
    listing = client.get("/category/hallucination/").content.decode()
    assert "on-policy</span>" in listing


def test_the_task_api_publishes_each_models_files_and_the_baselines(synced, client):
    tasks = {t["slug"]: t for t in client.get("/api/v1/tasks", {"category": "hallucination"}).json()}
    own = tasks[CITY_COUNTRY_ID]
    assert own["on_policy"] is True
    assert own["text_baselines"][SMOL]["members"]["char_tfidf"]["splits"]["test"]["auroc"] is not None
    assert {(s["base_model"], s["name"]) for s in own["splits"]} == {
        (m, n) for m in (SMOL, GEMMA, QWEN) for n in ("train", "test", "distshift", "holdout_pool")
    }
    assert own["text_baselines"][GEMMA]["sha256"] == synced.task(CITY_COUNTRY_ID).text_panel_sha256(GEMMA)
    assert {s["base_model"] for s in tasks["halueval-qa-v1"]["splits"]} == {None}


def test_the_cycles_split_check_compares_each_models_files_with_the_database(synced):
    from evaluator.errors import EvaluatorError
    from leaderboard.services.reevaluation import _splits_verify

    _splits_verify(synced)  # every file re-hashed, the database mirrors tasks.yaml
    m.TaskSplit.objects.filter(task_id=CITY_COUNTRY_ID, base_model_id=SMOL, name="test").update(
        sha256="0" * 64
    )
    with pytest.raises(EvaluatorError, match=f"{CITY_COUNTRY_ID}/test.*sync_registry"):
        _splits_verify(synced)
