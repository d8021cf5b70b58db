"""A tiny synthetic TopK SAE registered under a test's registry root (``registry/saes.yaml`` and its
SAELens directory), for the SAE-feature probe tests; and a registry root that is the project's with
that SAE added (symbolic links to every other file), for the submission tests."""

from __future__ import annotations

from pathlib import Path

import torch
import yaml

from evaluator.core.sae.model import TopKSae, sae_cfg, save_sae
from tests.evaluator.conftest import PROJECT_ROOT, SMOLLM

D_MODEL, WIDTH, SAE_K, LAYER = 576, 64, 4, 15  # smollm2-135m-instruct's width
SAE_ID = "test-sae"


def register_sae(
    root: Path,
    *,
    sae_id: str = SAE_ID,
    model: str = SMOLLM,
    layer: int = LAYER,
    d_model: int = D_MODEL,
    seed: int = 0,
) -> tuple[TopKSae, str]:
    """Write a random TopK SAE (nonzero biases) under ``root/saes/<id>`` and add it to
    ``root/registry/saes.yaml``; return it and its weights' SHA-256."""
    g = torch.Generator().manual_seed(seed)
    sae = TopKSae.initial(d_model, WIDTH, SAE_K, generator=g)
    sae.b_enc = 0.1 * torch.randn(WIDTH, generator=g)
    sae.b_dec = 0.05 * torch.randn(d_model, generator=g)
    cfg = sae_cfg(
        sae, model_id=model, layer=layer, context=64, prepend_bos=False, dataset="test", provenance={}
    )
    path = f"saes/{sae_id}"
    sha = save_sae(sae, cfg, root / path)
    corpus = yaml.safe_load((PROJECT_ROOT / "registry" / "saes.yaml").read_text())["corpora"][0]
    file = root / "registry" / "saes.yaml"
    data = yaml.safe_load(file.read_text()) if file.is_file() else {"corpora": [corpus], "saes": []}
    data["saes"].append(
        {
            "id": sae_id,
            "model": model,
            "layer": layer,
            "hook": f"blocks.{layer - 1}.hook_resid_post",
            "architecture": "topk",
            "d_model": d_model,
            "width": WIDTH,
            "k": SAE_K,
            "corpus": {key: corpus[key] for key in ("id", "package", "version", "sha256")},
            "tokens": 1000,
            "context": 64,
            "seed": seed,
            "license": "Apache-2.0",
            "path": path,
            "weights_sha256": sha,
        }
    )
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(yaml.safe_dump(data, sort_keys=False))
    return sae, sha


def project_root_with_sae(root: Path) -> tuple[Path, TopKSae, str]:
    """``root``: the project's tasks.yaml and registry/ (linked, not copied) with ``registry/saes.yaml``
    replaced by one that registers a synthetic SAE of SmolLM2 at layer 15."""
    (root / "registry").mkdir(parents=True)
    (root / "tasks.yaml").symlink_to(PROJECT_ROOT / "tasks.yaml")
    for child in (PROJECT_ROOT / "registry").iterdir():
        if child.name != "saes.yaml":
            (root / "registry" / child.name).symlink_to(child)
    sae, sha = register_sae(root)
    return root, sae, sha
