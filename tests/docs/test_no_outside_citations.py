"""The repository stands alone: no file cites a document that lives outside it (a specification,
a data note or a style guide kept beside the repository) or a numbered issue of the tracker. A
reader has only the repository; what a rule is and why is written here, in docs/ or beside the
code.

The patterns are assembled from pieces so that this file does not match itself."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_MD = r"\.md\b"
#: documents that live beside the repository, not in it
OUTSIDE_DOCUMENTS = re.compile(
    r"\b(?:SPEC|DATA|STYLE)" + _MD + r"|\.\./" + "shared" + r"\b|\bpapers/",
    re.IGNORECASE,
)
#: a numbered issue of the tracker: the word, then a number (after a space, a hash or a slash)
ISSUE_NUMBER = re.compile(r"\bissues?" + r"(?:\s*#\s*|\s+|/)\d+", re.IGNORECASE)

#: Folders never checked: version control, the environment, what the site writes.
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "var",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
}
#: The project's history: the changelog, the benchmark log and the results log record which issue
#: each entry came from (their headings name it), so issue numbers are allowed there, and only
#: there. A document outside the repository is cited in none of them either.
HISTORY = {"CHANGELOG.md", "BENCHMARKS.md", "RESULTS.md"}


def repository_files() -> list[Path]:
    """The files of the repository: tracked and new ones (not ignored), or a walk without git."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
        names = [name for name in out.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        names = [
            path.relative_to(ROOT).as_posix()
            for path in ROOT.rglob("*")
            if path.is_file() and not SKIPPED_DIRS & set(path.relative_to(ROOT).parts)
        ]
    files = []
    for name in names:
        if SKIPPED_DIRS & set(Path(name).parts):
            continue
        path = ROOT / name
        if path.is_file():
            files.append(path)
    return files


def text_of(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None  # binary (an artifact, an image)
    return data.decode("utf-8", errors="replace")


def citations(text: str, *, history: bool) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if OUTSIDE_DOCUMENTS.search(line) or (not history and ISSUE_NUMBER.search(line)):
            found.append((number, line.strip()[:160]))
    return found


def test_the_patterns_catch_what_they_are_for():
    cites = [
        "# see " + "SPEC" + ".md §4",
        "weights from " + "data" + ".md",
        "read ../" + "shared/notes",
        "# fixed in issue" + " 16",
        "(issue" + " #3)",
        "github.com/x/y/issues" + "/12",
    ]
    for line in cites:
        assert citations(line, history=False), line
    # history files may name issues, never an outside document
    assert not citations("## Evaluator (issue" + " 3)", history=True)
    assert citations("as " + "SPEC" + ".md says", history=True)
    # ordinary words are not citations
    for line in (
        "the shared reference runs",
        "docs/METHODOLOGY.md",
        "no issue here",
        "RESULTS.md §4",
        "tissue 3",
    ):
        assert not citations(line, history=False), line


def test_no_file_cites_a_document_outside_the_repository():
    files = repository_files()
    assert any(path.name == "ARCHITECTURE.md" for path in files)  # the walk sees the repository
    found = []
    for path in files:
        text = text_of(path)
        if text is None:
            continue
        relative = path.relative_to(ROOT).as_posix()
        for number, line in citations(text, history=relative in HISTORY):
            found.append(f"{relative}:{number}: {line}")
    assert not found, "cite docs/ or say it in our words:\n" + "\n".join(found)
