"""Every requirements file installs in pip's hash-checking mode: each lock file (requirements*.txt,
docker/requirements.txt) pins every package with == and its SHA-256 hashes, agrees with the .in
file it is compiled from (`make lock`), and every pip install of the Makefile and the Dockerfile
passes --require-hashes. Reads files only: no network, no pip."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCKS = sorted(ROOT.glob("requirements*.txt")) + [ROOT / "docker" / "requirements.txt"]
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")
PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9_,-]+\])?==[^\s;]+(\s*;[^-]+?)?$")


def _entries(path: Path) -> list[str]:
    """The requirement lines of a requirements file, continuation lines joined, comments dropped."""
    text = path.read_text().replace("\\\n", " ")
    lines = (re.sub(r"(^|\s)#.*", "", line).strip() for line in text.splitlines())
    return [" ".join(line.split()) for line in lines if line]


def _lock(path: Path) -> dict[str, tuple[Version, list[str]]]:
    """name -> (pinned version, hashes) of a lock file."""
    out = {}
    for entry in _entries(path):
        spec = " ".join(part for part in entry.split() if not part.startswith("--hash="))
        req = Requirement(spec)
        out[canonicalize_name(req.name)] = (Version(next(iter(req.specifier)).version), HASH.findall(entry))
    return out


@pytest.mark.parametrize("path", LOCKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_requirement_is_pinned_with_its_hashes(path):
    entries = _entries(path)
    assert entries, f"{path.name} pins nothing"
    for entry in entries:
        assert not entry.startswith("-"), f"{path.name}: an option line in a lock file: {entry}"
        spec = " ".join(part for part in entry.split() if not part.startswith("--hash="))
        assert PINNED.match(spec), f"{path.name}: not pinned with ==: {entry}"
        assert HASH.search(entry), f"{path.name}: no --hash=sha256: for {spec}"
        assert len(HASH.findall(entry)) == entry.count("--hash="), (
            f"{path.name}: a hash that is not SHA-256: {entry}"
        )


def test_a_requirement_without_its_hash_is_caught(tmp_path):
    lock = tmp_path / "requirements.txt"
    lock.write_text(
        "django==5.2.19 \\\n    --hash=sha256:" + "a" * 64 + "\n    # via -r requirements.in\nredis==8.1.0\n"
    )
    with pytest.raises(AssertionError, match="no --hash=sha256: for redis==8.1.0"):
        test_every_requirement_is_pinned_with_its_hashes(lock)
    lock.write_text("numpy>=2.0 \\\n    --hash=sha256:" + "a" * 64 + "\n")
    with pytest.raises(AssertionError, match="not pinned with =="):
        test_every_requirement_is_pinned_with_its_hashes(lock)


@pytest.mark.parametrize(
    "source", sorted(ROOT.glob("requirements*.in")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_each_lock_holds_what_its_source_asks_for(source):
    """A line added to or changed in an .in file without `make lock` fails here."""
    lock = _lock(source.with_suffix(".txt"))
    for entry in _entries(source):
        if entry.startswith("-"):  # -r / -c of another requirements file
            continue
        req = Requirement(entry)
        name = canonicalize_name(req.name)
        assert name in lock, (
            f"{source.name} asks for {req}, {source.with_suffix('.txt').name} lacks it: run make lock"
        )
        version = lock[name][0]
        assert req.specifier.contains(version, prereleases=True), (
            f"{source.name} asks for {req}, the lock pins {version}: run make lock"
        )


def test_the_dev_lock_holds_the_runtime_lock_and_docker_differs_only_in_torch():
    runtime = _lock(ROOT / "requirements.txt")
    dev = _lock(ROOT / "requirements-dev.txt")
    docker = _lock(ROOT / "docker" / "requirements.txt")
    assert {name: dev[name][0] for name in runtime} == {name: v for name, (v, _) in runtime.items()}
    assert str(runtime["torch"][0]).endswith("+cpu") and docker["torch"][0].local is None
    assert docker["torch"][0].public == runtime["torch"][0].public
    shared = set(runtime) - {"torch"}
    assert shared <= set(docker)
    assert {n: docker[n][0] for n in shared} == {n: runtime[n][0] for n in shared}


def _pip_installs(path: Path) -> list[str]:
    """Each pip install command of a Makefile or Dockerfile (continuation lines joined, split at
    && and ;)."""
    text = path.read_text().replace("\\\n", " ")
    commands = (c.strip() for line in text.splitlines() for c in re.split(r"&&|;", line))
    return [c for c in commands if re.search(r"\bpip\)?\"? install\b", c, re.I)]


@pytest.mark.parametrize("path", [ROOT / "Makefile", ROOT / "docker" / "Dockerfile"], ids=lambda p: p.name)
def test_every_pip_install_checks_hashes(path):
    installs = _pip_installs(path)
    assert len(installs) >= 2
    for line in installs:
        assert "--require-hashes" in line, f"{path.name}: {line}"
        assert re.search(r"-r \S*requirements[\w-]*\.txt", line), (
            f"{path.name}: installs outside a lock file: {line}"
        )
