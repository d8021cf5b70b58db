"""Every environment variable the settings read is documented in docs/CONFIGURATION.md, and the
site's packages read the environment nowhere else (they read ``django.conf.settings``)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "probebench" / "settings.py"
CONFIGURATION = ROOT / "docs" / "CONFIGURATION.md"

#: the settings' own readers (probebench/settings.py): the first argument is the variable's name
READERS = {"env", "envbool", "envint", "envlist"}


def _is_os_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _reads_a_variable(func: ast.AST) -> bool:
    """``env`` and its typed siblings, ``os.environ.get``, ``os.getenv``."""
    if isinstance(func, ast.Name):
        return func.id in READERS
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "get":
        return _is_os_environ(func.value)
    return func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os"


def variables_read(source: str) -> set[str]:
    """The names of the variables a module reads: ``env("X")`` and its typed siblings,
    ``os.environ.get("X")``, ``os.environ["X"]``, ``os.getenv("X")`` (constant names only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        first = None
        if isinstance(node, ast.Call) and node.args and _reads_a_variable(node.func):
            first = node.args[0]
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value):
            first = node.slice
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            names.add(first.value)
    return names


def test_the_reader_finds_every_form_of_read():
    source = (
        'import os\nA = env("PROBEBENCH_A")\nB = envint("PROBEBENCH_B", "1")\n'
        'C = os.environ.get("C_VAR")\nD = os.environ["D_VAR"]\nE = os.getenv("E_VAR")\n'
        'F = other("NOT_A_VAR")\n'
    )
    assert variables_read(source) == {"PROBEBENCH_A", "PROBEBENCH_B", "C_VAR", "D_VAR", "E_VAR"}


def test_every_variable_the_settings_read_is_documented():
    names = variables_read(SETTINGS.read_text())
    # the reader sees the settings' variables (a parse that found nothing would pass vacuously)
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "PROBEBENCH_RUN_SOFT_LIMIT_S"} <= names
    assert len(names) >= 30
    documented = CONFIGURATION.read_text()
    missing = sorted(name for name in names if f"`{name}`" not in documented)
    assert not missing, f"read in probebench/settings.py, not documented in docs/CONFIGURATION.md: {missing}"


def test_every_setting_of_ours_the_code_reads_is_documented():
    """``settings.NAME`` read in leaderboard/ or probebench/, when NAME is not one of Django's own
    settings, is one of ours and has its row in docs/CONFIGURATION.md."""
    from django.conf import global_settings

    read: set[str] = set()
    for package in ("leaderboard", "probebench"):
        for path in (ROOT / package).rglob("*.py"):
            read |= set(re.findall(r"(?<![\w.])settings\.([A-Z][A-Z0-9_]*)", path.read_text()))
    assert {"RUN_SOFT_LIMIT_S", "REGISTRY_ROOT"} <= read  # the search finds the settings the code reads
    ours = sorted(name for name in read if not hasattr(global_settings, name))
    documented = CONFIGURATION.read_text()
    missing = [name for name in ours if f"`{name}`" not in documented]
    assert not missing, f"settings read by the code, not documented in docs/CONFIGURATION.md: {missing}"


# --------------------------------------------------------------------------- read only in settings

#: Uses of ``os.environ`` outside the settings that read no setting, each with its reason:
#: (module path, the key or None for the whole use) -> why it is allowed.
ALLOWED = {
    # the settings module's name, set before Django starts (it cannot come from the settings)
    ("probebench/celery.py", "DJANGO_SETTINGS_MODULE"): "setdefault before Django is set up",
    ("probebench/wsgi.py", "DJANGO_SETTINGS_MODULE"): "setdefault before Django is set up",
    ("probebench/asgi.py", "DJANGO_SETTINGS_MODULE"): "setdefault before Django is set up",
    # a setting of the OpenMP runtime for this process, written (not read) before torch loads
    ("probebench/celery.py", "OMP_WAIT_POLICY"): "configures the OpenMP runtime",
    # the demo passes its own environment on to the worker process it starts
    ("leaderboard/management/commands/demo.py", None): "the environment of a child process",
}


def environ_uses(path: Path) -> list[tuple[str | None, int]]:
    """Every use of the process environment in a module: (the key when it is a constant, line)."""
    tree = ast.parse(path.read_text())
    uses: list[tuple[str | None, int]] = []
    handled: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                if alias.name in ("environ", "getenv", "environb", "getenvb"):
                    uses.append((None, node.lineno))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and _is_os_environ(node.func.value)
        ):
            handled.add(id(node.func.value))
            first = node.args[0] if node.args else None
            key = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
            uses.append((key, node.lineno))
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value):
            handled.add(id(node.value))
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            uses.append((key, node.lineno))
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ("getenv", "getenvb", "environb")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            uses.append((None, node.lineno))
    for node in ast.walk(tree):
        if _is_os_environ(node) and id(node) not in handled:
            uses.append((None, node.lineno))
    return uses


def test_the_environment_use_finder_sees_every_form(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import os\nfrom os import getenv\n"
        'a = os.environ.get("A")\nb = os.environ["B"]\nc = os.getenv("C")\nd = dict(os.environ)\n'
        'os.environ.setdefault("E", "1")\n'
    )
    uses = environ_uses(module)
    assert sorted(uses, key=lambda u: u[1]) == [(None, 2), ("A", 3), ("B", 4), (None, 5), (None, 6), ("E", 7)]


def test_the_site_reads_the_environment_only_in_its_settings():
    found = []
    for package in ("leaderboard", "probebench"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative == "probebench/settings.py":
                continue
            for key, line in environ_uses(path):
                if (relative, key) in ALLOWED or (relative, None) in ALLOWED:
                    continue
                found.append(f"{relative}:{line} ({key or 'os.environ'})")
    assert not found, (
        "read the setting from django.conf.settings (and the variable in probebench/settings.py, "
        f"documented in docs/CONFIGURATION.md): {found}"
    )
    # the checker does look: the Celery app's DJANGO_SETTINGS_MODULE default is a use it finds
    assert any(key == "DJANGO_SETTINGS_MODULE" for key, _ in environ_uses(ROOT / "probebench" / "celery.py"))


def test_the_documented_evaluator_variables_are_the_ones_it_reads():
    """The evaluator's command line reads a few variables (it takes no Django settings); each one is
    documented under its own heading."""
    names: set[str] = set()
    for path in (ROOT / "evaluator").rglob("*.py"):
        names |= variables_read(path.read_text())
    assert "PROBEBENCH_TOKEN" in names
    documented = CONFIGURATION.read_text()
    section = documented[documented.index("### The evaluator's command line") :]
    missing = sorted(name for name in names if f"`{name}`" not in section)
    assert not missing, f"read by evaluator/, not documented in docs/CONFIGURATION.md: {missing}"
