"""Suspicion rule 2: declared training data (task splits, or hashes of external texts) that
matches a test split after normalisation opens a leakage record when the submission is scored."""

from __future__ import annotations

import hashlib
import json

import pytest

from evaluator.data.registry.load import load_registry
from evaluator.data.texts import normalize_text, text_hash
from leaderboard.errors import ValidationFailed
from leaderboard.models import EvaluationRun, LeakageRecord, Submission
from leaderboard.services.leakage import DECLARED_OVERLAP_RULE, leakage_rules_on_scoring
from leaderboard.services.submissions import submission_advance
from leaderboard.validation import metadata_validate
from tests.factories import EvaluationRunFactory
from tests.leaderboard.reevaluation_data import MODEL, TRUTH_TASK, scored

pytestmark = pytest.mark.django_db


def test_normalisation_ignores_case_whitespace_and_punctuation():
    assert normalize_text("  The City of PARIS,\tis in\nFrance!! ") == "the city of paris is in france"
    assert text_hash("The city of Paris is in France.") == text_hash("the city of paris  is in france")
    assert text_hash("The city of Paris is in France.") != text_hash("The city of Lyon is in France.")
    assert text_hash("x") == hashlib.sha256(b"x").hexdigest()


# --------------------------------------------------------------------------- the declaration


def metadata(**training_data) -> dict:
    return {
        "name": "Declared probe",
        "category": "hallucination",
        "base_model": MODEL,
        "layer": 4,
        "position": "last_token",
        "input": "single",
        "output": "logit",
        "license": "MIT",
        "training_data": training_data,
        "trained_on": [TRUTH_TASK],
    }


def test_a_declaration_of_tasks_splits_and_text_hashes_is_accepted(small_registry):
    clean = metadata_validate(
        metadata(
            tasks=[TRUTH_TASK],
            splits=["train", "test"],
            text_sha256=[text_hash("b"), text_hash("a"), text_hash("a")],
            external="a scrape of geography quizzes",
        )
    )
    assert clean.training_data == {
        "tasks": [TRUTH_TASK],
        "splits": ["train", "test"],
        "text_sha256": sorted({text_hash("a"), text_hash("b")}),
        "external": "a scrape of geography quizzes",
    }
    assert metadata_validate(metadata(tasks=[TRUTH_TASK])).training_data["splits"] == ["train"]  # the default


@pytest.mark.parametrize(
    ("training_data", "message"),
    [
        (
            {"tasks": [TRUTH_TASK], "splits": ["dev"]},
            "unknown split(s) dev; accepted: train, test, distshift, holdout_pool",
        ),
        ({"splits": ["test"]}, "list the tasks too"),
        ({"tasks": ["nope-v1"]}, "unknown task id(s) nope-v1"),
        ({"text_sha256": ["abc"]}, "64-character lowercase hex"),
        ({"tasks": [TRUTH_TASK], "data": "x"}, "unknown field(s) data"),
        ({"external": 3}, "external must be a text"),
    ],
)
def test_a_malformed_declaration_is_refused_with_what_is_accepted(small_registry, training_data, message):
    with pytest.raises(ValidationFailed, match=message.replace("(", r"\(").replace(")", r"\)")) as exc:
        metadata_validate(metadata(**training_data))
    assert exc.value.field == "training_data"


def test_too_many_text_hashes_are_refused(small_registry, monkeypatch):
    monkeypatch.setattr("leaderboard.validation.MAX_TEXT_HASHES", 2)
    with pytest.raises(ValidationFailed, match="at most 2"):
        metadata_validate(metadata(text_sha256=[text_hash(str(i)) for i in range(3)]))


# --------------------------------------------------------------------------- the rule


def declared_version(small_registry, **training_data):
    version = scored("declared", training_data={"splits": ["train"], "text_sha256": [], **training_data})
    EvaluationRunFactory(
        probe_version=version, task_id=TRUTH_TASK, split="test", kind="score", submission=version.submission
    )
    return version


def test_training_on_the_test_split_opens_a_record(small_registry):
    version = declared_version(small_registry, tasks=[TRUTH_TASK], splits=["train", "test"])
    record = leakage_rules_on_scoring(version=version)

    assert record.rule == DECLARED_OVERLAP_RULE and record.status == LeakageRecord.Status.OPEN
    assert record.probe_version == version and record.source == LeakageRecord.Source.RULE
    [overlap] = record.evidence["overlaps"]
    assert overlap["task"] == TRUTH_TASK and overlap["rows"] == overlap["split_rows"] == 32
    assert overlap["sources"] == [f"{TRUTH_TASK}/test"]
    assert f"{TRUTH_TASK}/test (32 of 32 rows)" in record.summary
    assert leakage_rules_on_scoring(version=version) == record  # one record per rule and version


def test_training_on_the_train_split_opens_nothing(small_registry):
    version = declared_version(small_registry, tasks=[TRUTH_TASK])
    assert leakage_rules_on_scoring(version=version) is None
    assert not LeakageRecord.objects.exists()


def test_external_texts_match_after_normalisation(small_registry):
    reg = load_registry(small_registry)
    rows = [json.loads(line) for line in (small_registry / reg.task(TRUTH_TASK).splits["test"].path).open()]
    scraped = [
        rows[0]["text"].upper(),
        "  " + rows[1]["text"].replace(".", " !"),
        rows[2]["text"] + "\n",
        "A sentence that is in no split.",
    ]
    version = declared_version(small_registry, text_sha256=[text_hash(t) for t in scraped])

    record = leakage_rules_on_scoring(version=version)
    [overlap] = record.evidence["overlaps"]
    assert overlap["rows"] == 3 and overlap["sources"] == ["text_sha256"]
    assert set(overlap["example_ids"]) == {rows[0]["id"], rows[1]["id"], rows[2]["id"]}


def test_only_test_splits_the_probe_is_measured_on_count(small_registry):
    version = scored(
        "elsewhere", training_data={"tasks": [TRUTH_TASK], "splits": ["test"], "text_sha256": []}
    )
    assert leakage_rules_on_scoring(version=version) is None  # no test run on that task


def test_the_rule_runs_when_a_submission_is_scored(small_registry, monkeypatch):
    version = declared_version(small_registry, tasks=[TRUTH_TASK], splits=["test"])
    Submission.objects.filter(pk=version.submission.pk).update(status=Submission.Status.RUNNING)
    monkeypatch.setattr(
        "leaderboard.services.submissions.submission_score", lambda **kwargs: []
    )  # numbers aside

    assert submission_advance(submission=Submission.objects.get(pk=version.submission.pk)).status == "scored"
    assert EvaluationRun.objects.filter(probe_version=version).count() == 1
    [record] = LeakageRecord.objects.filter(probe_version=version)
    assert record.rule == DECLARED_OVERLAP_RULE


def test_the_cli_prints_the_hashes_to_declare(tmp_path, capsys):
    from evaluator.commands.cli import main

    data = tmp_path / "scrape.jsonl"
    data.write_text(
        json.dumps({"text": "The city of Paris is in France."}) + "\n" + json.dumps({"text": "b"}) + "\n"
    )
    assert main(["text-hashes", str(data)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {
        "texts": 2,
        "text_sha256": sorted([text_hash("the city of paris is in france"), text_hash("b")]),
    }
    lines = tmp_path / "lines.txt"
    lines.write_text("b\n")
    assert main(["text-hashes", "--lines", str(lines)]) == 0
    assert json.loads(capsys.readouterr().out)["text_sha256"] == [text_hash("b")]
