"""Stress splits: every task about its text has one, rebuilt byte for byte from its test rows, with
the labels kept and every transform applied once per row; the in-place rewrites never touch a
protected token of the committed files; hard negatives only where the task's policy keeps them; the
registry checks its pin."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter

import pytest
import yaml

from evaluator.data.builders import stress_rules
from evaluator.data.builders.common import read_split
from evaluator.data.builders.stress import (
    BASE_PER_CLASS,
    FILLER_AFTER,
    FILLER_BEFORE,
    IN_PLACE,
    KEYWORDS_FRAME,
    NEGATIVES_ONLY,
    POLICIES,
    TAILS,
    TRANSFORMS,
    UNDECLARED,
    build_stress,
    concept_words,
    content_end_text,
    policy_for,
    rewrite,
    stress_base,
    stress_bytes,
)
from evaluator.data.registry.load import load_registry
from evaluator.errors import RegistryError, SplitHashMismatch
from tests.evaluator.conftest import PROJECT_ROOT


def test_every_task_about_its_text_has_a_pinned_stress_split_and_on_policy_tasks_none():
    reg = load_registry(PROJECT_ROOT, verify_hashes=True)  # re-hashes the stress files too
    for task in reg.tasks.values():
        assert (task.stress is None) == task.on_policy, task.id


def test_the_committed_stress_splits_rebuild_byte_for_byte(capsys):
    from evaluator.commands.cli import main

    assert main(["data-stress", "--check", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


@pytest.mark.parametrize("task_id", ["cities-truth-v1", "harmful-requests-v1", "benchmark-vs-user-v1"])
def test_each_test_row_appears_once_per_transform_with_its_label_and_group(task_id):
    reg = load_registry(PROJECT_ROOT)
    task = reg.task(task_id)
    test = read_split(PROJECT_ROOT / task.splits["test"].path)
    stress = read_split(PROJECT_ROOT / task.stress.path)
    words = concept_words(read_split(PROJECT_ROOT / task.splits["train"].path))
    hard = bool(words) and POLICIES[task_id].hard_negatives
    # the hard negatives: the negative rows only, where the task's classes differ in words and its
    # policy keeps them
    per_row = {
        0: len(TRANSFORMS) - (0 if hard else len(NEGATIVES_ONLY)),
        1: len(TRANSFORMS) - len(NEGATIVES_ONLY),
    }
    # the rows rewritten: a balanced subset of BASE_PER_CLASS per class, the same on every rebuild
    base = stress_base(task_id, test)
    assert [sum(r["label"] == c for r in base) for c in (0, 1)] == [BASE_PER_CLASS, BASE_PER_CLASS]
    assert {r["meta"]["source_id"] for r in stress} == {r["id"] for r in base}
    assert len(stress) == sum(per_row[r["label"]] for r in base) == task.stress.rows
    by_id = {r["id"]: r for r in test}
    assert len({r["id"] for r in stress}) == len(stress)
    for row in stress:
        source = by_id[row["meta"]["source_id"]]
        assert (row["label"], row["group"]) == (source["label"], source["group"])
        assert row["id"] == f"{source['id']}~{row['meta']['stress']}"
        if row["meta"]["stress"] not in IN_PLACE:  # an in-place rewrite with no rule that applies keeps it
            assert row["text"] != source["text"]
        if row["meta"]["stress"] in NEGATIVES_ONLY:
            assert (
                row["label"] == 0
                and row["text"] == f"{KEYWORDS_FRAME} {', '.join(words)}.\n\n{source['text']}"
            )
    assert {r["meta"]["stress"] for r in stress} == set(TRANSFORMS) - (set() if hard else set(NEGATIVES_ONLY))


def test_every_task_with_a_stress_split_declares_its_policy_with_its_reasons():
    reg = load_registry(PROJECT_ROOT)
    stressed = {t.id for t in reg.tasks.values() if t.stress is not None}
    assert set(POLICIES) == stressed  # none missing, none stale
    for task_id, policy in POLICIES.items():
        assert policy.hard_negatives_why and policy.numbers_why, task_id
        assert policy_for(task_id) is policy
    # an undeclared task (a test registry's) gets the cautious policy
    assert policy_for("capitals-v1") is UNDECLARED
    assert not UNDECLARED.hard_negatives and not UNDECLARED.numbers


def test_hard_negatives_are_in_a_stress_file_exactly_where_the_task_s_policy_keeps_them():
    """The eval-awareness and sandbagging tasks have concept words, but a keyword line of them could
    make a negative look like a positive: their files have no hard negatives; the others keep theirs."""
    reg = load_registry(PROJECT_ROOT)
    dropped = []
    for task_id, policy in POLICIES.items():
        task = reg.task(task_id)
        words = concept_words(read_split(PROJECT_ROOT / task.splits["train"].path))
        kinds = {r["meta"]["stress"] for r in read_split(PROJECT_ROOT / task.stress.path)}
        assert ("concept_words" in kinds) == (policy.hard_negatives and bool(words)), task_id
        if words and not policy.hard_negatives:
            dropped.append(task_id)
    assert sorted(dropped) == ["benchmark-vs-user-v1", "prompted-sandbagging-v1"]
    # and the builder drops them, whatever the words
    rows = read_split(PROJECT_ROOT / reg.task("benchmark-vs-user-v1").splits["test"].path)
    train = read_split(PROJECT_ROOT / reg.task("benchmark-vs-user-v1").splits["train"].path)
    assert concept_words(train)
    assert b"~concept_words" not in stress_bytes("benchmark-vs-user-v1", rows, train)


#: the value of a small number word, so a count written either way compares equal
_SMALL = {w: str(i + 2) for i, w in enumerate(stress_rules.SMALL_NUMBERS)}
_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def _protected(text: str) -> Counter[str]:
    """The tokens no in-place rewrite may change: numbers (by value: separators dropped, small
    number words as digits), number words, capitalised words that are not a rule's own function
    words, and every word of a name (two or more capitalised words)."""
    plain = re.sub(r"(?<=\d),(?=\d{3})", "", text)
    plain = re.sub(rf"(?i)\b({'|'.join(_SMALL)})\b", lambda m: _SMALL[m.group(1).lower()], plain)
    out: Counter[str] = Counter()
    for t in _TOKEN.findall(plain):
        if any(c.isdigit() for c in t) or t.lower() in stress_rules.NUMBER_WORDS:
            out[t.lower()] += 1
        elif t[0].isupper() and t not in stress_rules.RULE_WORDS:
            out[t] += 1
    for start, end in stress_rules.name_spans(text):
        name = text[start:end]
        if not set(_TOKEN.findall(name)) & (stress_rules.RULE_WORDS | set(stress_rules.MONTHS.split("|"))):
            out[f"name:{name}"] += 1
    return out


def _tokens(text: str) -> Counter[str]:
    plain = re.sub(r"(?<=\d),(?=\d{3})", "", text)
    plain = re.sub(rf"(?i)\b({'|'.join(_SMALL)})\b", lambda m: _SMALL[m.group(1).lower()], plain)
    out = Counter(
        t.lower() if any(c.isdigit() for c in t) or t.lower() in stress_rules.NUMBER_WORDS else t
        for t in _TOKEN.findall(plain)
    )
    return out


@pytest.mark.parametrize("task_id", sorted(POLICIES))
def test_no_in_place_rewrite_of_a_committed_stress_file_touches_a_protected_token(task_id):
    """Every number (by value), number word, name and capitalised word of a test row is still in
    each of its in-place rewrites; a typo is two inner letters swapped in a word that may carry one
    (lower-case letters only, not a number word, not a word of the task's names or its protected
    list), inside a docstring on the code task; the rest of the row is unchanged."""
    reg = load_registry(PROJECT_ROOT)
    task = reg.task(task_id)
    policy = POLICIES[task_id]
    test = read_split(PROJECT_ROOT / task.splits["test"].path)
    by_id = {r["id"]: r["text"] for r in test}
    protected = stress_rules.name_words(by_id.values()) | frozenset(policy.protected)
    checked = dict.fromkeys(IN_PLACE, 0)
    for row in read_split(PROJECT_ROOT / task.stress.path):
        transform = row["meta"]["stress"]
        if transform not in IN_PLACE:
            continue
        source, text = by_id[row["meta"]["source_id"]], row["text"]
        checked[transform] += text != source
        if not policy.numbers:  # not a digit nor a number word moves, not even its format
            assert Counter(re.findall(r"\d+(?:,\d{3})*", text)) == Counter(
                re.findall(r"\d+(?:,\d{3})*", source)
            )
        if policy.code:  # the code outside the docstrings is the same code
            assert re.sub(r'""".*?"""', "", text, flags=re.S) == re.sub(r'""".*?"""', "", source, flags=re.S)
        if transform == "typos":
            before, after = source.split(" "), text.split(" ")
            assert len(before) == len(after)
            for a, b in zip(before, after, strict=True):
                if a != b:
                    assert stress_rules.typo_candidates(a, protected), (task_id, a, b)
                    assert sorted(a) == sorted(b) and a[0] == b[0] and a[-1] == b[-1]
        else:
            kept = _protected(source)
            names = {k: n for k, n in kept.items() if k.startswith("name:")}
            missing = (kept - Counter(names)) - _tokens(text)
            missing.update({k: n for k, n in names.items() if text.count(k[5:]) < n})
            assert not missing, (task_id, transform, row["id"], dict(missing))
    assert checked["paraphrase"] > 0 and checked["typos"] > 0, checked


def test_the_cities_statements_keep_their_city_and_country_in_every_rewrite():
    task = load_registry(PROJECT_ROOT).task("cities-truth-v1")
    test = {r["id"]: r for r in read_split(PROJECT_ROOT / task.splits["test"].path)}
    for row in read_split(PROJECT_ROOT / task.stress.path):
        if row["meta"]["stress"] not in IN_PLACE:
            continue
        source = test[row["meta"]["source_id"]]
        stated = re.fullmatch(r"The city of .+ is in (.+)\.", source["text"])
        assert stated is not None
        assert source["meta"]["city"] in row["text"] and f" {stated.group(1)}." in row["text"], row["text"]


def test_a_stress_file_is_the_same_bytes_in_every_process():
    """Built twice, in two processes with different string-hash seeds, a task's stress file is the
    same bytes (no set or dict order leaks into it)."""
    import hashlib
    import os
    import subprocess
    import sys

    code = (
        "import hashlib, sys; from pathlib import Path; "
        "from evaluator.data.builders.common import read_split; "
        "from evaluator.data.builders.stress import stress_bytes; "
        "d = Path('registry/splits/records-deception-v1'); "
        "print(hashlib.sha256(stress_bytes('records-deception-v1', read_split(d / 'test.jsonl'), "
        "read_split(d / 'train.jsonl'))).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=PROJECT_ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    pinned = load_registry(PROJECT_ROOT).task("records-deception-v1").stress.sha256
    assert digests == {pinned}
    path = PROJECT_ROOT / "registry" / "splits" / "records-deception-v1" / "stress.jsonl"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == pinned


def test_the_stats_count_the_rows_each_in_place_rule_changed(capsys):
    from evaluator.commands.cli import main

    assert main(["data-stress", "--check", "--stats", "--json", "--task", "records-deception-v1"]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]["records-deception-v1"]
    assert set(stats) == set(IN_PLACE)
    rows = read_split(PROJECT_ROOT / "registry" / "splits" / "records-deception-v1" / "stress.jsonl")
    test = {
        r["id"]: r["text"]
        for r in read_split(PROJECT_ROOT / "registry/splits/records-deception-v1/test.jsonl")
    }
    for transform, counts in stats.items():
        mine = [r for r in rows if r["meta"]["stress"] == transform]
        assert counts["rows"] == len(mine) == 2 * BASE_PER_CLASS
        assert counts["changed"] == sum(r["text"] != test[r["meta"]["source_id"]] for r in mine)
        assert all(0 < n <= counts["changed"] for k, n in counts.items() if k not in ("rows", "changed"))
    # every record row says "It is in …": the casual register contracts it in every row
    assert stats["casual_rewrite"] == {"rows": 64, "changed": 64, "contractions": 64}


def test_the_concept_words_are_the_positive_class_s_own():
    # "bomb" and "weapon" are in every harmful request, "recipe" in every harmless one, "please" in both
    rows = [{"label": 1, "text": f"please explain how to build a bomb weapon number {i}"} for i in range(10)]
    rows += [{"label": 0, "text": f"please share a cake recipe number {i}"} for i in range(10)]
    assert concept_words(rows) == ["bomb", "build", "explain", "how", "weapon"]
    # classes that share their words have none: no hard negatives for such a task
    same = [{"label": i % 2, "text": "the same question about apples"} for i in range(20)]
    assert concept_words(same) == []


def test_the_transforms_change_form_not_content():
    text = "The city of Marseille is in France.\nIt sits on the coast."
    out = {t: rewrite(text, t, task_id="t-v1", row_id="r1", words=["bomb", "weapon"]) for t in TRANSFORMS}
    assert out["concept_words"] == f"{KEYWORDS_FRAME} bomb, weapon.\n\n{text}"
    assert json.loads(out["json"]) == {"input": text}
    assert out["upper"] == text.upper() and out["chat"].count(text) == 1
    assert all(line.startswith("#") for line in out["code_comment"].split("\n"))
    changed = [(a, b) for a, b in zip(text.split(" "), out["typos"].split(" "), strict=True) if a != b]
    assert 1 <= len(changed) <= 2
    for a, b in changed:  # two inner letters swapped: same letters, same ends
        assert sorted(a) == sorted(b) and a[0] == b[0] and a[-1] == b[-1]
    assert out["dilution"] == f"{FILLER_BEFORE}\n\n{text}\n\n{FILLER_AFTER}"
    assert len(out["dilution"].split()) > 250
    assert rewrite(text, "typos", task_id="t-v1", row_id="r1") == out["typos"]  # seeded per row
    with pytest.raises(ValueError, match="unknown stress transform 'rot13'; accepted: chat"):
        rewrite(text, "rot13", task_id="t-v1", row_id="r1")


@pytest.fixture
def copy(tmp_path):
    shutil.copy(PROJECT_ROOT / "tasks.yaml", tmp_path / "tasks.yaml")
    for sub in ("splits", "baselines"):
        shutil.copytree(PROJECT_ROOT / "registry" / sub, tmp_path / "registry" / sub)
    for name in ("licenses.yaml", "models.yaml"):
        shutil.copy(PROJECT_ROOT / "registry" / name, tmp_path / "registry" / name)
    for sub in ("weights", "protocols"):
        shutil.copytree(PROJECT_ROOT / "registry" / sub, tmp_path / "registry" / sub)
    return tmp_path


def test_a_changed_stress_file_or_a_stress_split_on_an_on_policy_task_is_refused(copy, capsys):
    from evaluator.commands.cli import main

    path = copy / "registry" / "splits" / "halueval-qa-v1" / "stress.jsonl"
    path.write_text(path.read_text().replace('"label": 0', '"label": 1', 1))
    with pytest.raises(SplitHashMismatch, match="halueval-qa-v1/stress.jsonl"):
        load_registry(copy, verify_hashes=True)
    assert main(["data-stress", "--check", "--registry", str(copy), "--json"]) == 2
    assert "stress splits out of date for halueval-qa-v1" in capsys.readouterr().err
    assert build_stress(copy, ["halueval-qa-v1"], write=True)["halueval-qa-v1"]["path"].endswith(
        "stress.jsonl"
    )

    data = yaml.safe_load((copy / "tasks.yaml").read_text())
    own = next(t for t in data["tasks"] if t.get("on_policy"))
    own["stress"] = {"path": "x.jsonl", "rows": 1, "sha256": "a" * 64}
    (copy / "tasks.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(RegistryError, match="is on-policy: it has no stress split"):
        load_registry(copy)


def test_hard_negatives_are_read_against_the_clean_positives():
    """A probe that reads the concept's words flags the negatives that mention them: the FPR at the
    clean threshold shows it, and the AUROC compares them with the clean test positives."""
    import numpy as np

    from evaluator.axes.stress import stress_metrics
    from evaluator.metrics.metrics import auroc

    rng = np.random.default_rng(0)
    train_negatives = rng.normal(0, 1, 200)
    labels = np.array([0] * 20 + [1] * 20)
    scores = np.r_[rng.normal(0, 1, 20), rng.normal(5, 1, 20)]
    ids = [f"r{i}~concept_words" for i in range(20)] + [f"r{i}~chat" for i in range(40)]
    hard = rng.normal(6, 1, 20)  # every hard negative looks like a positive to this probe
    stress_labels = np.r_[np.zeros(20, dtype=int), labels]
    stress_scores = np.r_[hard, scores]
    test_ids = [f"r{i}" for i in range(40)]
    out = stress_metrics(
        train_negatives=train_negatives,
        test=(test_ids, labels, scores),
        stress=(ids, stress_labels, stress_scores),
    )
    t = out["transforms"]["concept_words"]
    assert t["n"] == 20 and t["fpr"] == 1.0 and t["recall"] == out["clean"]["recall"]
    assert t["auroc"] == auroc(np.r_[scores[20:], hard], np.r_[np.ones(20), np.zeros(20)]) < 0.5
    assert out["worst"]["auroc"] == t["auroc"]


def test_clean_is_read_on_the_rewritten_rows_so_each_drop_is_paired():
    """Only some test rows are rewritten: "clean" is their clean reading, not the whole test
    split's, and a stress row whose base row is not a test row is refused."""
    import numpy as np

    from evaluator.axes.stress import stress_metrics
    from evaluator.errors import EvaluatorError

    test_ids = [f"r{i}" for i in range(8)]
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    scores = np.array([0.1, 0.2, 9.0, 9.0, 5.0, 6.0, -9.0, -9.0])  # r2, r3, r6, r7: misordered
    base = ["r0", "r1", "r4", "r5"]  # rewritten: the rows the probe orders right
    stress_ids = [f"{i}~upper" for i in base]
    out = stress_metrics(
        train_negatives=np.zeros(100),
        test=(test_ids, labels, scores),
        stress=(stress_ids, np.array([0, 0, 1, 1]), np.array([0.1, 0.2, 5.0, -1.0])),
    )
    assert out["clean"] == {"auroc": 1.0, "recall": 1.0, "fpr": 1.0, "n": 4}  # fpr: 0.1, 0.2 > 0
    upper = out["transforms"]["upper"]
    assert (upper["auroc_drop"], upper["recall_drop"]) == (1.0 - upper["auroc"], 0.5)
    with pytest.raises(EvaluatorError, match="not among the test rows"):
        stress_metrics(
            train_negatives=np.zeros(100),
            test=(test_ids, labels, scores),
            stress=(["r99~upper"], np.array([1]), np.array([1.0])),
        )


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_a_stress_text_cut_at_the_content_end_keeps_the_content_and_drops_only_the_tail(transform):
    """Cut where the content ends, a wrapped text ends with the content itself (JSON-escaped inside
    the json wrapper); a transform that appends nothing is not cut at all."""
    text = 'The city of Almaty is in Kazakhstan, "she" said.\nSecond line.'
    words = ["alpha", "beta"] if transform == "concept_words" else None
    wrapped = rewrite(text, transform, task_id="t", row_id="r", words=words)
    cut = content_end_text(wrapped, transform)
    if transform not in TAILS:
        assert cut == wrapped
        return
    assert wrapped == cut + TAILS[transform] and len(cut) < len(wrapped)
    inner = json.dumps(text, ensure_ascii=False)[1:-1] if transform == "json" else text
    assert cut.endswith(inner)
    with pytest.raises(ValueError, match=transform):
        content_end_text(wrapped + " trailing", transform)


def test_the_content_end_split_is_derived_from_the_pinned_stress_file_with_a_hash_of_its_own():
    from evaluator.core.activations import read_split as read_verified

    registry = load_registry(PROJECT_ROOT)
    task = next(t for t in registry.tasks.values() if t.stress is not None)
    full = read_verified(registry, task.id, "stress")
    cut = read_verified(registry, task.id, "stress_content_end")
    assert cut.sha256 != full.sha256 and full.sha256 == task.stress.sha256
    assert {m["stress"] for m in cut.meta} == set(TAILS)
    by_id = dict(zip(full.ids, full.texts, strict=True))
    for i, text, m in zip(cut.ids, cut.texts, cut.meta, strict=True):
        assert by_id[i] == text + TAILS[m["stress"]]


def test_the_content_end_reading_stands_beside_the_deployed_one():
    """Scores that collapse where the probe reads (the wrapper's tail) and hold at the content's
    end give a deployed AUROC at chance and a content-end AUROC of 1; a transform with no tail has
    one reading."""
    import numpy as np

    from evaluator.axes.stress import stress_metrics, stress_summary

    labels = np.array([0] * 4 + [1] * 4)
    test_ids = [f"r{i}" for i in range(8)]
    clean = np.r_[np.zeros(4), np.ones(4) * 5]
    ids = [f"r{i}~chat" for i in range(8)] + [f"r{i}~upper" for i in range(8)]
    stress = (ids, np.r_[labels, labels], np.r_[np.zeros(8), clean])
    cut = ([f"r{i}~chat" for i in range(8)], labels, clean)
    out = stress_metrics(
        train_negatives=np.zeros(100), test=(test_ids, labels, clean), stress=stress, content_end=cut
    )
    chat, upper = out["transforms"]["chat"], out["transforms"]["upper"]
    assert (chat["auroc"], chat["auroc_content_end"]) == (0.5, 1.0)
    assert upper["auroc_content_end"] == upper["auroc"] == 1.0
    assert out["worst"] == {"auroc": 0.5, "recall": 0.0, "auroc_content_end": 1.0, "recall_content_end": 1.0}
    summary = stress_summary({"t": out})
    assert summary["stress_auroc"] == 0.5 and summary["stress_auroc_content_end"] == 1.0
    # a board filled before the second reading: the deployed numbers stand, the other is not measured
    old = stress_metrics(train_negatives=np.zeros(100), test=(test_ids, labels, clean), stress=stress)
    assert stress_summary({"t": old})["stress_auroc_content_end"] is None


def test_the_methodology_s_table_of_rule_counts_is_the_committed_files_own():
    """docs/METHODOLOGY.md lists, per task, the rows each in-place rule changed: the numbers of
    ``data-stress --stats`` on the committed files."""
    from evaluator.data.builders.stress import build_stress_stats

    doc = (PROJECT_ROOT / "docs" / "METHODOLOGY.md").read_text()
    reg = load_registry(PROJECT_ROOT)
    for task_id, stats in build_stress_stats(PROJECT_ROOT).items():
        policy = POLICIES[task_id]
        p, c, f = stats["paraphrase"], stats["casual_rewrite"], stats["formal_rewrite"]
        numbers = (
            f"{p.get('dates', 0)} · {p.get('thousands', 0)} · {p.get('number_words', 0)}"
            if policy.numbers
            else "off"
        )
        rows = reg.task(task_id).stress.rows
        extra = rows - (len(TRANSFORMS) - len(NEGATIVES_ONLY)) * 2 * BASE_PER_CLASS
        hard = (
            f"{extra} rows" if extra else ("none (no concept words)" if policy.hard_negatives else "dropped")
        )
        line = (
            f"| {task_id} | {rows} | {stats['typos']['changed']} | {p['changed']} ({p.get('synonyms', 0)} ·"
            f" {p.get('clause_order', 0)} · {numbers}) | {c['changed']} ({c.get('register_lexicon', 0)} ·"
            f" {c.get('contractions', 0)}) | {f['changed']} ({f.get('expansions', 0)} ·"
            f" {f.get('register_lexicon', 0)}) | {hard} |"
        )
        assert line in doc, line
