"""The committed bundle ``make demo`` opens from (registry/bundles/reference.tar): it verifies with
the committed public key, and it is not stale: it holds every reference probe of the default
models with the artifact the manifest names, measured on the splits, models and protocols the
registry pins now. When this fails, regenerate it (README, "The committed bundle")."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from evaluator import bundles as fmt
from evaluator.data.registry.load import load_registry

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "registry" / "bundles" / "reference.tar"
KEYS = ROOT / "registry" / "keys"
REGENERATE = "regenerate it: README, section 'The committed bundle'"


@pytest.fixture(scope="module")
def bundle() -> fmt.Bundle:
    if not BUNDLE.is_file():  # make demo then measures from nothing (it says so)
        pytest.skip(f"no committed bundle at {BUNDLE}: make demo measures from nothing")
    pems = [p.read_bytes() for p in sorted(KEYS.glob("*.pem"))]
    return fmt.bundle_read(BUNDLE, trusted=fmt.trusted_keys(pems), max_bytes=1 << 30)


def _reference_artifacts(registry) -> dict[str, str]:
    """slug → artifact SHA-256 of every manifest reference probe on a model run by default."""
    manifest = yaml.safe_load((ROOT / "registry" / "reference_probes" / "manifest.yaml").read_text())
    default = {m.id for m in registry.models.values() if not getattr(m, "on_request", False)}
    out = {}
    for entry in manifest["probes"]:
        directory = ROOT / entry["path"]
        if json.loads((directory / "probe.json").read_text())["base_model"] in default:
            out[entry["slug"]] = hashlib.sha256((directory / "probe.safetensors").read_bytes()).hexdigest()
    return out


def test_the_committed_bundle_verifies_with_the_committed_key(bundle):
    assert bundle.manifest["entries"] and bundle.manifest["commit"], "the bundle names no commit"


def test_the_committed_bundle_holds_every_default_reference_probe(bundle):
    registry = load_registry(ROOT)
    want = _reference_artifacts(registry)
    have = {e["artifact_sha256"] for e in bundle.manifest["entries"]}
    missing = sorted(slug for slug, sha in want.items() if sha not in have)
    extra = sorted(
        e["probe"] for e in bundle.manifest["entries"] if e["artifact_sha256"] not in set(want.values())
    )
    assert not missing and not extra, f"stale: missing {missing}, not in the manifest {extra}; {REGENERATE}"


def test_the_committed_bundle_was_measured_on_what_the_registry_pins_now(bundle):
    stale = fmt.context_problems(bundle.manifest, load_registry(ROOT))
    assert not stale, f"stale: {'; '.join(stale)}; {REGENERATE}"
