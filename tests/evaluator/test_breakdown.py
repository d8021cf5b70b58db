"""The breakdown of a task's test results by the rows' domain and source
(evaluator.metrics.breakdown), and the split-file reader it is fed from (evaluator.data.split_groups)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from evaluator.data.domains import NAMED_DOMAINS
from evaluator.data.split_groups import domains_present, named_domains_missing, row_groups, source_dataset
from evaluator.errors import MetricInputError, RegistryError
from evaluator.metrics import metrics as m
from evaluator.metrics.breakdown import (
    MEASURED,
    MIN_ROWS_PER_CLASS,
    TOO_FEW_ROWS,
    UNLABELLED,
    GroupResult,
    breakdown,
    breakdowns,
    wilson_interval,
)
from evaluator.metrics.records import TaskRecord
from tests.evaluator.test_records import metrics_of


def _toy():
    """Group "a": 20 positives scoring 1..20 and 20 negatives scoring 0.5..19.5 (exact AUROC known);
    group "b": 3 positives, 30 negatives; group "c": only negatives."""
    ids, labels, scores, groups = [], [], [], {}
    for k in range(20):
        ids += [f"a+{k}", f"a-{k}"]
        labels += [1, 0]
        scores += [k + 1.0, k + 0.5]
        groups[f"a+{k}"] = groups[f"a-{k}"] = "a"
    for k in range(33):
        ids.append(f"b{k}")
        labels.append(1 if k < 3 else 0)
        scores.append(float(k))
        groups[f"b{k}"] = "b"
    for k in range(25):
        ids.append(f"c{k}")
        labels.append(0)
        scores.append(float(k))
        groups[f"c{k}"] = "c"
    return ids, np.array(labels), np.array(scores), groups


def test_a_groups_auroc_is_exact_and_its_interval_is_the_projects_bootstrap():
    ids, y, s, groups = _toy()
    out = breakdown(ids, y, s, threshold=10.0, groups=groups)
    assert list(out) == ["a", "b", "c"]
    a = out["a"]
    # positive k+1 beats negatives 0.5..k+0.5 (k+1 of them): sum (k+1) over k<20 = 210 of 400 pairs
    assert a.status == MEASURED and (a.n_pos, a.n_neg) == (20, 20)
    assert a.auroc == pytest.approx(210 / 400)
    idx = [i for i, r in enumerate(ids) if groups[r] == "a"]
    assert a.auroc == pytest.approx(roc_auc_score(y[idx], s[idx]))
    assert a.auroc_ci == m.auroc_ci(s[idx], y[idx])
    # recall at the operating point: positives strictly above 10 are 11..20
    assert a.recall_at_1pct_fpr == pytest.approx(10 / 20)
    assert a.recall_at_1pct_fpr_ci == wilson_interval(10, 20)


def test_a_group_with_too_few_rows_of_a_class_has_counts_and_no_numbers():
    ids, y, s, groups = _toy()
    out = breakdown(ids, y, s, threshold=10.0, groups=groups)
    assert out["b"] == GroupResult(n_pos=3, n_neg=30, status=TOO_FEW_ROWS)
    # one class only: no AUROC can exist, and none is attempted
    assert out["c"] == GroupResult(n_pos=0, n_neg=25, status=TOO_FEW_ROWS)
    assert MIN_ROWS_PER_CLASS == 20


def test_the_boundary_is_twenty_of_each_class():
    ids = [f"r{i}" for i in range(39)]
    y = np.array([1] * 20 + [0] * 19)
    s = np.arange(39.0)
    assert breakdown(ids, y, s, threshold=None, groups={i: "g" for i in ids})["g"].status == TOO_FEW_ROWS
    ids.append("r39")
    y = np.append(y, 0)
    s = np.append(s, 39.0)
    g = breakdown(ids, y, s, threshold=None, groups={i: "g" for i in ids})["g"]
    assert g.status == MEASURED and g.auroc is not None
    assert g.recall_at_1pct_fpr is None and g.recall_at_1pct_fpr_ci is None  # no threshold: no recall


def test_rows_without_a_group_are_unlabelled_and_a_file_naming_none_gives_no_breakdown():
    ids, y, s, groups = _toy()
    partial = {k: v for k, v in groups.items() if not k.startswith("c")}
    assert UNLABELLED in breakdown(ids, y, s, threshold=None, groups=partial)
    assert breakdown(ids, y, s, threshold=None, groups={}) == {}
    assert breakdown(ids, y, s, threshold=None, groups=dict.fromkeys(ids)) == {}


def test_breakdowns_by_domain_and_source_are_deterministic_and_round_trip():
    ids, y, s, groups = _toy()
    row_groups_ = {i: {"domain": g, "source": "one"} for i, g in groups.items()}
    first = breakdowns(ids, y, s, threshold=10.0, row_groups=row_groups_)
    assert first == breakdowns(ids, y, s, threshold=10.0, row_groups=row_groups_)
    assert list(first) == ["domain", "source"] and list(first["source"]) == ["one"]
    assert first["source"]["one"].auroc == pytest.approx(roc_auc_score(y, s))
    record = TaskRecord.measured(metrics_of("a-v1"), text=None, baselines=None, by_group=first)
    stored = json.loads(json.dumps(record.to_json()))
    assert stored["by_domain"]["b"]["status"] == TOO_FEW_ROWS and stored["by_domain"]["b"]["auroc"] is None
    back = TaskRecord.from_json(stored)
    assert back.by_domain == first["domain"] and back.by_source == first["source"]
    # a record stored before the breakdown existed reads as empty
    del stored["by_domain"], stored["by_source"]
    old = TaskRecord.from_json(stored)
    assert old.by_domain == {} and old.by_source == {}


def test_mismatched_lengths_are_refused():
    with pytest.raises(MetricInputError, match="3 ids, 2 labels and 2 scores"):
        breakdown(["a", "b", "c"], [0, 1], [0.1, 0.2], threshold=None, groups={})


def test_wilson_interval_matches_the_closed_form():
    lo, hi = wilson_interval(10, 20)
    assert (lo, hi) == pytest.approx((0.2993, 0.7007), abs=1e-4)
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0
    with pytest.raises(MetricInputError):
        wilson_interval(1, 0)


def _split_file(tmp_path, rows) -> tuple[str, str]:
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path = tmp_path / "test.jsonl"
    path.write_bytes(data)
    return str(path), hashlib.sha256(data).hexdigest()


def test_row_groups_read_the_pinned_file_and_refuse_another(tmp_path):
    path, sha = _split_file(
        tmp_path,
        [
            {"id": "x1", "label": 1, "text": "t", "domain": "medicine", "source": "donotanswer:info:S002med"},
            {"id": "x2", "label": 0, "text": "t"},
        ],
    )
    assert row_groups(path, sha) == {
        "x1": {"domain": "medicine", "source": "donotanswer"},  # grouped by the dataset
        "x2": {"domain": None, "source": None},
    }
    assert domains_present(path, sha) == {"medicine"}
    assert source_dataset("harmbench") == "harmbench" and source_dataset(None) is None
    with pytest.raises(RegistryError, match="the registry pins 0+"):
        row_groups(path, "0" * 64)


def test_named_domains_missing_keeps_the_methodologys_order():
    assert NAMED_DOMAINS == ("medicine", "law", "code")
    assert named_domains_missing({"code", "geography"}) == ["medicine", "law"]
    assert named_domains_missing(NAMED_DOMAINS) == []


def test_a_stored_breakdown_validates_against_the_score_schema():
    import jsonschema

    from evaluator.metrics.records import schema

    ids, y, s, groups = _toy()
    by_group = breakdowns(ids, y, s, threshold=10.0, row_groups={i: {"domain": g} for i, g in groups.items()})
    stored = json.loads(
        json.dumps(
            TaskRecord.measured(metrics_of("a-v1"), text=None, baselines=None, by_group=by_group).to_json()
        )
    )
    validator = jsonschema.Draft202012Validator(
        {"$defs": schema("score")["$defs"], "$ref": "#/$defs/taskRecord"}
    )
    validator.validate(stored)
    stored["by_domain"]["a"]["status"] = "guessed"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(stored)
