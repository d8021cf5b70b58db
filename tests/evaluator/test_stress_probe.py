"""``python -m evaluator stress`` on a real encoder: a probe scored on its task's stress split, the
threshold fixed on clean train negatives, and every reported number recomputed from the scores it
prints."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluator.data.builders.stress import TAILS, TRANSFORMS
from tests.evaluator.conftest import MINILM, build_registry, capitals_task

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def stressed(tmp_path_factory, cache_dir):
    """A capitals registry with its stress split written by the CLI, and a MiniLM probe on it."""
    from evaluator.commands.cli import main
    from evaluator.core.activations import ActivationCache
    from evaluator.core.models import load_model
    from evaluator.core.probes import save_probe
    from evaluator.core.recipes import Recipe, train_recipe
    from evaluator.data.registry.load import load_registry

    root = tmp_path_factory.mktemp("stress-registry")
    build_registry(root, [capitals_task(root)])
    assert main(["data-stress", "--registry", str(root), "--json"]) == 0
    registry = load_registry(root, verify_hashes=True)
    lm = load_model(MINILM, registry=registry, cache_dir=cache_dir, device="cpu", dtype="float32")
    recipe = Recipe(method="logistic_regression", task="capitals-v1", layer=4, position="mean", seed=0)
    trained = train_recipe(recipe, lm, registry=registry, cache=ActivationCache(cache_dir))
    probe = tmp_path_factory.mktemp("probe")
    save_probe(probe, trained.tensors, trained.metadata(name="capitals minilm", category="hallucination"))
    return root, probe


def test_the_stress_report_is_recomputed_from_the_scores_it_prints(stressed, cache_dir, capsys):
    from evaluator.commands.cli import main
    from evaluator.data.builders.common import read_split
    from evaluator.metrics.metrics import auroc, recall_at_fpr

    root, probe = stressed
    argv = ["stress", "--probe", str(probe), "--registry", str(root), "--cache-dir", str(cache_dir)]
    assert main([*argv, "--scores", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    result = out["tasks"]["capitals-v1"]
    rows = {r["id"]: r for r in read_split(root / "registry" / "splits" / "capitals-v1" / "stress.jsonl")}
    present = {r["meta"]["stress"] for r in rows.values()}
    assert list(result["transforms"]) == [t for t in TRANSFORMS if t in present]
    assert set(result["scores"]) == set(rows)
    # "clean" is the clean reading of the rows the stress split rewrites
    test_rows = read_split(root / "registry" / "splits" / "capitals-v1" / "test.jsonl")
    test_labels = {r["id"]: r["label"] for r in test_rows}
    assert set(result["test_scores"]) == {r["meta"]["source_id"] for r in rows.values()}
    clean_ids = list(result["test_scores"])
    assert result["clean"]["auroc"] == pytest.approx(
        auroc(
            np.array([result["test_scores"][i] for i in clean_ids]),
            np.array([test_labels[i] for i in clean_ids]),
        )
    )
    for name, t in result["transforms"].items():
        ids = [i for i in rows if i.endswith(f"~{name}")]
        labels = np.array([rows[i]["label"] for i in ids])
        scores = np.array([result["scores"][i] for i in ids])
        assert t["n"] == len(ids)
        if not labels.any():  # hard negatives: read against the clean positives of the base rows
            clean = [s for i, s in result["test_scores"].items() if test_labels[i] == 1]
            labels, scores = np.r_[np.ones(len(clean)), labels], np.r_[clean, scores]
        assert t["auroc"] == pytest.approx(auroc(scores, labels))
        assert t["recall"] == pytest.approx(recall_at_fpr(scores, labels, result["threshold"]))
        assert t["auroc_drop"] == pytest.approx(result["clean"]["auroc"] - t["auroc"])
    assert result["worst"]["auroc"] == min(t["auroc"] for t in result["transforms"].values())
    assert result["clean"]["auroc"] > 0.6  # the probe reads the task on clean rows
    # the second reading: the rows of the wrappers with a tail, cut where the content ends
    cut = result["scores_content_end"]
    assert {i.rsplit("~", 1)[1] for i in cut} == set(TAILS) & present
    assert set(cut) == {i for i in rows if i.rsplit("~", 1)[1] in TAILS}
    for name, t in result["transforms"].items():
        if name not in TAILS:  # nothing after the content: one reading, the same numbers
            assert (t["auroc_content_end"], t["recall_content_end"]) == (t["auroc"], t["recall"])
            continue
        ids = [i for i in cut if i.endswith(f"~{name}")]
        labels = np.array([rows[i]["label"] for i in ids])
        scores = np.array([cut[i] for i in ids])
        assert t["auroc_content_end"] == pytest.approx(auroc(scores, labels))
        assert t["recall_content_end"] == pytest.approx(recall_at_fpr(scores, labels, result["threshold"]))
        # a different text was read (the tail is gone), so a different score on some row
        assert any(cut[i] != result["scores"][i] for i in ids)
    assert result["worst"]["auroc_content_end"] == min(
        t["auroc_content_end"] for t in result["transforms"].values()
    )
    # the terminal summary names every transform
    assert main([*argv]) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in present)
