"""`judgelab.analysis` computes, `judgelab.report` writes: the report layer imports analysis,
never the reverse, and nothing in analysis draws or writes files. The CI rule reaches every
function as one object (`stats.CIRule`): no function takes the minimum of groups as a default
argument."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_layering import LIBRARY, imported, modules

ANALYSIS = LIBRARY / "analysis"
REPORT = LIBRARY / "report"


def _imports(folder: Path, prefixes: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(folder.parent)}:{line} imports {name}"
        for path in modules(folder)
        for line, name in imported(path)
        if name.startswith(prefixes)
    ]


def test_analysis_imports_nothing_of_the_report_layer() -> None:
    assert modules(ANALYSIS) and modules(REPORT)
    assert _imports(ANALYSIS, ("judgelab.report",)) == []


def test_analysis_neither_draws_nor_writes() -> None:
    assert _imports(ANALYSIS, ("matplotlib", "judgelab.io")) == []


def test_the_checker_sees_a_report_import(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def f():\n    from judgelab.report.format import fmt_ci\n")
    assert _imports(tmp_path, ("judgelab.report",)) == [
        f"{tmp_path.name}/m.py:2 imports judgelab.report.format"
    ]


CI_PARAMETERS = {"min_ci_groups", "n_boot", "rule"}


def _defaulted_ci_parameters(folder: Path) -> list[str]:
    found = []
    for path in modules(folder):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            positional = args.posonlyargs + args.args
            defaulted = positional[len(positional) - len(args.defaults) :]
            defaulted += [
                a for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
            ]
            found += [
                f"{path.name}:{node.lineno} {node.name}({a.arg}=...)"
                for a in defaulted
                if a.arg in CI_PARAMETERS
            ]
    return found


def test_no_ci_minimum_is_a_default_argument(tmp_path: Path) -> None:
    assert _defaulted_ci_parameters(ANALYSIS) == []
    assert _defaulted_ci_parameters(REPORT) == []
    (tmp_path / "m.py").write_text("def f(x, *, min_ci_groups=5):\n    return x\n")
    assert _defaulted_ci_parameters(tmp_path) == ["m.py:1 f(min_ci_groups=...)"]
