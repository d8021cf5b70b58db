"""The text-baseline panel (evaluator.axes.text_panel): hyperparameters chosen on train alone,
deterministic, the structured-feature spec validated, and ``data-baselines``' JSON shape."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from evaluator.axes.text_panel import (
    C_GRID,
    PanelRows,
    fit_member,
    fit_panel,
    panel_members,
)
from evaluator.data.registry.load import load_registry
from evaluator.data.registry.tasks import StructuredFeature
from evaluator.errors import RegistryError
from tests.evaluator.conftest import build_registry, write_split

ADDITION = (StructuredFeature("a", r"What is (?P<a>\d+) \+ (?P<b>\d+)\?", "numeric"),)


def _rows(texts: list[str], labels: list[int], prefix: str) -> PanelRows:
    ids = [f"{prefix}-{i:04d}" for i in range(len(texts))]
    return PanelRows(ids=ids, texts=list(texts), labels=np.array(labels, dtype=np.int64), groups=ids)


def _char_task(n: int, seed: int) -> tuple[list[str], list[int]]:
    """One unseen word per row, all of one length: a positive holds the letters "qz" somewhere, a
    negative never does. Words never repeat, so word features cannot carry over to new rows."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnoprstuvwy"  # no q, no z
    texts, labels = [], []
    for i in range(n):
        word = [rng.choice(letters) for _ in range(9)]
        label = i % 2
        if label:
            at = rng.randrange(0, 8)
            word[at : at + 2] = ["q", "z"]
        texts.append(f"item {''.join(word)}")
        labels.append(label)
    return texts, labels


def _addition_task(n: int, seed: int) -> tuple[list[str], list[int]]:
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        a, b = rng.randrange(10, 100), rng.randrange(10, 100)
        texts.append(f"Q: What is {a} + {b}?\nA: {a} + {b} =")
        labels.append(int(a > 55))
    return texts, labels


def test_only_character_ngrams_separate_a_task_of_unseen_words_and_the_char_member_wins():
    train = _rows(*_char_task(120, 1), "tr")
    test = _rows(*_char_task(60, 2), "te")
    result = fit_panel(train, {"test": test}, members=panel_members())
    aurocs = {name: m.splits["test"].auroc for name, m in result.members.items()}
    single = {k: v for k, v in aurocs.items() if k != "stack"}
    assert max(single, key=single.__getitem__) == "char_tfidf"
    assert result.strongest("test") in ("char_tfidf", "stack")
    assert aurocs["char_tfidf"] > 0.9 and aurocs["stack"] > 0.9
    assert abs(aurocs["word_tfidf"] - 0.5) < 0.15
    assert abs(aurocs["length"] - 0.5) < 0.15


def test_hyperparameters_are_chosen_on_train_alone():
    texts, labels = _char_task(120, 1)
    train = _rows(texts, labels, "tr")
    test_texts, test_labels = _char_task(60, 2)
    shuffled = list(test_labels)
    random.Random(7).shuffle(shuffled)
    members = {m.name: m for m in panel_members(ADDITION)}
    for name in ("word_tfidf", "char_tfidf"):
        one = fit_member(members[name], train, {"test": _rows(test_texts, test_labels, "te")})
        two = fit_member(members[name], train, {"test": _rows(test_texts, shuffled, "te")})
        assert one.params == two.params and one.cv_auroc == two.cv_auroc
        assert one.cv_grid == two.cv_grid
        assert one.splits["test"].scores == two.splits["test"].scores  # same fit, same scores
    char = fit_member(members["char_tfidf"], train, {"test": _rows(test_texts, test_labels, "te")})
    assert char.params["C"] in C_GRID
    assert char.cv_auroc == max(g["cv_auroc"] for g in char.cv_grid)


@pytest.fixture(scope="module")
def addition_panel():
    """(train, test, the panel fitted on them) of the addition task, fitted once for the tests
    that only read it."""
    train = _rows(*_addition_task(100, 3), "tr")
    test = _rows(*_addition_task(50, 4), "te")
    return train, test, fit_panel(train, {"test": test}, members=panel_members(ADDITION))


def test_the_panel_is_deterministic(addition_panel):
    train, test, first = addition_panel
    one = first.to_dict("test", scores=True)
    two = fit_panel(train, {"test": test}, members=panel_members(ADDITION)).to_dict("test", scores=True)
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)


def test_the_structured_member_reads_the_declared_operand(addition_panel):
    _, _, result = addition_panel
    assert result.strongest("test") in ("structured", "stack")
    assert result.members["structured"].splits["test"].auroc > 0.95
    assert set(result.members["structured"].params) == {"degree", "C"}


def test_a_categorical_value_unseen_in_train_reads_as_nothing():
    feats = (StructuredFeature("city", r"city of (?P<city>\w+)", "categorical"),)
    train = _rows([f"city of {c}" for c in ("Aa", "Bb") * 20], [1, 0] * 20, "tr")
    test = _rows(["city of Aa", "city of Bb", "city of Zz", "nothing here"], [1, 0, 1, 0], "te")
    member = next(m for m in panel_members(feats) if m.name == "structured")
    scores = fit_member(member, train, {"test": test}).splits["test"].scores
    assert scores[0] > scores[2] > scores[1]  # the unseen city sits between the two learned ones
    assert scores[2] == pytest.approx(scores[3])  # unseen and unmatched both read as no category


def test_a_field_feature_reads_a_fact_about_the_input_from_the_rows_meta():
    """The text never names the country; the row's meta does (a gazetteer fact about the city)."""
    feats = (StructuredFeature("country", kind="categorical", field="country"),)
    countries = ("Chad", "Peru") * 20

    def rows(n: int, prefix: str) -> PanelRows:
        r = _rows(
            [f"Q: Which country is town{i} in?" for i in range(n)],
            [int(c == "Chad") for c in countries[:n]],
            prefix,
        )
        return PanelRows(r.ids, r.texts, r.labels, r.groups, meta=[{"country": c} for c in countries[:n]])

    member = next(m for m in panel_members(feats) if m.name == "structured")
    result = fit_member(member, rows(40, "tr"), {"test": rows(20, "te")})
    assert result.splits["test"].auroc == 1.0
    # the same rows without meta: the feature is missing everywhere and carries nothing
    bare = fit_member(
        member, _rows(rows(40, "tr").texts, list(rows(40, "tr").labels), "tr"), {"test": rows(20, "te")}
    )
    assert bare.splits["test"].auroc == 0.5


# --------------------------------------------------------------------------- the tasks.yaml key


def _toy_task(root, structured=None) -> dict:
    texts, labels = _addition_task(80, 5)
    splits = {}
    for split, (lo, hi) in {"train": (0, 50), "test": (50, 70), "holdout_pool": (70, 80)}.items():
        rows = [
            {"id": f"toy-{i:03d}", "group": f"g{i:03d}", "label": labels[i], "text": texts[i], "meta": {}}
            for i in range(lo, hi)
        ]
        splits[split] = write_split(root, "toy-addition-v1", split, rows)
    task = {
        "id": "toy-addition-v1",
        "category": "reasoning",
        "family": "toy",
        "positive": "a > 55",
        "negative": "a ≤ 55",
        "source": {"package": "tests", "version": "0", "license": "MIT"},
        "templates": {"single": "{text}"},
        "splits": splits,
    }
    if structured is not None:
        task["structured_baseline"] = structured
    return task


def _feature(**overrides) -> dict:
    return {"features": [{"name": "a", "pattern": r"What is (?P<a>\d+) \+", "kind": "numeric"} | overrides]}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            _feature(pattern=r"What is (?P<a>\d+ \+"),
            r"structured_baseline\.features\[0\]\.pattern is not a valid regular expression",
        ),
        (
            _feature(kind="ordinal"),
            r"structured_baseline\.features\[0\]\.kind 'ordinal'; accepted: numeric, categorical",
        ),
        (
            _feature(pattern=r"What is (\d+) \+"),
            r"features\[0\]\.pattern needs a named group \(\?P<a>\.\.\.\)",
        ),
        (_feature(name="A b"), r"features\[0\]\.name must be lowercase"),
        ({"features": []}, r"structured_baseline needs a non-empty features list or entities list"),
        ({"feature": []}, r"structured_baseline: unknown key\(s\) feature; accepted: features, entities"),
        (
            {"entities": [{"name": "a", "pattern": r"What is (?P<a>\d+)", "kind": "numeric"}]},
            r"entities\[0\]: unknown key\(s\) kind; accepted: name, pattern, field",
        ),
        (
            {"entities": [{"name": "a", "pattern": r"What is (?P<a>\d+)"}]},
            r"structured_baseline\.entities names one entity; name two or more",
        ),
        (
            {"entities": [{"name": "a", "pattern": r"What is (?P<a>\d+)"}, {"name": "b", "field": "output"}]},
            r"entities\[1\]\.field 'output' reads what the base model did or the label; a structured entity",
        ),
        (
            {"entities": [{"name": "a", "pattern": r"What is (\d+)"}, {"name": "b", "field": "b"}]},
            r"entities\[0\]\.pattern needs a named group \(\?P<a>\.\.\.\) for entity 'a'",
        ),
        (
            {"entities": "a"},
            r"structured_baseline\.entities must be a list of \{name, pattern or field\}",
        ),
        (_feature(weight=2), r"features\[0\]: unknown key\(s\) weight"),
        (_feature(field="a"), r"features\[0\]: give exactly one of pattern \(read from the text\) or field"),
        (
            {"features": [{"name": "said", "field": "output", "kind": "categorical"}]},
            r"features\[0\]\.field 'output' reads what the base model did or the label",
        ),
        (
            {"features": [{"name": "said", "field": "neutral_output", "kind": "categorical"}]},
            r"features\[0\]\.field 'neutral_output' reads what the base model did",
        ),
        (
            {"features": [{"name": "y", "field": "label", "kind": "numeric"}]},
            r"features\[0\]\.field 'label' reads what the base model did or the label",
        ),
        (
            {"features": [{"name": "c", "field": "Country Name", "kind": "categorical"}]},
            r"features\[0\]\.field must be a meta key",
        ),
    ],
)
def test_a_bad_structured_baseline_is_a_registry_error_naming_the_task_and_key(tmp_path, spec, message):
    root = build_registry(tmp_path, [_toy_task(tmp_path, spec)])
    with pytest.raises(RegistryError, match=r"task toy-addition-v1: .*" + message):
        load_registry(root)


def test_the_declared_features_of_the_shipped_tasks_load():
    registry = load_registry()
    addition = registry.task("onpolicy-addition-v1").structured_baseline
    assert [(f.name, f.kind) for f in addition] == [("a", "numeric"), ("b", "numeric")]
    assert [f.extract("Q: What is 25 + 24?\nA: 25 + 24 =") for f in addition] == ["25", "24"]
    city, country = registry.task("onpolicy-city-country-v1").structured_baseline
    assert (country.field, country.kind) == ("country", "categorical")
    assert country.extract(
        "Q: Which country is Dordrecht in?\nA: Dordrecht is in", {"country": "The Netherlands"}
    ) == ("The Netherlands")
    assert country.extract("Q: Which country is Dordrecht in?", {}) is None
    assert city.extract("Q: Which country is El Mourouj in?\nA: El Mourouj is in") == "El Mourouj"
    assert city.extract("The city of Gràcia is located in the country of") == "Gràcia"
    assert city.extract("Paseh is a city in the country of") == "Paseh"


# --------------------------------------------------------------------------- the CLI


def test_data_baselines_prints_the_panel_as_json(tmp_path, capsys):
    from evaluator.commands.cli import main

    root = build_registry(tmp_path, [_toy_task(tmp_path, _feature())])
    argv = ["data-baselines", "--task", "toy-addition-v1", "--registry", str(root), "--no-encoder", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    # no encoder: no minilm, and no entity_embed (none declared); the GBM reads the features
    assert set(out["baselines"]) == {
        "length",
        "word_tfidf",
        "char_tfidf",
        "structured",
        "structured_gbm",
        "stack",
    }
    for value in out["baselines"].values():
        assert set(value) >= {"auroc", "ci", "cv_auroc", "params", "n"}
        assert value["ci"][0] <= value["auroc"] <= value["ci"][1]
        assert value["n"] == 20
    # the highest at the file's precision, equals to the first by name (text_panel.best_member)
    best = min(out["baselines"], key=lambda k: (-out["baselines"][k]["auroc"], k))
    assert out["strongest"]["name"] == best
    assert out["strongest"]["auroc"] == out["baselines"][best]["auroc"]
    picked = min(out["baselines"], key=lambda k: (-out["baselines"][k]["cv_auroc"], k))
    assert out["by_cv"]["name"] == picked and "train" in out["by_cv"]["chosen_by"]
    assert out["baselines"]["stack"]["params"]["over"] == (
        "length,word_tfidf,char_tfidf,structured,structured_gbm"
    )
    assert out["split"] == "test" and out["task"] == "toy-addition-v1"


def test_data_baselines_without_one_task_says_what_to_name(tmp_path, capsys):
    from evaluator.commands.cli import main

    root = build_registry(tmp_path, [_toy_task(tmp_path)])
    assert main(["data-baselines", "--registry", str(root), "--json"]) == 2
    assert "name it with --task" in capsys.readouterr().err


def test_the_on_policy_files_need_a_model():
    from evaluator.axes.text_panel import task_panel
    from evaluator.errors import EvaluatorError

    with pytest.raises(EvaluatorError, match="is on-policy.*name one with --model"):
        task_panel(load_registry(), "onpolicy-addition-v1")


def test_the_summary_is_a_table_of_the_members(addition_panel):
    from evaluator.axes.text_panel import panel_table

    result = addition_panel[2].to_dict("test")
    text = panel_table({"task": "t-v1", **result})
    assert "structured" in text and "stack" in text
    assert (
        f"strongest on test (the bar a probe's lift is measured over): {result['strongest']['name']}" in text
    )
    assert f"chosen by CV on train: {result['by_cv']['name']}" in text


# --------------------------------------------------------------------------- the encoder member


@pytest.mark.model
def test_the_minilm_member_embeds_the_prompts_through_the_cache(tiny_registry, cache_dir):
    from evaluator.axes.text_panel import encoder_embed

    food = ["I baked fresh bread", "The soup was salty", "We ate ripe mangoes", "She cooked rice and beans"]
    sport = [
        "He scored a late goal",
        "The team won the match",
        "She ran a fast marathon",
        "They lost the final set",
    ]
    texts = [
        t + suffix for suffix in ("", " today", " again", " once more", " yesterday") for t in food + sport
    ]
    labels = [1, 1, 1, 1, 0, 0, 0, 0] * 5
    embed = encoder_embed(tiny_registry, cache_dir=cache_dir)
    x = embed(texts[:8])
    assert x.shape == (8, 384)
    np.testing.assert_allclose(embed(texts[:8]), x)  # the same vectors again
    member = next(m for m in panel_members(embed=embed) if m.name == "minilm")
    train = _rows(texts[:32], labels[:32], "tr")
    test = _rows(texts[32:], labels[32:], "te")
    assert fit_member(member, train, {"test": test}).splits["test"].auroc > 0.9


def test_build_data_keeps_a_declared_structured_baseline(tmp_path):
    import importlib
    import shutil

    import yaml

    from evaluator.commands.build_data import update_tasks_yaml
    from evaluator.data.builders.common import rewrite_tasks
    from tests.evaluator.conftest import PROJECT_ROOT

    path = tmp_path / "tasks.yaml"
    shutil.copy(PROJECT_ROOT / "tasks.yaml", path)
    spec = _feature()

    def declare(entries):
        return [e | {"structured_baseline": spec} if e["id"] == "halueval-qa-v1" else e for e in entries]

    rewrite_tasks(path, declare)
    entry = next(e for e in yaml.safe_load(path.read_text())["tasks"] if e["id"] == "halueval-qa-v1")
    meta = importlib.import_module("evaluator.data.builders.halueval").META
    update_tasks_yaml(path, {"halueval-qa-v1": {"meta": meta, "splits": entry["splits"]}})
    rebuilt = next(e for e in yaml.safe_load(path.read_text())["tasks"] if e["id"] == "halueval-qa-v1")
    assert rebuilt["structured_baseline"] == spec
    keys = list(rebuilt)
    assert keys.index("structured_baseline") == keys.index("text_panel") + 1
