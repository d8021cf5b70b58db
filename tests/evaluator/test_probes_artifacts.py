"""Every bad artifact is rejected with its own message; good ones load and score correctly."""

from __future__ import annotations

import io
import json
import pickle

import numpy as np
import pytest
from safetensors.numpy import save, save_file

from evaluator.core.probes import (
    ProbeMetadata,
    load_probe,
    probe_from_bytes,
    probe_from_tensors,
    read_safetensors,
    save_probe,
)
from evaluator.errors import ArtifactError, UnknownNameError
from tests.evaluator.conftest import SMOLLM, TASK

D = 576  # SmolLM2's d_model


def metadata(**overrides) -> dict:
    meta = {
        "name": "capitals probe",
        "category": "hallucination",
        "base_model": SMOLLM,
        "layer": 15,
        "position": "last_token",
        "input": "single",
        "output": "logit",
        "license": "Apache-2.0",
        "authors": ["Ada"],
        "training_data": {"tasks": [TASK], "external": ""},
        "recipe": {"method": "logistic_regression", "task": TASK, "layer": 15, "seed": 0},
    }
    meta.update(overrides)
    return meta


def linear(d: int = D) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"weight": rng.standard_normal(d).astype(np.float32), "bias": np.array(0.5, dtype=np.float32)}


def write_probe(directory, tensors=None, meta=None, raw: bytes | None = None):
    directory.mkdir(parents=True, exist_ok=True)
    if raw is None:
        raw = save(tensors if tensors is not None else linear())
    (directory / "probe.safetensors").write_bytes(raw)
    (directory / "probe.json").write_text(json.dumps(meta or metadata()))
    return directory


def rejects(tmp_path, tiny_registry, match: str, **kwargs) -> None:
    with pytest.raises(ArtifactError, match=match):
        load_probe(write_probe(tmp_path / "p", **kwargs), registry=tiny_registry)


# --------------------------------------------------------------------------- bad artifacts


def test_a_pickle_renamed_safetensors_is_rejected_as_a_pickle(tmp_path, tiny_registry):
    rejects(tmp_path, tiny_registry, "looks like a Python pickle", raw=pickle.dumps(linear()))


def test_a_torch_save_file_is_rejected_as_a_zip_archive(tmp_path, tiny_registry):
    import torch

    buffer = io.BytesIO()
    torch.save({"weight": torch.zeros(D)}, buffer)
    rejects(tmp_path, tiny_registry, "looks like a zip archive", raw=buffer.getvalue())


def test_a_truncated_file_is_rejected_as_truncated(tmp_path, tiny_registry):
    rejects(tmp_path, tiny_registry, "artifact is truncated: .* ends at byte", raw=save(linear())[:-100])


def test_a_file_cut_inside_its_header_is_rejected_as_truncated(tmp_path, tiny_registry):
    rejects(tmp_path, tiny_registry, "artifact is truncated: its header alone", raw=save(linear())[:20])


def test_random_bytes_are_not_safetensors(tmp_path, tiny_registry):
    rejects(tmp_path, tiny_registry, "not a safetensors file", raw=b"hello, this is not a probe at all")


def test_trailing_bytes_are_rejected(tmp_path, tiny_registry):
    rejects(tmp_path, tiny_registry, "trailing bytes", raw=save(linear()) + b"\0" * 16)


def test_a_wrong_shape_names_the_tensor_and_the_expected_shape(tmp_path, tiny_registry):
    rejects(
        tmp_path,
        tiny_registry,
        r"tensor 'weight' has shape \[100\]; expected \[576\] or \[k, 576\]",
        tensors=linear(100),
    )


def test_a_bias_of_the_wrong_shape_is_rejected(tmp_path, tiny_registry):
    tensors = linear() | {"bias": np.zeros(3, dtype=np.float32)}
    rejects(tmp_path, tiny_registry, r"tensor 'bias' has shape \[3\]", tensors=tensors)


def test_nan_values_are_rejected(tmp_path, tiny_registry):
    tensors = linear()
    tensors["weight"][[3, 7]] = np.nan
    rejects(tmp_path, tiny_registry, r"tensor 'weight' contains 2 non-finite value", tensors=tensors)


def test_an_unknown_tensor_name_lists_the_accepted_names(tmp_path, tiny_registry):
    tensors = linear() | {"classifier.weight": np.zeros(D, dtype=np.float32)}
    rejects(
        tmp_path,
        tiny_registry,
        r"unknown tensor name\(s\) 'classifier.weight'; accepted: linear probe weight",
        tensors=tensors,
    )


def test_an_oversize_artifact_is_rejected_before_it_is_read(tmp_path, tiny_registry):
    directory = write_probe(tmp_path / "p")
    with pytest.raises(ArtifactError, match=r"size limit is 1,000 bytes"):
        load_probe(directory, registry=tiny_registry, max_bytes=1000)
    with pytest.raises(ArtifactError, match="size limit"):
        probe_from_bytes(b"\0" * 2000, d_model=D, max_bytes=1000)


def test_a_layer_out_of_range_is_rejected(tmp_path, tiny_registry):
    rejects(
        tmp_path,
        tiny_registry,
        r"layer 31 is out of range for smollm2-135m-instruct: 0\.\.30",
        meta=metadata(layer=31, recipe=None),
    )
    with pytest.raises(ArtifactError, match="layer -1 is out of range"):
        probe_from_bytes(save(linear()), d_model=D, n_layers=30, layer=-1)


def test_an_unknown_license_lists_the_accepted_ids(tmp_path, tiny_registry):
    with pytest.raises(UnknownNameError, match="accepted: Apache-2.0"):
        load_probe(write_probe(tmp_path / "p", meta=metadata(license="WTFPL")), registry=tiny_registry)


def test_a_mixed_linear_and_mlp_artifact_is_rejected(tmp_path, tiny_registry):
    tensors = linear() | {"w1": np.zeros((4, D), dtype=np.float32)}
    rejects(tmp_path, tiny_registry, r"unknown tensor name\(s\) 'bias', 'weight'", tensors=tensors)


def test_a_zero_scale_is_rejected(tmp_path, tiny_registry):
    tensors = linear() | {"scale": np.zeros(D, dtype=np.float32)}
    rejects(tmp_path, tiny_registry, "'scale' has 576 zero entries", tensors=tensors)


def test_metadata_with_an_unknown_field_is_rejected(tiny_registry):
    with pytest.raises(ArtifactError, match=r"unknown field\(s\) layr"):
        ProbeMetadata.from_dict(metadata(layr=3), registry=tiny_registry)


def test_a_recipe_that_disagrees_with_the_probe_is_rejected(tiny_registry):
    meta = metadata(recipe={"method": "logistic_regression", "task": TASK, "layer": 14})
    with pytest.raises(ArtifactError, match="recipe: layer 14 differs from the probe's layer 15"):
        ProbeMetadata.from_dict(meta, registry=tiny_registry)


# --------------------------------------------------------------------------- good artifacts


def test_a_linear_probe_round_trips_and_scores_w_dot_x_plus_b(tmp_path, tiny_registry):
    tensors = linear()
    save_probe(tmp_path / "p", tensors, metadata())
    probe = load_probe(tmp_path / "p", registry=tiny_registry)
    X = np.random.default_rng(1).standard_normal((5, D))
    expected = X @ tensors["weight"].astype(np.float64) + 0.5
    np.testing.assert_allclose(probe.score(X), expected, rtol=1e-6)
    np.testing.assert_allclose(probe.probability(probe.score(X)), 1 / (1 + np.exp(-expected)), rtol=1e-6)
    assert probe.kind == "linear" and len(probe.sha256) == 64


def test_standardization_is_applied_before_the_weight(tiny_registry):
    rng = np.random.default_rng(2)
    mean, scale = rng.standard_normal(D), rng.uniform(0.5, 2, D)
    probe = probe_from_tensors(linear() | {"mean": mean, "scale": scale}, metadata(), registry=tiny_registry)
    X = rng.standard_normal((4, D))
    w = linear()["weight"].astype(np.float64)
    np.testing.assert_allclose(probe.score(X), ((X - mean) / scale) @ w + 0.5, rtol=1e-6)
    np.testing.assert_allclose(probe.direction(), w / scale)


def test_a_two_class_probe_scores_the_positive_minus_the_negative_logit(tiny_registry):
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((2, D)), np.array([0.1, -0.2])
    probe = probe_from_tensors({"weight": w, "bias": b}, metadata(recipe=None), registry=tiny_registry)
    X = rng.standard_normal((4, D))
    np.testing.assert_allclose(probe.score(X), X @ (w[1] - w[0]) + (b[1] - b[0]), rtol=1e-6)


def test_an_mlp_probe_applies_relu_between_its_layers(tiny_registry):
    rng = np.random.default_rng(4)
    t = {
        "w1": rng.standard_normal((8, D)),
        "b1": rng.standard_normal(8),
        "w2": rng.standard_normal((1, 8)),
        "b2": np.array([0.3]),
    }
    probe = probe_from_tensors(t, metadata(recipe=None), registry=tiny_registry)
    X = rng.standard_normal((3, D))
    expected = np.maximum(X @ t["w1"].T + t["b1"], 0) @ t["w2"][0] + 0.3
    np.testing.assert_allclose(probe.score(X), expected, rtol=1e-6)
    assert probe.kind == "mlp" and probe.direction() is None


def test_the_torch_forward_matches_the_numpy_score(tiny_registry):
    import torch

    rng = np.random.default_rng(5)
    for tensors in (
        linear() | {"mean": rng.standard_normal(D), "scale": rng.uniform(1, 2, D)},
        {"weight": rng.standard_normal((3, D)), "bias": rng.standard_normal(3)},
        {
            "w1": rng.standard_normal((8, D)),
            "b1": rng.standard_normal(8),
            "w2": rng.standard_normal(8),
            "b2": np.array(0.1),
        },
    ):
        probe = probe_from_tensors(tensors, metadata(recipe=None), registry=tiny_registry)
        x = rng.standard_normal((1, D))
        got = probe.torch_forward("cpu")(torch.tensor(x, dtype=torch.float32))
        np.testing.assert_allclose(got.numpy(), probe.score(x), rtol=1e-4, atol=1e-4)


def _every_kind(rng) -> dict[str, dict[str, np.ndarray]]:
    """One probe of each shape the artifact format accepts (module docstring of core/probes.py)."""
    h = 8
    return {
        "linear [d], no bias": {"weight": rng.standard_normal(D)},
        "linear [d], standardized": {
            "weight": rng.standard_normal(D),
            "bias": np.array(0.5),
            "mean": rng.standard_normal(D),
            "scale": rng.uniform(0.5, 2, D),
        },
        "linear [1, d]": {"weight": rng.standard_normal((1, D)), "bias": rng.standard_normal(1)},
        "linear [2, d]": {"weight": rng.standard_normal((2, D)), "bias": rng.standard_normal(2)},
        "linear [3, d], no bias": {"weight": rng.standard_normal((3, D)), "mean": rng.standard_normal(D)},
        "mlp, w2 [1, h]": {
            "w1": rng.standard_normal((h, D)),
            "b1": rng.standard_normal(h),
            "w2": rng.standard_normal((1, h)),
            "b2": np.array([0.3]),
        },
        "mlp, w2 [h], standardized": {
            "w1": rng.standard_normal((h, D)),
            "b1": rng.standard_normal(h),
            "w2": rng.standard_normal(h),
            "b2": np.array(-0.2),
            "mean": rng.standard_normal(D),
            "scale": rng.uniform(0.5, 2, D),
        },
    }


def test_the_numpy_and_torch_scores_agree_for_every_probe_kind(tiny_registry):
    """Probe.score (numpy, float64) and Probe.torch_forward (torch; what the attack differentiates
    and the latency times) are one formula on two backends: in float64 they agree to 1e-6."""
    import torch

    rng = np.random.default_rng(6)
    for name, tensors in _every_kind(rng).items():
        probe = probe_from_tensors(tensors, metadata(recipe=None), registry=tiny_registry)
        X = 3 * rng.standard_normal((16, D))
        expected = probe.score(X)
        got = probe.torch_forward("cpu", torch.float64)(torch.tensor(X, dtype=torch.float64))
        assert got.dtype == torch.float64 and got.shape == (16,), name
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6, atol=1e-6, err_msg=name)


def test_half_precision_artifacts_are_read_exactly(tmp_path):
    import torch
    from safetensors.torch import save_file as torch_save_file

    w = torch.randn(D)
    torch_save_file(
        {"weight": w.to(torch.bfloat16), "bias": torch.tensor(0.25, dtype=torch.float16)},
        str(tmp_path / "p.safetensors"),
    )
    tensors = read_safetensors((tmp_path / "p.safetensors").read_bytes())
    np.testing.assert_array_equal(tensors["weight"], w.to(torch.bfloat16).float().numpy())
    assert tensors["bias"] == 0.25


def test_probe_from_bytes_validates_an_upload_without_a_registry(tmp_path):
    save_file(linear(), str(tmp_path / "a.safetensors"))
    checked = probe_from_bytes((tmp_path / "a.safetensors").read_bytes(), d_model=D, n_layers=30, layer=15)
    assert checked.kind == "linear" and checked.tensors["weight"].shape == (D,)
