"""`judgelab.analysis` computes, `judgelab.report` writes: the report layer imports analysis,
never the reverse, and nothing in analysis draws or writes files."""

from __future__ import annotations

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
