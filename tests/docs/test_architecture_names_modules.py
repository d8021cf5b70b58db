"""docs/ARCHITECTURE.md names every module of the three packages, by its path from the repository
root (``leaderboard/selectors/board.py``), so a newcomer reading it finds every file of the code.

A module moved or added shows up here by its path: add its line to the "Every module" section."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"

#: the packages documented module by module
PACKAGES = ("evaluator", "leaderboard", "probebench")
#: folders that hold no module a reader needs named (Django's generated schema history)
EXCLUDED = ("migrations",)


def modules() -> list[str]:
    """Every ``.py`` file of the packages, as a path relative to the repository root."""
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if any(part in EXCLUDED for part in relative.parts):
                continue
            found.append(relative.as_posix())
    return sorted(found)


def test_the_walk_finds_the_modules_of_every_package():
    found = modules()
    # the walk reaches nested packages and leaves the migrations out
    assert "evaluator/data/builders/common.py" in found
    assert "leaderboard/management/commands/demo.py" in found
    assert "probebench/settings.py" in found
    assert not any("/migrations/" in path for path in found)


def test_architecture_names_every_module():
    text = ARCHITECTURE.read_text()
    missing = [path for path in modules() if f"`{path}`" not in text]
    assert not missing, (
        f"docs/ARCHITECTURE.md does not name these modules (add a line under 'Every module'): {missing}"
    )


def test_architecture_names_no_module_that_is_gone():
    """Every module path the index names exists, so a line is removed when its module is."""
    text = ARCHITECTURE.read_text()
    section = text[text.index("## Every module") :]
    section = section[: section.index("\n## ", 1)]
    named = set(re.findall(r"`((?:evaluator|leaderboard|probebench)/[\w/]+\.py)`", section))
    assert len(named) > 50
    gone = sorted(path for path in named if not (ROOT / path).is_file())
    assert not gone, f"docs/ARCHITECTURE.md names modules that do not exist: {gone}"
