"""The app's modules import each other in one order: no cycle, counting every import that runs
(top-level and inside functions; in the leaderboard ``if TYPE_CHECKING:`` blocks, which never run,
are left out; in the evaluator they count too, so its layers hold for annotations as well).
import-linter (``make lint``) checks the named layers; this test checks that no function-level
import hides a cycle the layers would not see, and that imports stay at the top of modules."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("evaluator", "leaderboard", "probebench")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT).with_suffix("")
            if "migrations" in rel.parts:
                continue
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (annotations only, never executed)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def _imports(path: Path, module: str, known: set[str], type_checking: bool = False) -> set[str]:
    """Every app module ``module`` imports, wherever the import statement is (under
    ``if TYPE_CHECKING:`` too when ``type_checking``)."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = set() if type_checking else _type_checking_only(tree)
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's own package
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:
                    out.add(sub)  # from package import module
                elif target in known:
                    out.add(target)
    out.discard(module)
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: _imports(path, name, set(modules), type_checking=name.split(".")[0] == "evaluator")
        for name, path in modules.items()
    }


def _function_level_project_imports() -> list[str]:
    """``path:line`` of each import statement of an app module made inside a function."""
    found = []
    for path in _modules().values():
        tree = ast.parse(path.read_text(), filename=str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom):
                    names = [node.module or ""] if not node.level else [PACKAGES[0]]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                if any(name.split(".")[0] in PACKAGES for name in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return sorted(set(found))


def test_the_app_modules_import_each_other_without_a_cycle():
    graph = import_graph()
    assert "leaderboard.services.lifecycle" in graph and "leaderboard.selectors.board" in graph
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_the_cycle_finder_finds_a_function_level_cycle(tmp_path):
    """The check above would catch the old shape (a service importing the tasks inside a function,
    the tasks importing the service)."""
    pkg = tmp_path / "app"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "services.py").write_text("def dispatch():\n    from app.tasks import run\n    run()\n")
    (pkg / "tasks.py").write_text("from app import services\n\ndef run():\n    pass\n")
    known = {"app", "app.services", "app.tasks"}
    graph = {m: _imports(pkg / (m.split(".", 1)[1] + ".py"), m, known) for m in ("app.services", "app.tasks")}
    graph["app"] = set()
    assert _cycle(graph) == ["app.services", "app.tasks", "app.services"]


def test_selectors_and_the_evaluator_import_no_writer():
    graph = import_graph()
    for module, targets in graph.items():
        if module.startswith("leaderboard.selectors"):
            assert not {t for t in targets if t.startswith("leaderboard.services")}, module
        if module.startswith("evaluator"):
            assert not {t for t in targets if t.startswith(("leaderboard", "probebench"))}, module


#: imports of app modules made inside functions, at most (each kept one says why: a test replaces
#: the function it imports, or the import would load Django or torch where it is not wanted)
MAX_FUNCTION_LEVEL_IMPORTS = 60


def test_imports_of_app_modules_stay_at_the_top_of_modules():
    found = _function_level_project_imports()
    assert len(found) <= MAX_FUNCTION_LEVEL_IMPORTS, found


def test_the_evaluator_counts_type_checking_imports_in_its_graph(tmp_path):
    """An annotation-only import back up the layers is a cycle too (the old shape: applicability
    annotated with the probe metadata type, probes importing applicability)."""
    (tmp_path / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app import b\n"
    )
    known = {"app.a", "app.b"}
    assert _imports(tmp_path / "a.py", "app.a", known, type_checking=True) == {"app.b"}
    assert _imports(tmp_path / "a.py", "app.a", known) == set()


#: the evaluator's modules have at most this many lines
MAX_MODULE_LINES = 700
#: the modules not yet split, each held at its size today
LONGER_FOR_NOW = {}


def test_no_evaluator_module_is_longer_than_the_limit():
    long = {}
    for path in _modules().values():
        rel = str(path.relative_to(ROOT))
        if not rel.startswith("evaluator/"):
            continue
        lines = len(path.read_text().splitlines())
        if lines > LONGER_FOR_NOW.get(rel, MAX_MODULE_LINES):
            long[rel] = lines
    assert not long, long
