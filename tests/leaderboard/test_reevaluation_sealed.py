"""Sealed quarterly holdouts on the small registry, with no model: a cycle draws its holdouts from
the sealed pools with a secret seed and stores its commitment before any run exists; while it runs
no page, API answer or export shows the seed, a holdout's rows or their ids; once it completes the
seed and the rows are revealed, and ``python -m evaluator verify-holdout`` passes on the genuine
reveal and fails, naming the check, on a changed seed, a changed row or rows not drawn from the
pool. The sealed files do not open without the installation's key."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluator.commands.cli import main as evaluator_main
from evaluator.data.holdouts import rows_to_bytes
from evaluator.data.pools import pool_bytes, sealed_label, sealed_pool_load, sealed_pool_path
from evaluator.data.registry.load import load_registry
from evaluator.data.sealing import SealError, read_sealed
from leaderboard.models import EvaluationRun, ReevaluationCycle, holdout_items
from leaderboard.sealed import holdout_label, holdout_read, sealing_key
from leaderboard.services import reevaluation
from leaderboard.services.exports import examples_export_write
from leaderboard.services.reevaluation import reevaluation_start
from tests.leaderboard.reevaluation_data import EA_TASK, TRUTH_TASK, finish_holdout_runs, run_cycle, scored

pytestmark = pytest.mark.django_db
QUARTER = "2026Q4"
PUBLIC_READS = (
    f"/reevaluations/{QUARTER}/",
    "/reevaluations/",
    f"/api/v1/reevaluations/{QUARTER}",
    "/api/v1/reevaluations",
    "/api/v1/exports",
    "/api/v1/bundles",
)


@pytest.fixture
def board(small_registry):
    return [scored("first"), scored("second")]


def _secrets(cycle: ReevaluationCycle) -> list[str]:
    """What must not be shown while the cycle runs: the seed, every drawn row's id and text."""
    out = [cycle.seed]
    for task, model, entry in holdout_items(cycle.holdouts):
        rows = holdout_read(cycle.quarter, task, model, entry["path"]).decode().splitlines()
        for row in map(json.loads, rows):
            out += [row["id"], row["text"][:60]]
    return out


def _shown(client, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, (url, response.status_code)
    if getattr(response, "streaming", False):  # a download (the per-example export)
        return gzip.decompress(b"".join(response.streaming_content)).decode()
    return response.content.decode()


# --------------------------------------------------------------------------- the commitment


def test_the_commitment_is_stored_before_any_run_and_nothing_secret_is_shown(
    board, maintainer, client, monkeypatch, settings
):
    seen = {}
    plan = reevaluation._runs_plan

    def plan_after_commit(*, cycle, holdouts, dispatch):
        stored = ReevaluationCycle.objects.get(pk=cycle.pk)  # read back from the database
        seen.update(commitment=stored.commitment, runs=EvaluationRun.objects.filter(cycle=cycle).count())
        return plan(cycle=cycle, holdouts=holdouts, dispatch=dispatch)

    monkeypatch.setattr(reevaluation, "_runs_plan", plan_after_commit)
    cycle = reevaluation_start(quarter=QUARTER, by=maintainer, dispatch=False)
    assert seen["runs"] == 0 and seen["commitment"] == cycle.commitment  # committed, then planned
    assert cycle.runs.count() == 2 and cycle.status == "running"

    commitment = cycle.commitment
    secret = bytes.fromhex(cycle.seed)
    assert len(secret) == 32 and commitment["seed_sha256"] == hashlib.sha256(secret).hexdigest()
    assert commitment["scheme"] == "probebench-holdout-v1" and commitment["pool_ratio"] == 10
    committed = {(e["task"], e["base_model"]): e for e in commitment["holdouts"]}
    assert set(committed) == {(TRUTH_TASK, ""), (EA_TASK, "")}
    for task, model, entry in holdout_items(cycle.holdouts):
        data = holdout_read(QUARTER, task, model, entry["path"])
        assert committed[(task, model)]["sha256"] == entry["sha256"] == hashlib.sha256(data).hexdigest()
        pool = sealed_pool_load(
            load_registry(settings.REGISTRY_ROOT),
            task,
            data_dir=settings.DATA_DIR,
            key=sealing_key(),
            sources_dir=settings.DATA_DIR,
        )
        assert committed[(task, model)]["pool_sha256"] == hashlib.sha256(pool_bytes(pool)).hexdigest()
        assert committed[(task, model)]["pool"] == "sealed"

    # the commitment is public: the cycle's page and API show it ...
    body = client.get(f"/api/v1/reevaluations/{QUARTER}").json()
    assert body["commitment"] == json.loads(json.dumps(commitment))
    assert body["revealed"] is False and body["reveal_url"] is None
    assert set(body["holdouts"][TRUTH_TASK]) == {
        "rows",
        "sha256",
        "pool",
        "pool_sha256",
        "pool_rows",
        "sealed_pool_rows",
        "reused_rows",
        "note",
    }
    assert commitment["seed_sha256"] in client.get(f"/reevaluations/{QUARTER}/").content.decode()
    # ... and nothing that would let anyone train on the holdout: no seed, no row, no id
    hidden = _secrets(cycle)
    examples_export_write(QUARTER)  # the per-example export, if a maintainer wrote one now
    shown = [_shown(client, url) for url in PUBLIC_READS]
    shown.append(_shown(client, f"/api/v1/reevaluations/{QUARTER}/reveal", 404))
    shown.append(_shown(client, f"/exports/{QUARTER}/examples.jsonl.gz"))
    client.force_login(maintainer)  # the staff's admin page neither
    shown.append(_shown(client, f"/admin/leaderboard/reevaluationcycle/{cycle.pk}/change/"))
    for text in shown:
        leaked = [s for s in hidden if s in text]
        assert not leaked, leaked[:3]
    reveal = client.get(f"/api/v1/reevaluations/{QUARTER}/reveal")
    assert reveal.status_code == 404 and "revealed once it has completed" in reveal.json()["error"]


def test_the_command_prints_the_commitment(board, maintainer):
    out = StringIO()
    call_command("start_reevaluation", QUARTER, stdout=out)
    cycle = ReevaluationCycle.objects.get(quarter=QUARTER)
    text = out.getvalue()
    assert f"seed sha256 {cycle.commitment['seed_sha256']}" in text and cycle.seed not in text
    assert f"{TRUTH_TASK}: 16 rows, sha256 " in text and "sealed pool of 200 rows" in text


# --------------------------------------------------------------------------- the reveal


def test_the_reveal_appears_only_once_the_cycle_has_completed(board, maintainer, client):
    cycle = reevaluation_start(quarter=QUARTER, by=maintainer, dispatch=False)
    finish_holdout_runs(cycle, {"first": 0.9, "second": 0.9})
    assert client.get(f"/api/v1/reevaluations/{QUARTER}/reveal").status_code == 404  # runs done, not advanced
    reevaluation.cycle_advance(cycle_id=cycle.pk)
    cycle.refresh_from_db()
    assert cycle.status == "completed" and cycle.revealed_at == cycle.finished_at

    body = client.get(f"/api/v1/reevaluations/{QUARTER}").json()
    assert body["revealed"] is True and body["reveal_url"] == f"/api/v1/reevaluations/{QUARTER}/reveal"
    reveal = client.get(body["reveal_url"]).json()
    assert reveal["seed"] == cycle.seed and reveal["commitment"] == json.loads(json.dumps(cycle.commitment))
    by_task = {h["task"]: h for h in reveal["holdouts"]}
    for task, _model, entry in holdout_items(cycle.holdouts):
        h = by_task[task]
        assert [r["id"] for r in h["rows"]] == entry["ids"] and h["size"] == 16
        assert hashlib.sha256(rows_to_bytes(h["rows"])).hexdigest() == entry["sha256"]
    page = client.get(f"/reevaluations/{QUARTER}/").content.decode()
    assert cycle.seed in page and by_task[TRUTH_TASK]["rows"][0]["id"] in page
    # the public diff names the holdouts by hash only
    assert "ids" not in json.dumps(cycle.diff["holdouts"])


# --------------------------------------------------------------------------- verify-holdout


@pytest.fixture
def revealed(board, maintainer, client, settings, tmp_path):
    """A completed cycle's reveal (from the API) in a file, and each holdout's sealed pool as the
    plain file a third party would have rebuilt (the small registry's pools are not built from
    the source archives)."""
    cycle = run_cycle(QUARTER, maintainer, {"first": 0.9, "second": 0.9})
    reveal = client.get(f"/api/v1/reevaluations/{QUARTER}/reveal").json()
    pools = []
    for task in (TRUTH_TASK, EA_TASK):
        data = read_sealed(
            sealed_pool_path(settings.DATA_DIR, task), key=sealing_key(), label=sealed_label(task)
        )
        (tmp_path / f"{task}.jsonl").write_bytes(data)
        pools += ["--pool", f"{task}={tmp_path / f'{task}.jsonl'}"]
    return cycle, reveal, pools


def verify(tmp_path: Path, reveal: dict, *args: str, capsys) -> tuple[int, dict]:
    path = tmp_path / "reveal.json"
    path.write_text(json.dumps(reveal))
    from django.conf import settings

    code = evaluator_main(
        [
            "verify-holdout",
            QUARTER,
            "--reveal",
            str(path),
            "--registry",
            str(settings.REGISTRY_ROOT),
            *args,
            "--json",
        ]
    )
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def _failed(result: dict) -> set[tuple[str, str]]:
    return {(c["check"], c["target"]) for c in result["checks"] if c["status"] == "fail"}


def test_verify_holdout_passes_on_the_genuine_reveal(revealed, tmp_path, capsys):
    _, reveal, pools = revealed
    code, result = verify(tmp_path, reveal, *pools, capsys=capsys)
    assert code == 0 and result["ok"], result
    passed = {(c["check"], c["target"]) for c in result["checks"] if c["status"] == "pass"}
    for task in (TRUTH_TASK, EA_TASK):
        assert {("holdout", task), ("pool", task), ("draw", task)} <= passed
    assert ("seed", "") in passed and result["counts"]["skip"] == 0
    # without the pools, this checkout cannot rebuild them (the small registry pins no sources):
    # the pool and draw checks are skipped, saying why, and the rest still pass
    code, result = verify(tmp_path, reveal, "--sources", str(tmp_path / "none"), capsys=capsys)
    assert code == 0 and result["counts"]["skip"] == 4 and result["counts"]["fail"] == 0


def test_the_terminal_summary_names_each_check_and_never_prints_the_reveal_raw():
    from evaluator.commands.verify_holdout import verify_holdout_summary

    checks = [
        {"check": "seed", "target": "", "status": "pass", "detail": "ok"},
        {"check": "draw", "target": "evil\x1b[2J-v1", "status": "fail", "detail": "other rows"},
    ]
    result = {"quarter": QUARTER, "source": "reveal.json", "ok": False, "checks": checks}
    text = verify_holdout_summary(result | {"counts": {"pass": 1, "fail": 1, "skip": 0}})
    assert "  pass  seed: ok" in text and "  FAIL  draw evil\\x1b[2J-v1: other rows" in text
    assert "\x1b" not in text and "1 check(s) FAIL (1 passed, 1 failed, 0 skipped)" in text


def test_verify_holdout_fails_naming_a_changed_seed(revealed, tmp_path, capsys):
    _, reveal, pools = revealed
    forged = copy.deepcopy(reveal)
    forged["seed"] = ("0" if reveal["seed"][0] != "0" else "1") + reveal["seed"][1:]
    code, result = verify(tmp_path, forged, *pools, capsys=capsys)
    assert code == 1 and not result["ok"]
    assert ("seed", "") in _failed(result)
    assert {("draw", TRUTH_TASK), ("draw", EA_TASK)} <= _failed(result)  # another seed draws other rows


def test_verify_holdout_fails_naming_a_changed_row(revealed, tmp_path, capsys):
    _, reveal, pools = revealed
    forged = copy.deepcopy(reveal)
    [h] = [h for h in forged["holdouts"] if h["task"] == TRUTH_TASK]
    h["rows"][0]["text"] += " (edited)"
    code, result = verify(tmp_path, forged, *pools, capsys=capsys)
    assert code == 1
    assert ("holdout", TRUTH_TASK) in _failed(result) and ("seed", "") not in _failed(result)
    assert ("holdout", EA_TASK) not in _failed(result)


def test_verify_holdout_fails_naming_rows_not_drawn_from_the_pool(revealed, tmp_path, capsys):
    """A board that publishes a commitment to rows it chose itself, not to the seeded draw: every
    hash agrees with the commitment, but drawing again with the seed gives other rows."""
    _, reveal, pools = revealed
    forged = copy.deepcopy(reveal)
    [h] = [h for h in forged["holdouts"] if h["task"] == TRUTH_TASK]
    pool_file = tmp_path / f"{TRUTH_TASK}.jsonl"  # written by the fixture
    drawn = {r["id"] for r in h["rows"]}
    others = [json.loads(line) for line in pool_file.read_text().splitlines()]
    chosen = [r for r in others if r["id"] not in drawn][: len(h["rows"])]
    h["rows"] = sorted(chosen, key=lambda r: r["id"])
    h["sha256"] = hashlib.sha256(rows_to_bytes(h["rows"])).hexdigest()
    [entry] = [e for e in forged["commitment"]["holdouts"] if e["task"] == TRUTH_TASK]
    entry["sha256"] = h["sha256"]
    code, result = verify(tmp_path, forged, *pools, capsys=capsys)
    assert code == 1
    assert _failed(result) == {("draw", TRUTH_TASK)}, result["checks"]
    [draw] = [c for c in result["checks"] if c["check"] == "draw" and c["target"] == TRUTH_TASK]
    assert "other rows" in draw["detail"]


def test_verify_holdout_checks_against_a_commitment_saved_while_the_cycle_ran(
    board, maintainer, client, settings, tmp_path, capsys
):
    cycle = reevaluation_start(quarter=QUARTER, by=maintainer, dispatch=False)
    saved = tmp_path / "commitment.json"
    saved.write_text(client.get(f"/api/v1/reevaluations/{QUARTER}").content.decode())  # the API's answer
    finish_holdout_runs(cycle, {"first": 0.9, "second": 0.9})
    reevaluation.cycle_advance(cycle_id=cycle.pk)
    reveal = client.get(f"/api/v1/reevaluations/{QUARTER}/reveal").json()
    code, result = verify(
        tmp_path, reveal, "--commitment", str(saved), "--sources", str(tmp_path), capsys=capsys
    )
    assert code == 0 and result["ok"]
    # a board that rewrote its commitment after the runs is caught by the saved copy
    forged = copy.deepcopy(reveal)
    forged["commitment"]["seed_sha256"] = "0" * 64
    code, result = verify(
        tmp_path, forged, "--commitment", str(saved), "--sources", str(tmp_path), capsys=capsys
    )
    assert code == 1 and ("commitment", "") in _failed(result)


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ("[]", "not a JSON object"),
        ('{"quarter": "2026Q4", "seed": "zz"}', "seed is not 32 bytes"),
        ("{not json", "not valid JSON"),
    ],
)
def test_verify_holdout_names_bad_input_without_a_traceback(tmp_path, capsys, document, says):
    path = tmp_path / "reveal.json"
    path.write_text(document)
    assert evaluator_main(["verify-holdout", QUARTER, "--reveal", str(path)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and err.startswith("error: ")
    assert evaluator_main(["verify-holdout", "2026-Q4", "--reveal", str(path)]) == 2
    assert "must look like 2026Q4" in capsys.readouterr().err
    assert evaluator_main(["verify-holdout", QUARTER, "--reveal", str(tmp_path / "missing.json")]) == 2
    assert "No such file" in capsys.readouterr().err


# --------------------------------------------------------------------------- sealed at rest


def test_the_sealed_files_do_not_open_without_the_key(board, maintainer, settings):
    cycle = reevaluation_start(quarter=QUARTER, by=maintainer, dispatch=False)
    entry = cycle.holdouts[TRUTH_TASK]
    pool_path = sealed_pool_path(settings.DATA_DIR, TRUTH_TASK)
    assert oct(settings.HOLDOUT_SEALING_KEY_FILE.stat().st_mode & 0o777) == "0o600"
    for path, label in (
        (pool_path, sealed_label(TRUTH_TASK)),
        (settings.DATA_DIR / entry["path"], holdout_label(QUARTER, TRUTH_TASK)),
    ):
        blob = path.read_bytes()
        assert b"The city of" not in blob and b'"label"' not in blob  # no row in the clear
        read_sealed(path, key=sealing_key(), label=label)  # opens with the key ...
        with pytest.raises(SealError, match="does not open"):
            read_sealed(path, key=b"k" * 32, label=label)  # ... and with no other
        with pytest.raises(SealError, match="does not open"):  # nor under another file's name
            read_sealed(path, key=sealing_key(), label=holdout_label("2027Q1", TRUTH_TASK))


@pytest.mark.django_db(transaction=True)
def test_verify_holdout_reads_the_reveal_from_the_server(
    small_registry, maintainer, live_server, tmp_path, capsys
):
    scored("first"), scored("second")
    cycle = reevaluation_start(quarter=QUARTER, by=maintainer, dispatch=False)
    argv = ["verify-holdout", QUARTER, "--server", live_server.url, "--registry", str(small_registry)]
    argv += ["--sources", str(tmp_path / "none"), "--json"]
    # running: the server reveals nothing yet, and the command says so in one line
    assert evaluator_main(argv) == 2
    err = capsys.readouterr().err
    assert "HTTP 404" in err and "revealed once it has completed" in err and "Traceback" not in err
    finish_holdout_runs(cycle, {"first": 0.9, "second": 0.9})
    reevaluation.cycle_advance(cycle_id=cycle.pk)
    assert evaluator_main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["source"].startswith(live_server.url) and result["counts"]["fail"] == 0
    assert result["counts"]["pass"] == 3  # the seed and each holdout's bytes (the pools: not here)
