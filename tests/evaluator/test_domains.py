"""Every row of every committed split carries a domain from the documented vocabulary
(evaluator.data.domains), assigned by the builders from the source's own fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.data import domains as d
from evaluator.data.split_groups import named_domains_missing

ROOT = Path(__file__).resolve().parents[2]
SPLIT_FILES = sorted((ROOT / "registry" / "splits").rglob("*.jsonl"))


def test_there_are_split_files_to_check():
    assert len(SPLIT_FILES) >= 80


@pytest.mark.parametrize("path", SPLIT_FILES, ids=lambda p: str(p.relative_to(ROOT / "registry" / "splits")))
def test_every_row_has_a_domain_in_the_vocabulary(path):
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        d.validate_row_domain(row, where=str(path.name))


def test_the_named_domains_are_in_the_vocabulary_with_a_description():
    for name in d.NAMED_DOMAINS:
        assert name in d.DOMAINS and d.DOMAIN_DESCRIPTIONS[name].strip()


@pytest.mark.parametrize(
    "table",
    [
        dict(d.DONOTANSWER_INTENT_DOMAINS),
        d.OVERREFUSAL_CATEGORY_DOMAINS,
        d.PERSISTBENCH_QUERY_DOMAINS,
        d.RHO_PAIR_TOPIC_DOMAINS,
    ],
)
def test_every_mapping_table_maps_into_the_vocabulary(table):
    assert set(table.values()) <= set(d.DOMAINS)


def test_do_not_answer_takes_the_first_subject_code_in_table_order():
    assert d.donotanswer_domain(["S002legal", "S002med"]) == "medicine"
    assert d.donotanswer_domain(["S008spam"]) == "code"
    assert d.donotanswer_domain(["S005hate"]) == "ethics_safety"


def test_an_unmapped_source_value_is_an_error_naming_what_is_mapped():
    with pytest.raises(d.DomainError, match="no domain; mapped: medical"):
        d.overrefusal_domain("astrology")
    with pytest.raises(d.DomainError, match="not one of"):
        d.validate_domain("medical")


def test_rho_pairs_harmful_half_is_safety_benign_half_its_topic():
    assert d.rho_pair_domain("first_aid_vs_poisoning", harmful=True) == "ethics_safety"
    assert d.rho_pair_domain("first_aid_vs_poisoning", harmful=False) == "medicine"
    assert d.rho_pair_domain("gardening_vs_arson", harmful=False) == "everyday_life"


def test_named_domains_missing_lists_what_no_row_is_in():
    assert named_domains_missing(["code", "geography"]) == ["medicine", "law"]
    assert named_domains_missing([]) == list(d.NAMED_DOMAINS)
