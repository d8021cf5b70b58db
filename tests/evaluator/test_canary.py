"""The canary (evaluator/axes/canary.py, registry/canary.json) on the real SmolLM2: the committed
file is current and was written by the generator's rule; the check agrees on this machine; expected
values moved beyond the protocol's tolerance, or the model's weights scaled by 1%, make it differ,
naming the row, the expected and measured scores, their difference and the tolerance; a stale
canary refuses too; ``python -m evaluator canary`` exits 1 on a mismatch, and ``--write``
measures the committed values again."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evaluator.axes.canary import (
    AGREE,
    DIFFER,
    ROWS_PER_LABEL,
    STALE,
    UNCHECKED,
    canary_check,
    canary_path,
    canary_read,
    canary_verdicts,
    rows_choose,
)
from evaluator.commands import cli
from evaluator.commands.canary import canary_probe
from evaluator.commands.reference_probes.manifest import load_manifest
from evaluator.core.activations import read_split
from evaluator.core.models import load_model
from evaluator.data.registry.files import sha256_file
from evaluator.data.registry.load import load_registry
from tests.evaluator.conftest import GEMMA, MINILM, PROJECT_ROOT, SMOLLM, model_cache_dir

REG = load_registry(PROJECT_ROOT)
CANARY = canary_read(canary_path(PROJECT_ROOT))


@pytest.fixture(scope="module")
def smollm():
    """SmolLM2 loaded the way a worker loads it: under the registry's protocol."""
    return load_model(
        SMOLLM, registry=REG, cache_dir=model_cache_dir(), device="cpu", protocol=REG.protocol()
    )


def tampered(tmp_path: Path, change) -> Path:
    """A copy of the committed canary file with ``change(data)`` applied."""
    data = json.loads(canary_path(PROJECT_ROOT).read_text())
    change(data)
    path = tmp_path / "canary.json"
    path.write_text(json.dumps(data))
    return path


def smollm_entry(data: dict) -> dict:
    return next(m for m in data["models"] if m["model"] == SMOLLM)


# --------------------------------------------------------------------------- the file, no model


def test_the_committed_canary_is_current_and_follows_the_generators_rule():
    assert {SMOLLM, MINILM, GEMMA} <= {e.model for e in CANARY.entries}
    assert CANARY.protocol == REG.protocol().id
    manifest = load_manifest(REG)
    for e in CANARY.entries:
        assert e.weights_sha256 == REG.model(e.model).weights_sha256, e.model
        ref = canary_probe(REG, manifest, e.model)
        assert ref is not None and (ref.slug, ref.path) == (e.probe, e.artifact), e.model
        assert sha256_file(PROJECT_ROOT / e.artifact / "probe.safetensors") == e.artifact_sha256, e.model
        assert REG.task(e.task).split_spec(e.split, e.model).sha256 == e.split_sha256, e.model
        rows = read_split(REG, e.task, e.split, model=e.model)
        picked = rows_choose(rows)
        assert [r.id for r in e.rows] == [rows.ids[i] for i in picked], e.model
        assert [r.label for r in e.rows] == [int(rows.labels[i]) for i in picked], e.model
        assert sorted(r.label for r in e.rows) == [0] * ROWS_PER_LABEL + [1] * ROWS_PER_LABEL
        expected = [r.expected for r in e.rows]
        assert all(np.isfinite(expected)) and len(set(expected)) == len(expected), e.model


def test_the_canary_probe_is_the_deepest_one_prompt_reference_probe_of_its_model():
    manifest = load_manifest(REG)
    layers = {e.model: e.layer for e in CANARY.entries}
    assert layers[SMOLLM] >= 28 and layers[GEMMA] == REG.model(GEMMA).n_layers
    assert layers[MINILM] == REG.model(MINILM).n_layers
    assert canary_probe(REG, manifest, "no-such-model") is None


# --------------------------------------------------------------------------- the check, real model


@pytest.mark.model
def test_the_canary_agrees_on_this_machine(smollm):
    entry = CANARY.entry(SMOLLM)
    verdict = canary_check(entry, smollm, REG, protocol_id=CANARY.protocol)
    assert verdict.status == AGREE and not verdict.refuses, verdict.line()
    bound = REG.protocol().tolerances.score_bound(max(abs(r.expected) for r in entry.rows))
    assert verdict.tolerance == pytest.approx(bound) and 1e-3 <= bound < 1e-2
    assert len(verdict.rows) == 2 * ROWS_PER_LABEL
    assert all(r["within"] and r["diff"] <= bound for r in verdict.rows)


@pytest.mark.model
def test_expected_values_moved_beyond_the_tolerance_differ_naming_the_row(smollm, tmp_path):
    entry = CANARY.entry(SMOLLM)
    bound = REG.protocol().tolerances.score_bound(max(abs(r.expected) for r in entry.rows))
    moved, nudged = entry.rows[2].id, entry.rows[5].id

    def change(data):
        rows = smollm_entry(data)["rows"]
        rows[2]["expected"] += 3 * bound  # beyond the tolerance
        rows[5]["expected"] -= 0.5 * bound  # within it

    canary = canary_read(tampered(tmp_path, change))
    verdict = canary_check(canary.entry(SMOLLM), smollm, REG, protocol_id=canary.protocol)
    assert verdict.status == DIFFER and verdict.refuses
    beyond = [r["id"] for r in verdict.rows if not r["within"]]
    assert beyond == [moved]
    row = next(r for r in verdict.rows if r["id"] == moved)
    assert row["diff"] == pytest.approx(3 * bound, rel=0.05)
    assert next(r for r in verdict.rows if r["id"] == nudged)["within"]
    line = verdict.line()
    for part in (
        SMOLLM,
        entry.probe,
        moved,
        f"{row['expected']:.6g}",
        f"{row['got']:.6g}",
        f"{row['diff']:.3g}",
    ):
        assert part in line, (part, line)
    assert f"> tolerance {bound:.3g}" in line and "1 of 8 rows beyond" in line


@pytest.mark.model
def test_the_model_with_weights_scaled_by_one_percent_differs(tmp_path):
    import torch

    lm = load_model(
        SMOLLM, registry=REG, cache_dir=model_cache_dir(), device="cpu", protocol=REG.protocol(), memo=False
    )
    block = lm.blocks[len(lm.blocks) // 2]
    weight = next(p for p in block.parameters() if p.ndim == 2)
    with torch.no_grad():
        weight.mul_(1.01)
    verdict = canary_check(CANARY.entry(SMOLLM), lm, REG, protocol_id=CANARY.protocol)
    assert verdict.status == DIFFER and verdict.refuses
    worst = verdict.worst
    assert worst is not None and worst["diff"] > verdict.tolerance
    assert f"row {worst['id']}" in verdict.line() and "beyond the tolerance" in verdict.line()


@pytest.mark.model
def test_a_stale_canary_refuses_and_says_to_write_it_again(smollm, tmp_path):
    def change(data):
        smollm_entry(data)["artifact_sha256"] = "0" * 64

    canary = canary_read(tampered(tmp_path, change))
    (verdict,) = canary_verdicts(canary, REG, [SMOLLM], load=lambda model_id: smollm)
    assert verdict.status == STALE and verdict.refuses and not verdict.rows
    assert "hashes to" in verdict.reason and "canary --write" in verdict.reason

    empty = canary_read(tampered(tmp_path, lambda data: data["models"].clear()))
    (unchecked,) = canary_verdicts(
        empty, REG, [SMOLLM], load=lambda model_id: pytest.fail("no model to load")
    )
    assert unchecked.status == UNCHECKED and not unchecked.refuses


# --------------------------------------------------------------------------- the command


@pytest.mark.model
def test_the_command_exits_1_naming_the_row_and_0_when_it_agrees(smollm, tmp_path, capsys):
    def change(data):
        smollm_entry(data)["rows"][0]["expected"] += 1.0

    common = ["--models", SMOLLM, "--cache-dir", str(model_cache_dir()), "--device", "cpu", "--json"]
    assert cli.main(["canary", "--canary-file", str(tampered(tmp_path, change)), *common]) == 1
    out = json.loads(capsys.readouterr().out)
    (model,) = out["models"]
    assert out["agree"] is False and model["status"] == DIFFER
    assert CANARY.entry(SMOLLM).rows[0].id in model["line"] and "|Δ| 1" in model["line"]

    assert cli.main(["canary", *common]) == 0
    assert json.loads(capsys.readouterr().out)["models"][0]["status"] == AGREE


@pytest.mark.model
def test_write_measures_the_committed_values_again(smollm, tmp_path, capsys):
    path = tmp_path / "canary.json"
    argv = ["canary", "--write", "--models", SMOLLM, "--canary-file", str(path)]
    assert cli.main([*argv, "--cache-dir", str(model_cache_dir()), "--device", "cpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["models"][0]["probe"] == CANARY.entry(SMOLLM).probe
    written, committed = canary_read(path).entry(SMOLLM), CANARY.entry(SMOLLM)
    assert written is not None and [r.id for r in written.rows] == [r.id for r in committed.rows]
    bound = REG.protocol().tolerances.score_bound(max(abs(r.expected) for r in committed.rows))
    np.testing.assert_allclose(
        [r.expected for r in written.rows], [r.expected for r in committed.rows], rtol=0, atol=bound
    )
