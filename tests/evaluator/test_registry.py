"""Registry validation: each problem is a specific error naming the file, entry and what is accepted."""

import hashlib
import shutil
from pathlib import Path

import pytest
import yaml

from evaluator.data.registry.load import load_registry
from evaluator.errors import RegistryError, SplitHashMismatch, UnknownNameError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path):
    """A copy of the real registry with one tiny task whose split files exist."""
    shutil.copy(ROOT / "tasks.yaml", tmp_path / "tasks.yaml")
    shutil.copytree(ROOT / "registry" / "weights", tmp_path / "registry" / "weights")
    for name in ("licenses.yaml", "models.yaml"):
        shutil.copy(ROOT / "registry" / name, tmp_path / "registry" / name)
    splits = {}
    for split in ("train", "test", "holdout_pool"):
        path = tmp_path / "registry" / "splits" / "toy-v1" / f"{split}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'{{"id": "{split}-1", "label": 1, "text": "a"}}\n')
        splits[split] = {
            "path": str(path.relative_to(tmp_path)),
            "rows": 1,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
    data = yaml.safe_load((tmp_path / "tasks.yaml").read_text())
    data["tasks"] = [
        {
            "id": "toy-v1",
            "category": "hallucination",
            "family": "toy",
            "positive": "hallucinated",
            "source": {"package": "none", "version": "0", "license": "MIT"},
            "splits": splits,
        }
    ]
    (tmp_path / "tasks.yaml").write_text(yaml.safe_dump(data))
    return tmp_path


def edit(path: Path, fn):
    data = yaml.safe_load(path.read_text())
    fn(data)
    path.write_text(yaml.safe_dump(data))


def test_the_shipped_registry_loads_and_every_split_hash_matches():
    reg = load_registry(verify_hashes=True)
    assert len(reg.categories) == 8
    assert reg.spec("v0.0.1").weights["auroc"] == 0.30


def test_the_fixture_registry_loads(root):
    reg = load_registry(root, verify_hashes=True)
    assert reg.task("toy-v1").category == "hallucination"


def test_an_unknown_category_is_named_with_the_accepted_ones(root):
    edit(root / "tasks.yaml", lambda d: d["tasks"][0].update(category="halucination"))
    with pytest.raises(
        RegistryError, match="unknown category 'halucination'; accepted: hallucination, reasoning"
    ):
        load_registry(root)


def test_a_short_hash_is_rejected(root):
    edit(root / "tasks.yaml", lambda d: d["tasks"][0]["splits"]["test"].update(sha256="a1f3e2d8c7b6a5f4"))
    with pytest.raises(RegistryError, match="split test: sha256 must be 64 lowercase hex characters, got 16"):
        load_registry(root)


def test_a_split_file_that_changed_names_the_file_and_both_hashes(root):
    reg = load_registry(root)
    path = root / reg.task("toy-v1").splits["test"].path
    expected = reg.task("toy-v1").splits["test"].sha256
    path.write_text('{"id": "test-1", "label": 0, "text": "a"}\n')
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(SplitHashMismatch) as err:
        load_registry(root, verify_hashes=True)
    assert "registry/splits/toy-v1/test.jsonl" in str(err.value)
    assert expected in str(err.value) and actual in str(err.value)


def test_weights_that_do_not_sum_to_one_are_rejected(root):
    edit(
        root / "registry/weights/v0.0.1.yaml",
        lambda d: d["weights"].update(auroc=0.25, auroc_ea=0.18, auroc_ds=0.12),
    )
    with pytest.raises(RegistryError, match="weights sum to 0.9, they must sum to 1.0"):
        load_registry(root)


def test_a_weight_above_the_cap_is_rejected(root):
    edit(root / "registry/weights/v0.0.1.yaml", lambda d: d["weights"].update(auroc=0.35, auroc_ds=0.10))
    with pytest.raises(RegistryError, match="weight auroc = 0.35 exceeds the component cap of 0.3"):
        load_registry(root)


def test_a_missing_required_split_is_rejected(root):
    edit(root / "tasks.yaml", lambda d: d["tasks"][0]["splits"].pop("holdout_pool"))
    with pytest.raises(RegistryError, match="missing split\\(s\\) holdout_pool"):
        load_registry(root)


def test_an_unknown_spec_version_lists_the_known_ones(root):
    with pytest.raises(UnknownNameError, match="unknown weights spec 'v0.0.9'.*accepted: v0.0.1, v0.0.2"):
        load_registry(root).spec("v0.0.9")


def test_a_license_score_out_of_range_is_rejected(root):
    edit(root / "registry/licenses.yaml", lambda d: d["licenses"][0].update(score=1.5))
    with pytest.raises(RegistryError, match="score must be in \\[0.2, 1.0\\]"):
        load_registry(root)
