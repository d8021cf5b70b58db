"""The SAE-feature probe kind and the two top-k recipes, on a tiny synthetic SAE registered in a
temporary registry root (evaluator/core/sae_probe.py, probe_function.py, probes.py, recipes.py):
the artifact and each refusal, the score against the SAE's own encoding, numpy against torch, the
recipes' choice of columns, their determinism, reproduction and where transfer and steering do not
apply."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from safetensors.numpy import save

from evaluator.core.probes import load_probe, probe_from_bytes, probe_from_tensors, read_artifact, save_probe
from evaluator.core.recipes import (
    C_GRID,
    Recipe,
    fit_recipe,
    fit_topk_logistic,
    hyperparameters_validate,
    recipe_fit,
    transfer_refusal,
)
from evaluator.core.sae.model import TopKSae
from evaluator.core.sae_probe import SAE_HASH_KEY, SAE_KIND, Site, _encoder_cached
from evaluator.data.registry.load import load_registry
from evaluator.errors import ArtifactError, EvaluatorError, UnknownNameError
from evaluator.metrics.metrics import auroc
from tests.evaluator.conftest import GEMMA, PROJECT_ROOT, SMOLLM, TASK, build_registry
from tests.evaluator.sae_registry import D_MODEL, LAYER, SAE_ID, WIDTH, register_sae

SIGNAL = 37  # the latent that carries the label in the synthetic data


@pytest.fixture(scope="module")
def sae_world(tmp_path_factory):
    """(registry, the SAE as saved, its weights' SHA-256)."""
    root = build_registry(tmp_path_factory.mktemp("sae-registry"))
    shutil.copytree(PROJECT_ROOT / "registry" / "protocols", root / "registry" / "protocols")
    sae, sha = register_sae(root)
    return load_registry(root), sae, sha


@pytest.fixture(scope="module")
def reg(sae_world):
    return sae_world[0]


@pytest.fixture(scope="module")
def sha(sae_world):
    return sae_world[2]


def synthetic(sae: TopKSae, n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Residuals where latent SIGNAL's decoder row is added to the positives only."""
    rng = np.random.default_rng(seed)
    y = np.tile([0, 1], n // 2)
    X = rng.normal(size=(n, D_MODEL)) + 6.0 * y[:, None] * sae.W_dec[SIGNAL].numpy()
    return X, y


def metadata(**overrides) -> dict:
    meta = {
        "name": "SAE probe",
        "category": "hallucination",
        "base_model": SMOLLM,
        "layer": LAYER,
        "position": "last_token",
        "input": "single",
        "output": "logit",
        "license": "Apache-2.0",
    }
    return meta | overrides


def sae_tensors(latents=(SIGNAL, 3, 17), *, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    k = len(latents)
    return {
        "latents": np.asarray(latents, dtype=np.int64),
        "weight": rng.normal(size=k),
        "bias": np.array(0.3),
        "mean": rng.normal(size=k),
        "scale": rng.uniform(0.5, 2.0, size=k),
    }


def probe(reg, sha, tensors=None, **meta):
    return probe_from_tensors(
        sae_tensors() if tensors is None else tensors,
        metadata(**meta),
        registry=reg,
        artifact_metadata={SAE_HASH_KEY: sha},
    )


def as_float64(sae: TopKSae) -> TopKSae:
    return TopKSae(sae.W_enc.double(), sae.b_enc.double(), sae.W_dec.double(), sae.b_dec.double(), sae.k)


# --------------------------------------------------------------------------- the score


def test_the_score_is_the_sae_encoding_then_the_linear_readout(sae_world):
    reg, sae, sha = sae_world
    t = sae_tensors()
    p = probe(reg, sha, t)
    assert (p.kind, p.d_model, p.sae.id, p.direction()) == (SAE_KIND, D_MODEL, SAE_ID, None)
    assert (p.sae_latents, p.sae_k, p.sae.sae.width, p.sae.context) == ([SIGNAL, 3, 17], 3, WIDTH, 64)
    np.testing.assert_allclose(p.sae_latent_weights, t["weight"] / t["scale"])
    X, _ = synthetic(sae)
    z = as_float64(sae).encode(torch.tensor(X)).numpy()
    u = z[:, t["latents"]]
    assert (u != 0).any(axis=0).all()  # every read latent is active on some row
    expected = ((u - t["mean"]) / t["scale"]) @ t["weight"] + 0.3
    np.testing.assert_allclose(p.score(X), expected, rtol=1e-9, atol=1e-9)
    # and the float32 encoding the SAE was trained in agrees to float32 rounding
    z32 = sae.encode(torch.tensor(X, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(
        p.score(X), ((z32[:, t["latents"]] - t["mean"]) / t["scale"]) @ t["weight"] + 0.3, atol=1e-3
    )


def test_numpy_and_torch_agree_and_torch_is_differentiable_through_the_kept_latents(sae_world):
    reg, sae, sha = sae_world
    p = probe(reg, sha)
    X, _ = synthetic(sae, n=64)
    f64 = p.torch_forward("cpu", torch.float64)(torch.tensor(X))
    np.testing.assert_allclose(f64.numpy(), p.score(X), rtol=1e-9, atol=1e-9)
    x = torch.tensor(X, dtype=torch.float32, requires_grad=True)
    s = p.torch_forward("cpu")(x)
    np.testing.assert_allclose(s.detach().numpy(), p.score(X), atol=1e-3)
    s.sum().backward()
    assert x.grad is not None and float(x.grad.abs().sum()) > 0
    active = (as_float64(sae).encode(torch.tensor(X))[:, [SIGNAL, 3, 17]] != 0).any(dim=1).numpy()
    assert (x.grad.abs().sum(dim=1).numpy() > 0).tolist() == active.tolist()  # no latent kept: no gradient


def test_a_large_split_is_scored_in_chunks_like_a_small_one(sae_world):
    reg, sae, sha = sae_world
    p = probe(reg, sha)
    X, _ = synthetic(sae, n=4200, seed=3)
    whole = p.score(X)
    np.testing.assert_allclose(whole[:100], p.score(X[:100]), rtol=1e-12)
    np.testing.assert_allclose(whole[-100:], p.score(X[-100:]), rtol=1e-12)


def test_the_sae_weights_are_read_once_per_process(sae_world):
    reg, _, sha = sae_world
    probe(reg, sha)
    before = _encoder_cached.cache_info()
    for _ in range(3):
        probe(reg, sha)
    after = _encoder_cached.cache_info()
    assert after.misses == before.misses and after.hits == before.hits + 3


# --------------------------------------------------------------------------- the artifact


def test_the_artifact_round_trips_with_its_sae_hash_in_the_header(sae_world, tmp_path):
    reg, sae, sha = sae_world
    t = sae_tensors()
    save_probe(tmp_path, t, metadata(), artifact_metadata={SAE_HASH_KEY: sha})
    tensors, header = read_artifact((tmp_path / "probe.safetensors").read_bytes())
    assert header == {SAE_HASH_KEY: sha}
    assert tensors["latents"].dtype == np.int64 and tensors["latents"].tolist() == [SIGNAL, 3, 17]
    loaded = load_probe(tmp_path, registry=reg)
    X, _ = synthetic(sae, n=20)
    np.testing.assert_allclose(loaded.score(X), probe(reg, sha, t).score(X), atol=1e-5)  # float32 storage
    # I32 indices are accepted too
    raw = save(
        {**{k: v.astype(np.float32) for k, v in t.items()}, "latents": t["latents"].astype(np.int32)},
        metadata={SAE_HASH_KEY: sha},
    )
    tensors, _ = read_artifact(raw)
    assert tensors["latents"].dtype == np.int64 and tensors["latents"].tolist() == [SIGNAL, 3, 17]


def raw_artifact(sha: str | None, **overrides) -> bytes:
    t = {k: v.astype(np.float32) for k, v in sae_tensors().items()} | {"latents": sae_tensors()["latents"]}
    t.update(overrides)
    t = {k: v for k, v in t.items() if v is not None}
    return save(t, metadata=None if sha is None else {SAE_HASH_KEY: sha})


FILE_REFUSALS = {
    "float latents": (dict(latents=np.array([1.0, 2.0], dtype=np.float32)), "accepted: I64 or I32"),
    "integer weight": (dict(weight=np.array([1, 2, 3], dtype=np.int64)), "only tensor 'latents'"),
}


@pytest.mark.parametrize("case", list(FILE_REFUSALS))
def test_integer_dtypes_are_read_for_the_latents_only(sha, case):
    overrides, message = FILE_REFUSALS[case]
    with pytest.raises(ArtifactError, match=message):
        read_artifact(raw_artifact(sha, **overrides))


def refusals(sha: str) -> dict[str, tuple[dict, dict, dict | None, str]]:
    """case → (tensor overrides, metadata overrides, header, message)."""
    ok = {SAE_HASH_KEY: sha}
    L = np.array
    return {
        "no __metadata__": ({}, {}, None, r"names its SAE in the safetensors header.*has no __metadata__"),
        "no hash key": ({}, {}, {"format": "np"}, "its __metadata__ has no sae_weights_sha256"),
        "hash not hex": ({}, {}, {SAE_HASH_KEY: "ABC"}, "sae_weights_sha256 is 'ABC'"),
        "unknown SAE": (
            {},
            {},
            {SAE_HASH_KEY: "0" * 64},
            rf"no registered SAE has weights SHA-256 000000000000….*registered \(registry/saes.yaml\):"
            rf" {SAE_ID} \({sha[:12]}…\)",
        ),
        "another base model": (
            {},
            {"base_model": GEMMA, "layer": 15},
            ok,
            "but the probe's base_model is gemma",
        ),
        "another layer": ({}, {"layer": 14}, ok, "the probe's layer is 14; accepted: layer 15"),
        "mean position": (
            {},
            {"position": "mean"},
            ok,
            "reads last_token only; an SAE is trained on single-token",
        ),
        "max position": ({}, {"position": "max"}, ok, "a mean or max over a prompt's residuals"),
        "contrast pair": ({}, {"input": "contrast_pair"}, ok, "reads a single input only"),
        "no latents": (
            {"latents": L([], dtype=np.int64), "weight": L([]), "mean": None, "scale": None},
            {},
            ok,
            "accepted: \\[k\\] with 1 ≤ k ≤ 64",
        ),
        "65 latents": (
            {"latents": np.arange(65), "weight": np.ones(65), "mean": None, "scale": None},
            {},
            ok,
            "1 ≤ k ≤ 64",
        ),
        "repeated latent": ({"latents": L([3, 3, 5])}, {}, ok, "repeats latent\\(s\\) 3; accepted: distinct"),
        "index past the width": (
            {"latents": L([3, WIDTH, 5])},
            {},
            ok,
            f"holds index {WIDTH}; accepted: 0..{WIDTH - 1} \\(SAE {SAE_ID} has {WIDTH}",
        ),
        "negative index": ({"latents": L([3, -1, 5])}, {}, ok, "negative indices"),
        "weight of another length": (
            {"weight": np.ones(4)},
            {},
            ok,
            "'weight' has shape \\[4\\]; expected \\[3\\]",
        ),
        "scale of zeros": ({"scale": np.zeros(3)}, {}, ok, "'scale' has 3 zero entries"),
        "non-finite weight": ({"weight": L([1.0, np.nan, 0.0])}, {}, ok, "non-finite"),
        "mixed with an MLP": ({"w1": np.ones((2, 3))}, {}, ok, "unknown tensor name\\(s\\) 'w1'"),
    }


@pytest.mark.parametrize("case", list(refusals("0" * 64)))
def test_each_refusal_says_what_was_wrong_and_what_is_accepted(reg, sha, case):
    tensors, meta, header, message = refusals(sha)[case]
    t = {k: v for k, v in (sae_tensors() | tensors).items() if v is not None}
    with pytest.raises(ArtifactError, match=message):
        probe_from_tensors(t, metadata(**meta), registry=reg, artifact_metadata=header)


def test_the_upload_check_resolves_the_sae_and_names_the_field_at_fault(reg, sha):
    site = Site(SMOLLM, LAYER, "last_token", "single")
    checked = probe_from_bytes(raw_artifact(sha), d_model=D_MODEL, saes=reg.saes, site=site)
    assert (checked.kind, checked.sae, checked.artifact_metadata) == (SAE_KIND, SAE_ID, {SAE_HASH_KEY: sha})
    for bad, field in (
        (replace(site, base_model=GEMMA), "base_model"),
        (replace(site, layer=3), "layer"),
        (replace(site, position="mean"), "position"),
        (replace(site, input="contrast_pair"), "input"),
    ):
        with pytest.raises(ArtifactError) as refused:
            probe_from_bytes(raw_artifact(sha), d_model=D_MODEL, saes=reg.saes, site=bad)
        assert refused.value.field == field
    with pytest.raises(ArtifactError) as refused:
        probe_from_bytes(raw_artifact(None), d_model=D_MODEL, saes=reg.saes, site=site)
    assert refused.value.field == "artifact"


# --------------------------------------------------------------------------- the recipes


def sae_recipe(k: int = 5) -> Recipe:
    return Recipe(
        method="sae_topk_meandiff", task=TASK, layer=LAYER, hyperparameters={"sae": SAE_ID, "k": k}, seed=0
    )


def test_the_sae_recipe_picks_the_latent_that_carries_the_label(sae_world):
    reg, sae, sha = sae_world
    X, y = synthetic(sae)
    fit = recipe_fit(sae_recipe(5), X, y, registry=reg)
    assert fit.tensors["latents"][0] == SIGNAL and fit.tensors["latents"].dtype == np.int64
    assert fit.artifact_metadata == {SAE_HASH_KEY: sha}
    assert fit.info["C"] in C_GRID and fit.info["cv_auroc"] == max(fit.info["cv_auroc_by_C"].values())
    assert fit.info["sae"] == SAE_ID and fit.info["indices"] == fit.tensors["latents"].tolist()
    p = probe_from_tensors(fit.tensors, metadata(), registry=reg, artifact_metadata=fit.artifact_metadata)
    X_test, y_test = synthetic(sae, seed=9)
    assert auroc(p.score(X_test), y_test) > 0.95


def test_the_recipes_are_deterministic(sae_world):
    reg, sae, _ = sae_world
    X, y = synthetic(sae, n=120)
    for recipe in (
        sae_recipe(16),
        Recipe(method="neuron_topk_meandiff", task=TASK, layer=LAYER, hyperparameters={"k": 8}, seed=0),
    ):
        first = fit_recipe(recipe, X, y, registry=reg)
        second = fit_recipe(recipe, X.copy(), y.copy(), registry=reg)
        assert first.keys() == second.keys()
        for name in first:
            assert first[name].dtype == second[name].dtype
            np.testing.assert_array_equal(first[name], second[name])


def test_the_neuron_recipe_is_a_linear_probe_that_scores_like_its_definition(reg):
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(2)
    y = np.tile([0, 1], 60)
    X = rng.normal(size=(120, D_MODEL))
    X[:, 7] += 1.5 * y
    X[:, 300] -= 1.0 * y
    recipe = Recipe(method="neuron_topk_meandiff", task=TASK, layer=LAYER, hyperparameters={"k": 3}, seed=0)
    fit = recipe_fit(recipe, X, y)
    idx = fit.info["indices"]
    assert idx[:2] == [7, 300]
    t = fit.tensors
    outside = np.setdiff1d(np.arange(D_MODEL), idx)
    assert (
        (t["weight"][outside] == 0).all()
        and (t["mean"][outside] == 0).all()
        and (t["scale"][outside] == 1).all()
    )
    p = probe_from_tensors(t, metadata(recipe=recipe.to_dict()), registry=reg)
    assert p.kind == "linear"
    Xk = X[:, idx]
    mean, std = Xk.mean(axis=0), Xk.std(axis=0)
    clf = LogisticRegression(C=fit.info["C"], max_iter=2000).fit((Xk - mean) / std, y)
    np.testing.assert_allclose(p.score(X), clf.decision_function((Xk - mean) / std), atol=1e-3)
    np.testing.assert_allclose(fit_topk_logistic(X, y, 3, seed=0).score(X), p.score(X), atol=1e-3)


def test_k_equal_to_d_model_is_the_dense_logistic_probe_with_c_by_cross_validation():
    rng = np.random.default_rng(4)
    y = np.tile([0, 1], 40)
    X = rng.normal(size=(80, 12)) + 0.7 * y[:, None] * rng.normal(size=12)
    idx, tensors, info = fit_topk_logistic(X, y, 12, seed=0)
    assert sorted(idx.tolist()) == list(range(12)) and tensors["weight"].shape == (12,)
    assert info["cv_folds"] == 5 and len(info["cv_auroc_by_C"]) == 13
    full = fit_recipe(
        Recipe(method="neuron_topk_meandiff", task=TASK, layer=1, hyperparameters={"k": 12}, seed=0), X, y
    )
    assert (full["weight"] != 0).all()
    with pytest.raises(EvaluatorError, match="k = 13 is not in 1..12"):
        fit_topk_logistic(X, y, 13, seed=0)


def test_equal_mean_differences_go_to_the_lower_index():
    X = np.zeros((20, 6))
    y = np.tile([0, 1], 10)
    X[:, [4, 1, 2]] = y[:, None] * np.array([2.0, 2.0, 1.0])
    X += np.random.default_rng(0).normal(scale=0.1, size=(20, 6)) * (np.arange(6) == 5)
    idx, _, _ = fit_topk_logistic(X, y, 3, seed=0)
    assert idx.tolist() == [1, 4, 2]


def test_the_recipes_hyperparameters_are_validated_once_for_submission_and_worker(reg):
    hyperparameters_validate("sae_topk_meandiff", {"sae": SAE_ID, "k": 64})
    with pytest.raises(ArtifactError, match="needs hyperparameter\\(s\\) sae"):
        hyperparameters_validate("sae_topk_meandiff", {"k": 16})
    with pytest.raises(ArtifactError, match="k = 3 is not accepted.*one of 1, 2, 5, 16, 64"):
        hyperparameters_validate("sae_topk_meandiff", {"sae": SAE_ID, "k": 3})
    with pytest.raises(ArtifactError, match="k = 0 is not accepted.*an integer in 1..8192"):
        hyperparameters_validate("neuron_topk_meandiff", {"k": 0})
    with pytest.raises(ArtifactError, match="unknown hyperparameter.*C"):
        hyperparameters_validate("neuron_topk_meandiff", {"C": 1.0})
    base = {"method": "sae_topk_meandiff", "task": TASK, "layer": LAYER, "hyperparameters": {"sae": SAE_ID}}
    assert Recipe.from_dict(base, registry=reg).params == {"sae": SAE_ID, "k": 16}
    with pytest.raises(UnknownNameError, match="unknown SAE 'nope'"):
        Recipe.from_dict(base | {"hyperparameters": {"sae": "nope"}}, registry=reg)
    with pytest.raises(ArtifactError, match="layer 14 is not the layer of SAE test-sae; accepted: 15"):
        Recipe.from_dict(base | {"layer": 14}, registry=reg)
    with pytest.raises(ArtifactError, match="reads last_token of a single input"):
        Recipe.from_dict(base | {"position": "mean"})
    # the base model is known with the probe: the SAE must be its, k at most its d_model
    with pytest.raises(ArtifactError, match="SAE test-sae encodes smollm2-135m-instruct, not gemma-3-270m"):
        probe_from_tensors({"weight": np.ones(640)}, metadata(base_model=GEMMA, recipe=base), registry=reg)
    neuron = {"method": "neuron_topk_meandiff", "task": TASK, "layer": LAYER, "hyperparameters": {"k": 577}}
    with pytest.raises(ArtifactError, match="k = 577 exceeds the d_model of smollm2-135m-instruct"):
        probe_from_tensors({"weight": np.ones(D_MODEL)}, metadata(recipe=neuron), registry=reg)


# --------------------------------------------------------------------------- train, reproduce, transfer


def fake_world(monkeypatch, sae, registry_module_split_activations):
    """A loaded model that is never loaded: the train and test splits are synthetic residuals."""
    X_train, y_train = synthetic(sae, n=160, seed=0)
    X_test, y_test = synthetic(sae, n=80, seed=5)

    def split_activations(lm, registry, task_id, split, *, layers, **kwargs):
        X, y = (X_train, y_train) if split == "train" else (X_test, y_test)
        return {
            layers[0]: SimpleNamespace(
                X=X,
                labels=y,
                ids=[f"{split}{i}" for i in range(len(y))],
                cache_key=f"key-{split}",
                cache_hit=True,
                split_sha256="0" * 64,
            )
        }

    for module in registry_module_split_activations:
        monkeypatch.setattr(module, "split_activations", split_activations)
    return SimpleNamespace(
        id=SMOLLM, n_layers=30, d_model=D_MODEL, protocol_id="p2", describe=lambda: {"id": SMOLLM}
    )


def test_train_recipe_carries_the_sae_hash_and_the_reproduction_axis_reproduces_it(
    sae_world, monkeypatch, tmp_path
):
    from evaluator.axes import reproduction
    from evaluator.core import recipes

    reg, sae, sha = sae_world
    lm = fake_world(monkeypatch, sae, [recipes, reproduction])
    trained = recipes.train_recipe(sae_recipe(5), lm, registry=reg, cache=None)
    assert trained.artifact_metadata == {SAE_HASH_KEY: sha} and trained.tensors["latents"][0] == SIGNAL
    meta = trained.metadata(name="SAE probe", category="hallucination")
    assert "chosen by 5-fold stratified cross-validation" in meta["description"]
    save_probe(tmp_path, trained.tensors, meta, artifact_metadata=trained.artifact_metadata)
    p = load_probe(tmp_path, registry=reg)
    result = reproduction.reproduction_check(p, registry=reg, cache_dir=tmp_path / "cache", lm=lm)
    assert result.reproduced and result.cosine is None and result.auroc_submitted > 0.95


def test_the_train_command_writes_an_sae_probe(sae_world, monkeypatch, tmp_path):
    import evaluator.core.models
    from evaluator.commands import cli, train_cli
    from evaluator.core import recipes

    reg, sae, sha = sae_world
    lm = fake_world(monkeypatch, sae, [recipes, train_cli])
    monkeypatch.setattr(evaluator.core.models, "load_model", lambda model, **kwargs: lm)
    out = tmp_path / "probe"
    argv = [
        "train",
        "--task",
        TASK,
        "--model",
        SMOLLM,
        "--layer",
        str(LAYER),
        "--method",
        "sae_topk_meandiff",
    ]
    argv += ["--hyperparameters", json.dumps({"sae": SAE_ID, "k": 2}), "--out", str(out)]
    argv += ["--registry", str(reg.root), "--cache-dir", str(tmp_path / "cache")]
    report = train_cli.run_train(cli.build_parser().parse_args(argv))
    assert report["fit"]["indices"][0] == SIGNAL and report["test"]["auroc"] > 0.95
    assert read_artifact((out / "probe.safetensors").read_bytes())[1] == {SAE_HASH_KEY: sha}
    assert json.loads((out / "probe.json").read_text())["recipe"]["hyperparameters"] == {
        "sae": SAE_ID,
        "k": 2,
    }


def test_transfer_and_steering_do_not_apply_to_an_sae_probe(sae_world, tmp_path):
    from evaluator.axes.steer import steer_ineligibility
    from evaluator.axes.transfer import TransferNotApplicable, cross_model_transfer

    reg, _, sha = sae_world
    assert "no SAE of that id encodes another model" in transfer_refusal("sae_topk_meandiff")
    assert transfer_refusal("neuron_topk_meandiff") is None
    recipe = {"method": "sae_topk_meandiff", "task": TASK, "layer": LAYER, "hyperparameters": {"sae": SAE_ID}}
    p = probe(reg, sha, recipe=recipe)

    def never(model_id):
        raise AssertionError("no model is loaded for a transfer that does not apply")

    with pytest.raises(TransferNotApplicable, match="does not apply to sae_topk_meandiff"):
        cross_model_transfer(p, targets=[GEMMA], registry=reg, cache_dir=tmp_path, load=never)
    assert "not applicable to an SAE-feature probe" in steer_ineligibility(p, registry=reg)


def test_registry_root_without_saes_yaml_has_no_sae(tmp_path):
    reg = load_registry(build_registry(tmp_path))
    assert reg.saes.saes == {}
    assert Path(reg.root) == tmp_path


# --------------------------------------------------------------------------- the baselines beside it


def test_a_task_comparison_measures_the_three_probes_on_the_same_rows():
    from evaluator.axes.sae_baselines import task_comparison

    rng = np.random.default_rng(0)
    labels = np.array([1] * 40 + [0] * 40)
    perfect = labels + rng.normal(0, 0.01, labels.size)
    noise = rng.normal(0, 1, labels.size)
    row = task_comparison("t", in_domain=True, labels=labels, sae=perfect, neurons=noise, dense=perfect)
    assert row.sae_auroc == 1.0 and row.dense_auroc == 1.0
    assert row.sae_minus_neurons == pytest.approx(1.0 - row.neurons_auroc)
    lo, hi = row.sae_minus_neurons_ci
    assert lo <= row.sae_minus_neurons <= hi and lo > 0  # the SAE probe is clearly ahead
    assert row.sae_minus_dense == 0.0 and row.sae_minus_dense_ci == [0.0, 0.0]
    assert row.n == 80 and row.to_dict()["in_domain"] is True
