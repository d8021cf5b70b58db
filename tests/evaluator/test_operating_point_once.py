"""The 1% FPR operating point is written once, ``evaluator.metrics.metric_table.OPERATING_FPR``:
Recall@1%FPR (measure), the stress splits, the attack and the reliability diagnostics import it,
and no other evaluator module gives a false-positive rate a number of its own."""

from __future__ import annotations

import ast
from pathlib import Path

from evaluator.metrics import metric_table

ROOT = Path(__file__).resolve().parents[2]
HOME = "evaluator/metrics/metric_table.py"
#: the modules that fix a threshold at the operating point
USERS = (
    "evaluator/axes/stress.py",
    "evaluator/axes/attack.py",
    "evaluator/metrics/measure.py",
    "evaluator/metrics/metrics.py",
    "evaluator/commands/reliability.py",
)


def _is_number(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    )


def fpr_numbers(source: str) -> list[str]:
    """Where ``source`` writes a false-positive rate as a number: a name with "fpr" in it assigned
    a number, a parameter with "fpr" in it defaulting to one, or a number passed to a function
    with "fpr" in its name (``threshold_at_fpr(negatives, 0.01)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and "fpr" in target.id.lower() and _is_number(node.value):
                    found.append(f"{node.lineno}: {target.id} = {ast.unparse(node.value)}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args
            defaults = [None] * (len(args) - len(node.args.defaults)) + list(node.args.defaults)
            pairs = list(zip(args, defaults, strict=True)) + list(
                zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
            )
            for arg, default in pairs:
                if "fpr" in arg.arg.lower() and _is_number(default):
                    found.append(f"{node.lineno}: {node.name}({arg.arg}={ast.unparse(default)})")
        elif isinstance(node, ast.Call):
            name = ast.unparse(node.func).rsplit(".", 1)[-1]
            if "fpr" in name.lower() and any(
                _is_number(a) for a in node.args + [k.value for k in node.keywords]
            ):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_operating_point_is_one_percent_and_defined_in_the_metric_table():
    assert metric_table.OPERATING_FPR == 0.01
    [only] = fpr_numbers((ROOT / HOME).read_text())
    assert only.endswith(": OPERATING_FPR = 0.01")


def test_no_other_evaluator_module_writes_a_false_positive_rate():
    found = {}
    for path in sorted((ROOT / "evaluator").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel != HOME and (hits := fpr_numbers(path.read_text())):
            found[rel] = hits
    assert not found, found


def test_the_modules_at_the_operating_point_import_it_from_the_metric_table():
    for rel in USERS:
        tree = ast.parse((ROOT / rel).read_text())
        imported = any(
            isinstance(node, ast.ImportFrom)
            and node.module == "evaluator.metrics.metric_table"
            and any(alias.name == "OPERATING_FPR" for alias in node.names)
            for node in tree.body
        )
        used = any(isinstance(node, ast.Name) and node.id == "OPERATING_FPR" for node in ast.walk(tree))
        assert imported and used, rel


def test_the_scan_finds_each_old_shape():
    """The shapes the operating point had before it had one home."""
    assert fpr_numbers("FPR = 0.01\n") == ["1: FPR = 0.01"]
    assert fpr_numbers("FPR_TARGET: float = 0.01\n") == ["1: FPR_TARGET = 0.01"]
    assert fpr_numbers("def threshold_at_fpr(neg, fpr: float = 0.01):\n    pass\n") == [
        "1: threshold_at_fpr(fpr=0.01)"
    ]
    assert fpr_numbers("t = threshold_at_fpr(neg, 0.01)\n") == ["1: threshold_at_fpr(neg, 0.01)"]
    assert fpr_numbers("t = m.threshold_at_fpr(neg, fpr=0.01)\n") == ["1: m.threshold_at_fpr(neg, fpr=0.01)"]
    assert fpr_numbers("t = threshold_at_fpr(neg, OPERATING_FPR)\n") == []
