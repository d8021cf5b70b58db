"""Shared fixtures for the evaluator tests: a tiny real registry and the real SmolLM2 model.

The tests never need Django. They build their own registry in a temporary directory (the real
licenses, weights specs and models.yaml, plus one small task of "The capital of X is Y."
statements written below), so they do not depend on the tasks being built in parallel.

Converted model weights are shared with the project cache (``$PROBEBENCH_TEST_CACHE`` or
``var/cache``) so the one-time GGUF conversion is not repeated; activations go to a per-session
temporary cache unless a test asks for its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from tests.env_defaults import shared_by_workers

# Passive OpenMP waiting (see evaluator/commands/train_cli.py): set before torch is first imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SMOLLM = "smollm2-135m-instruct"
GEMMA = "gemma-3-270m"
MINILM = "all-minilm-l6-v2"
TASK = "capitals-v1"

#: (country, capital): real facts; false statements pair a country with another one's capital.
CAPITALS: list[tuple[str, str]] = [
    ("France", "Paris"),
    ("Germany", "Berlin"),
    ("Italy", "Rome"),
    ("Spain", "Madrid"),
    ("Portugal", "Lisbon"),
    ("Japan", "Tokyo"),
    ("China", "Beijing"),
    ("Russia", "Moscow"),
    ("Egypt", "Cairo"),
    ("Greece", "Athens"),
    ("Austria", "Vienna"),
    ("Poland", "Warsaw"),
    ("Norway", "Oslo"),
    ("Sweden", "Stockholm"),
    ("Finland", "Helsinki"),
    ("Denmark", "Copenhagen"),
    ("Ireland", "Dublin"),
    ("Hungary", "Budapest"),
    ("Thailand", "Bangkok"),
    ("Kenya", "Nairobi"),
    ("Peru", "Lima"),
    ("Argentina", "Buenos Aires"),
    ("Mexico", "Mexico City"),
    ("Cuba", "Havana"),
    ("South Korea", "Seoul"),
    ("Iran", "Tehran"),
    ("Iraq", "Baghdad"),
    ("Belgium", "Brussels"),
    ("the Netherlands", "Amsterdam"),
    ("the Czech Republic", "Prague"),
    ("Romania", "Bucharest"),
    ("Ukraine", "Kyiv"),
    ("Indonesia", "Jakarta"),
    ("the Philippines", "Manila"),
    ("Vietnam", "Hanoi"),
    ("Chile", "Santiago"),
    ("Colombia", "Bogota"),
    ("Venezuela", "Caracas"),
    ("England", "London"),
    ("Scotland", "Edinburgh"),
    ("Turkey", "Ankara"),
    ("Canada", "Ottawa"),
    ("Australia", "Canberra"),
    ("India", "New Delhi"),
    ("Pakistan", "Islamabad"),
    ("Nigeria", "Abuja"),
    ("Ethiopia", "Addis Ababa"),
    ("Morocco", "Rabat"),
    ("Saudi Arabia", "Riyadh"),
    ("Syria", "Damascus"),
    ("Lebanon", "Beirut"),
    ("Iceland", "Reykjavik"),
    ("Switzerland", "Bern"),
    ("Bulgaria", "Sofia"),
    ("Serbia", "Belgrade"),
    ("Croatia", "Zagreb"),
    ("Afghanistan", "Kabul"),
    ("Nepal", "Kathmandu"),
    ("Bangladesh", "Dhaka"),
    ("Malaysia", "Kuala Lumpur"),
]


def capital_rows(task_id: str, countries: list[tuple[str, str]], offset: int, phrasing: str) -> list[dict]:
    """One true and one false statement per country (same group), deterministic."""
    rows = []
    for k, (country, capital) in enumerate(countries):
        wrong = CAPITALS[(offset + k + 17) % len(CAPITALS)][1]
        if wrong == capital:
            wrong = CAPITALS[(offset + k + 18) % len(CAPITALS)][1]
        for label, city in ((1, capital), (0, wrong)):
            n = len(rows)
            rows.append(
                {
                    "id": f"{task_id}-{offset + n:04d}",
                    "group": f"c{offset + k:03d}",
                    "label": label,
                    "text": phrasing.format(country=country, city=city),
                    "meta": {"country": country},
                }
            )
    return rows


def write_split(root: Path, task_id: str, split: str, rows: list[dict]) -> dict:
    """Write a split file exactly as docs/ARCHITECTURE.md says and return its tasks.yaml entry."""
    path = root / "registry" / "splits" / task_id / f"{split}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode()
    path.write_bytes(data)
    return {
        "path": str(path.relative_to(root)),
        "rows": len(rows),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def capitals_task(
    root: Path, task_id: str = TASK, *, single: str = "{text}", n_train: int = 32, n_test: int = 14
) -> dict:
    """A hallucination-category task of true/false capital statements (train/test/distshift/holdout)."""
    train_c = CAPITALS[:n_train]
    test_c = CAPITALS[n_train : n_train + n_test]
    pool_c = CAPITALS[n_train + n_test :]
    plain = "The capital of {country} is {city}."
    splits = {
        "train": write_split(root, task_id, "train", capital_rows(task_id, train_c, 0, plain)),
        "test": write_split(root, task_id, "test", capital_rows(task_id, test_c, 1000, plain)),
        "distshift": write_split(
            root,
            task_id,
            "distshift",
            capital_rows(task_id, test_c, 2000, "Fact check: {city} is the capital city of {country}."),
        ),
        "holdout_pool": write_split(
            root, task_id, "holdout_pool", capital_rows(task_id, pool_c, 3000, plain)
        ),
    }
    return {
        "id": task_id,
        "category": "hallucination",
        "family": "capitals",
        "name": "Capitals (test fixture)",
        "positive": "the statement is true",
        "negative": "the statement is false",
        "source": {"package": "tests", "version": "0", "license": "MIT"},
        "templates": {"single": single, "contrast_pair": ["{text} This is true.", "{text} This is false."]},
        "splits": splits,
        "status": "active",
        "minted": "2026-01-01",
    }


def build_registry(root: Path, tasks: list[dict] | None = None) -> Path:
    """A registry root with the project's licenses, weights specs and models plus ``tasks``."""
    (root / "registry").mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_ROOT / "registry" / "licenses.yaml", root / "registry" / "licenses.yaml")
    shutil.copy(PROJECT_ROOT / "registry" / "models.yaml", root / "registry" / "models.yaml")
    shutil.copytree(PROJECT_ROOT / "registry" / "weights", root / "registry" / "weights", dirs_exist_ok=True)
    real = yaml.safe_load((PROJECT_ROOT / "tasks.yaml").read_text())
    data = {"version": 1, "categories": real["categories"], "tasks": tasks if tasks is not None else []}
    if tasks is None:
        data["tasks"] = [capitals_task(root)]
    (root / "tasks.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return root


def model_cache_dir() -> Path:
    return Path(os.environ.get("PROBEBENCH_TEST_CACHE", PROJECT_ROOT / "var" / "cache"))


def fresh_cache(path: Path) -> Path:
    """An empty activation cache that shares the converted models of the project cache."""
    path.mkdir(parents=True, exist_ok=True)
    models = model_cache_dir() / "models"
    models.mkdir(parents=True, exist_ok=True)
    if not (path / "models").exists():
        (path / "models").symlink_to(models, target_is_directory=True)
    return path


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory) -> Path:
    """A registry root holding one small task, capitals-v1 (train 64, test 28, distshift 28 rows)."""
    return build_registry(tmp_path_factory.mktemp("registry"))


@pytest.fixture(scope="session")
def tiny_registry(tiny_root):
    from evaluator.data.registry.load import load_registry

    return load_registry(tiny_root, verify_hashes=True)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return fresh_cache(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def smollm(tiny_registry, cache_dir):
    """The real SmolLM2-135M-Instruct, fp32 on CPU, loaded once per session."""
    from evaluator.core.models import load_model

    return load_model(SMOLLM, registry=tiny_registry, cache_dir=cache_dir, device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def minilm(tiny_registry, cache_dir):
    from evaluator.core.models import load_model

    return load_model(MINILM, registry=tiny_registry, cache_dir=cache_dir, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def sources_dir(tmp_path_factory) -> Path:
    """The pinned source archives (downloaded once into var/sources; skipped where they cannot be).
    Under xdist one worker downloads while the others wait (a move from the system's temporary
    directory is a copy where it is another filesystem: a reader could see half a file)."""
    from evaluator.data.builders.sources import DEFAULT_SOURCES_DIR, SourceError, fetch_all
    from evaluator.data.registry.files import default_root

    path = default_root() / DEFAULT_SOURCES_DIR
    try:
        shared_by_workers(
            tmp_path_factory, "sources", lambda _: fetch_all(root=default_root(), sources_dir=path)
        )
    except SourceError as exc:
        pytest.skip(f"pinned source archives could not be downloaded: {exc}")
    return path
