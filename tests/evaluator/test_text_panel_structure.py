"""The panel members that read a task's declared structure (evaluator.axes.text_panel):
``entity_embed`` (the sentence encoder's embeddings of the entities a row names, combined in pairs)
and ``structured_gbm`` (gradient-boosted trees over the declared features and the entities'
pairwise cosines); when each is present, and the entities the shipped task cards declare."""

from __future__ import annotations

import hashlib
import random

import numpy as np

from evaluator.axes.text_members import entity_pair_cosines, entity_pair_features
from evaluator.axes.text_panel import GBM_DEPTHS, PanelRows, fit_member, panel_members
from evaluator.data.registry.load import load_registry
from evaluator.data.registry.tasks import StructuredEntity, StructuredFeature

DIM = 8


def _vector(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).normal(size=DIM)


def fake_embed(texts) -> np.ndarray:
    """A stand-in encoder: a fixed random vector per string (no model loads)."""
    return np.stack([_vector(t) for t in texts]) if len(texts) else np.zeros((0, DIM))


def _rows(texts, labels, prefix) -> PanelRows:
    ids = [f"{prefix}-{i:04d}" for i in range(len(texts))]
    return PanelRows(ids=ids, texts=list(texts), labels=np.array(labels, dtype=np.int64), groups=ids)


ENTITIES = (
    StructuredEntity("first", r"Is (?P<first>\w+) like"),
    StructuredEntity("second", r"like (?P<second>\w+)\?"),
)


def _pair_task(n: int, seed: int) -> tuple[list[str], list[int]]:
    """Two unseen names per row; the label is whether their (stand-in) embeddings point the same
    way: each name alone says nothing, only the pair's product term carries it."""
    rng = random.Random(seed)
    texts, labels = [], []
    for i in range(n):
        a, b = f"n{seed}x{i}a{rng.randrange(10**6)}", f"n{seed}x{i}b{rng.randrange(10**6)}"
        texts.append(f"Is {a} like {b}?")
        labels.append(int(float(_vector(a) @ _vector(b)) > 0))
    return texts, labels


def _member(name, **kwargs):
    return next(m for m in panel_members(**kwargs) if m.name == name)


def test_entity_embed_learns_a_label_carried_only_by_the_pair_product():
    train = _rows(*_pair_task(300, 1), "tr")
    test = _rows(*_pair_task(150, 2), "te")
    assert 0.35 < train.labels.mean() < 0.65
    result = fit_member(_member("entity_embed", embed=fake_embed, entities=ENTITIES), train, {"test": test})
    assert result.splits["test"].auroc > 0.9
    # every name is new in test: the words cannot carry it, and neither can the entities one by one
    words = fit_member(_member("word_tfidf", embed=fake_embed, entities=ENTITIES), train, {"test": test})
    assert words.splits["test"].auroc < 0.7
    alone = fit_member(
        _member("minilm", embed=lambda texts: fake_embed([t.split()[1] for t in texts])),
        train,
        {"test": test},
    )
    assert alone.splits["test"].auroc < 0.7


def test_entity_pair_features_and_cosines_shapes_and_a_missing_entity():
    e = np.zeros((2, 3, 4))
    e[0] = [[1, 0, 0, 0], [0, 2, 0, 0], [3, 0, 0, 0]]
    e[1, 0] = [0, 0, 1, 0]  # the other two missing: zero vectors
    x = entity_pair_features(e)
    assert x.shape == (2, 3 * 4 + 3 * 2 * 4)
    assert np.isfinite(x).all()
    cos = entity_pair_cosines(e)
    np.testing.assert_allclose(cos[0], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(cos[1], [0.0, 0.0, 0.0])


XOR = (
    StructuredFeature("left", r"left=(?P<left>\w)", "categorical"),
    StructuredFeature("right", r"right=(?P<right>\w)", "categorical"),
)


def _xor_task(n: int, seed: int) -> tuple[list[str], list[int]]:
    """Two categorical features; the label is whether exactly one of them is in {p, q}: no
    weighted sum of one-hot columns separates it, two levels of a tree do."""
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        left, right = rng.choice("pqrs"), rng.choice("pqrs")
        texts.append(f"row left={left} right={right} end")
        labels.append(int((left in "pq") != (right in "pq")))
    return texts, labels


def test_structured_gbm_gets_an_xor_of_categories_the_linear_member_cannot():
    train = _rows(*_xor_task(300, 3), "tr")
    test = _rows(*_xor_task(200, 4), "te")
    gbm = fit_member(_member("structured_gbm", structured=XOR), train, {"test": test})
    linear = fit_member(_member("structured", structured=XOR), train, {"test": test})
    assert gbm.splits["test"].auroc > 0.95
    assert linear.splits["test"].auroc < 0.7
    assert set(gbm.params) == {"max_depth", "learning_rate", "max_iter"}
    assert gbm.params["max_depth"] in GBM_DEPTHS
    assert gbm.cv_auroc == max(g["cv_auroc"] for g in gbm.cv_grid)
    again = fit_member(_member("structured_gbm", structured=XOR), train, {"test": test})
    assert again.splits["test"].scores == gbm.splits["test"].scores  # fixed random_state


def test_structured_gbm_reads_entity_cosines_when_only_entities_are_declared():
    # the label is the pair's cosine sign: the GBM's one input here is that cosine
    train = _rows(*_pair_task(200, 5), "tr")
    test = _rows(*_pair_task(100, 6), "te")
    result = fit_member(_member("structured_gbm", embed=fake_embed, entities=ENTITIES), train, {"test": test})
    assert result.splits["test"].auroc > 0.95


def test_which_structured_members_a_card_gets():
    names = lambda **kw: [m.name for m in panel_members(**kw)]  # noqa: E731
    assert names() == ["length", "word_tfidf", "char_tfidf"]
    assert names(structured=XOR) == ["length", "word_tfidf", "char_tfidf", "structured", "structured_gbm"]
    # entities need the encoder: without it neither entity member is there
    assert names(entities=ENTITIES) == ["length", "word_tfidf", "char_tfidf"]
    assert names(entities=ENTITIES, embed=fake_embed) == [
        "length",
        "word_tfidf",
        "char_tfidf",
        "minilm",
        "entity_embed",
        "structured_gbm",
    ]


def test_the_declared_entities_of_the_shipped_tasks_read_their_rows():
    registry = load_registry()
    city, stated = registry.task("cities-truth-v1").structured_entities
    assert registry.task("cities-truth-v1").structured_baseline == ()  # never the true country
    assert [e.extract("The city of San Luis Potosí is in Turkey.") for e in (city, stated)] == [
        "San Luis Potosí",
        "Turkey",
    ]
    assert [
        e.extract("Q: Which country is Bangui in?\nA: the Central African Republic") for e in (city, stated)
    ] == [
        "Bangui",
        "the Central African Republic",
    ]
    pairs = registry.task("city-pairs-reasoning-v1").structured_entities
    texts = [
        "Mossamedes is in Angola. Büyükçekmece is in Turkey. Therefore, Mossamedes and Büyükçekmece are in"
        " different countries.",
        "We know that Oxnard lies in the United States and that Boise lies in the United States. It follows"
        " that Oxnard and Boise are in the same country.",
        "Premise 1: Singa is located in Sudan.\nPremise 2: Nnewi is located in Nigeria.\nConclusion: Singa and"
        " Nnewi are in the same country.",
        "Kaithal is in India. Fergana is in Uzbekistan, a few hours away. Khammam is in India. Travellers often"
        " visit all three. So Kaithal and Khammam are in the same country.",
    ]
    assert [[e.extract(t) for e in pairs] for t in texts] == [
        ["Mossamedes", "Angola", "Büyükçekmece", "Turkey"],
        ["Oxnard", "the United States", "Boise", "the United States"],
        ["Singa", "Sudan", "Nnewi", "Nigeria"],
        ["Kaithal", "India", "Khammam", "India"],
    ]
    for task_id in ("onpolicy-incentive-deception-v1", "onpolicy-suggestion-sycophancy-v1"):
        names = [e.name for e in registry.task(task_id).structured_entities]
        assert names[0] == "city" and names[-1] == "country" and len(names) == 3
