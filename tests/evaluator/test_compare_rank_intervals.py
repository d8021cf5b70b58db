"""Rank intervals and tie groups: a paired, stratified bootstrap that recomputes each entry's
ProbeScore with the project's own scoring on the drawn rows."""

import numpy as np
import pytest

from evaluator import metrics
from evaluator.measure import ScoredExamples, aggregate_measurements, task_metrics
from evaluator.rank_intervals import (
    BoardEntry,
    TaskRows,
    _auroc_ea_rows,
    _auroc_rows,
    _ece_rows,
    board_rank_intervals,
)
from evaluator.registry import load_registry
from evaluator.scoring import probe_score

REG = load_registry()
SPEC = REG.spec("v0.0.1")
N_TEST = 240


def task_rows(task, rng_seed, signal, *, shared_noise=None, ids_order=None, reference=None, distshift=None):
    """A probe's rows on ``task``: score = signal·label + noise (+ a noise shared with other probes)."""
    rng = np.random.default_rng(rng_seed)
    y = (np.arange(N_TEST) % 2).astype(int)
    s = signal * y + rng.normal(size=N_TEST)
    if shared_noise is not None:
        s = s + shared_noise
    ids = [f"{task}-{i:04d}" for i in range(N_TEST)]
    order = np.arange(N_TEST) if ids_order is None else ids_order
    ds = {}
    if distshift is not None:
        ds_y = (np.arange(100) % 2).astype(int)
        ds = {
            "distshift_ids": [f"{task}-ds-{i:03d}" for i in range(100)],
            "distshift_labels": ds_y,
            "distshift_scores": distshift * ds_y + rng.normal(size=100),
        }
    return TaskRows(
        test_ids=[ids[k] for k in order],
        test_labels=y[order],
        test_scores=s[order],
        test_probs=metrics.sigmoid(s[order]),
        ea_reference=reference,
        **ds,
    )


def entry(key, tasks, *, license_id="MIT", latency_ms=2.0, rho_ce=0.6):
    """A board entry whose stored measurements are what the pipeline computes from its rows."""
    per_task = []
    for task_id, rows in sorted(tasks.items()):
        test = ScoredExamples(
            list(rows.test_ids),
            np.asarray(rows.test_labels),
            np.asarray(rows.test_scores),
            np.asarray(rows.test_probs),
        )
        ds = None
        if rows.distshift_ids is not None:
            ds = ScoredExamples(
                list(rows.distshift_ids),
                np.asarray(rows.distshift_labels),
                np.asarray(rows.distshift_scores),
                metrics.sigmoid(rows.distshift_scores),
            )
        per_task.append(
            task_metrics(
                task_id=task_id,
                test=test,
                distshift=ds,
                ea_reference=rows.ea_reference,
                imputation=SPEC.imputation,
            )
        )
    _, _, measurements = aggregate_measurements(
        per_task,
        lifts=[],
        latency_ms=latency_ms,
        license_id=license_id,
        transfer_pearsons=[rho_ce],
        has_recipe=True,
        ea_applicable=True,
        has_reference=any(r.ea_reference is not None for r in tasks.values()),
        imputation=SPEC.imputation,
    )
    return BoardEntry(key=key, tasks=tasks, measurements=measurements)


def rank(entries, **kw):
    return {r.key: r for r in board_rank_intervals(entries, spec=SPEC, licenses=REG.licenses, **kw)}


def reference_for(task, seed):
    rng = np.random.default_rng(seed)
    return {f"{task}-{i:04d}": float(v) for i, v in enumerate(np.round(rng.normal(size=N_TEST), 1))}


def test_the_point_estimate_is_the_projects_probescore_of_the_stored_rows():
    ref = reference_for("t1", 50)
    tasks = {
        "t1": task_rows("t1", 1, 1.2, reference=ref, distshift=0.8),
        "t2": task_rows("t2", 2, 0.9, reference=reference_for("t2", 51)),  # no distshift: imputed
    }
    e = entry("a", tasks)
    other = entry("b", {"t1": task_rows("t1", 3, 0.5, reference=ref)})
    got = rank([e, other], n_resamples=50)
    expected = probe_score(e.measurements, spec=SPEC, licenses=REG.licenses).total
    assert got["a"].score == pytest.approx(expected, abs=1e-12)
    assert e.measurements.auroc_ds_partial_note  # the partially imputed distshift case is covered
    lo, hi = got["a"].score_ci
    assert lo < got["a"].score < hi


def test_vectorised_metrics_equal_the_metric_functions_on_every_draw():
    rng = np.random.default_rng(4)
    m, n = 30, 45
    s = np.round(rng.normal(size=(20, m + n)), 1)  # ties inside and across classes
    r = np.round(rng.normal(size=(20, m + n)), 0)  # heavy ties in the reference: uneven bins
    p = rng.uniform(size=(20, m + n))
    p[0, :3] = 1.0
    y = np.r_[np.ones(m, int), np.zeros(n, int)]
    au, ea, ec = _auroc_rows(s, m), _auroc_ea_rows(s, r, m), _ece_rows(p, m)
    for b in range(20):
        assert au[b] == pytest.approx(metrics.auroc(s[b], y), abs=1e-12)
        assert ea[b] == pytest.approx(metrics.auroc_ea(s[b], y, r[b]), abs=1e-12)
        assert ec[b] == pytest.approx(metrics.ece(p[b], y), abs=1e-12)


def test_two_probes_that_differ_by_noise_only_share_a_tie_group_and_a_clear_leader_does_not():
    rng = np.random.default_rng(9)
    shared = {t: rng.normal(size=N_TEST) for t in ("t1", "t2")}
    strong = entry("strong", {t: task_rows(t, 10 + k, 3.0) for k, t in enumerate(("t1", "t2"))})
    # two probes reading the same weak signal; they differ only by their own small noise
    twin_a = entry(
        "twin-a",
        {t: task_rows(t, 20 + k, 0.8, shared_noise=3 * shared[t]) for k, t in enumerate(("t1", "t2"))},
    )
    twin_b = entry(
        "twin-b",
        {t: task_rows(t, 30 + k, 0.8, shared_noise=3 * shared[t]) for k, t in enumerate(("t1", "t2"))},
    )
    got = rank([twin_b, strong, twin_a])
    assert list(got) == ["strong", "twin-a", "twin-b"] or list(got) == ["strong", "twin-b", "twin-a"]
    assert got["strong"].rank == 1 and got["strong"].rank_ci == (1, 1)
    assert not got["strong"].tied_for_first  # alone at the top
    assert got["twin-a"].tie_group == got["twin-b"].tie_group
    assert got["strong"].tie_group != got["twin-a"].tie_group
    assert got["twin-a"].rank_ci[0] == 2 and got["twin-b"].rank_ci[1] == 3
    assert got["twin-a"].rank_ci[1] == 3  # each twin may land on either place


def test_noise_only_leaders_are_both_tied_for_first():
    rng = np.random.default_rng(11)
    shared = rng.normal(size=N_TEST)
    a = entry("a", {"t1": task_rows("t1", 1, 2.5, shared_noise=shared)})
    b = entry("b", {"t1": task_rows("t1", 2, 2.5, shared_noise=shared)})
    weak = entry("weak", {"t1": task_rows("t1", 3, 0.2)})
    got = rank([a, b, weak])
    assert got["a"].tied_for_first and got["b"].tied_for_first
    assert not got["weak"].tied_for_first
    assert got["a"].tie_group == got["b"].tie_group == 1
    assert got["weak"].tie_group == 2


def test_rows_are_paired_by_id_whatever_order_an_entry_stores_them_in():
    # the same probe scored on another base model that wrote its rows in another order
    perm = np.random.default_rng(5).permutation(N_TEST)
    a = entry("a", {"t1": task_rows("t1", 7, 1.0)})
    a_shuffled = entry("a2", {"t1": task_rows("t1", 7, 1.0, ids_order=perm)})
    weak = entry("weak", {"t1": task_rows("t1", 8, 0.2)})
    got = rank([a, a_shuffled, weak], n_resamples=200)
    assert got["a"].score_ci == got["a2"].score_ci  # the same drawn rows for both
    assert got["a"].tie_group == got["a2"].tie_group
    assert got["a"].rank_ci == got["a2"].rank_ci == (1, 1)  # "1224": equal keys share rank 1
    assert got["a"].tied_for_first and got["a2"].tied_for_first


def test_the_bootstrap_is_seeded_and_the_draws_do_not_depend_on_the_other_entries():
    a = entry("a", {"t1": task_rows("t1", 1, 1.0)})
    b = entry("b", {"t1": task_rows("t1", 2, 0.9)})
    c = entry("c", {"t1": task_rows("t1", 3, 0.3)})
    first = rank([a, b], n_resamples=300)
    assert rank([a, b], n_resamples=300) == first
    assert rank([a, b, c], n_resamples=300)["a"].score_ci == first["a"].score_ci
    assert rank([a, b], n_resamples=300, seed=7)["a"].score_ci != first["a"].score_ci


def test_a_license_alone_never_splits_a_tie():
    # identical measurements, one closed: norm 2 keys are equal, so they share rank 1 and a group
    rows = {"t1": task_rows("t1", 1, 1.0)}
    open_ = entry("open", rows, license_id="MIT")
    closed = entry("closed", rows, license_id="closed")
    got = rank([closed, open_], n_resamples=100)
    assert list(got) == ["open", "closed"]  # license breaks the exact tie in the order only
    assert got["open"].rank == got["closed"].rank == 1
    assert got["open"].tie_group == got["closed"].tie_group


def test_an_entry_without_stored_rows_is_held_fixed_but_still_takes_its_place():
    a = entry("a", {"t1": task_rows("t1", 1, 1.0)})
    b = entry("b", {"t1": task_rows("t1", 2, 0.95)})
    fixed = BoardEntry(key="fixed", tasks={}, measurements=a.measurements)  # a's numbers, no rows
    got = rank([a, b, fixed], n_resamples=200)
    total = probe_score(a.measurements, spec=SPEC, licenses=REG.licenses).total
    assert got["fixed"].score == got["fixed"].score_ci[0] == got["fixed"].score_ci[1] == total
    assert got["fixed"].rank == got["a"].rank == 1
    assert got["a"].rank_ci[1] >= 2 and got["fixed"].rank_ci[1] >= 2  # a and b swap places
