"""The packages depend one way: judgelab (the library) <- judgelab.flows <- judgelab_cli (what
starts flows), and nothing is imported by a name held in a string. The flows ship inside the
judgelab package but stand above the rest of it: no other judgelab module imports them."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "src" / "judgelab"
FLOWS = LIBRARY / "flows"
CLI = ROOT / "src" / "judgelab_cli"


def modules(folder: Path) -> list[Path]:
    """The .py files under `folder`; the library's leave out its flows."""
    return sorted(p for p in folder.rglob("*.py") if folder != LIBRARY or FLOWS not in p.parents)


def within(name: str, packages: tuple[str, ...]) -> bool:
    """`judgelab.flows.stages` is within ("judgelab.flows",); `judgelab.flowsx` is not."""
    return any(name == p or name.startswith(p + ".") for p in packages)


def imported(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in the file, at any depth (lazy imports included)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def imports_of(folder: Path, packages: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in modules(folder)
        for line, name in imported(path)
        if within(name, packages)
    ]


def test_the_library_imports_neither_flows_nor_the_cli() -> None:
    assert modules(LIBRARY) and not set(modules(LIBRARY)) & set(modules(FLOWS))
    assert imports_of(LIBRARY, ("judgelab.flows", "judgelab_cli")) == []


def test_flows_do_not_import_the_cli() -> None:
    assert modules(FLOWS)
    assert imports_of(FLOWS, ("judgelab_cli",)) == []


def test_the_checker_sees_lazy_imports(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("def f():\n    from judgelab.flows.a import b\n    import judgelab_cli.y\n")
    assert [name for _, name in imported(sample)] == ["judgelab.flows.a", "judgelab_cli.y"]
    assert within("judgelab.flows.stages", ("judgelab.flows",))
    assert not within("judgelab.flowsheet", ("judgelab.flows",))


# The registries import the module a kind's or a source's registration names ("module:name"),
# because the config that holds the registration sits below them and must not import them;
# tests/unit/test_architecture.py (imported_by_name) adds those imports to the import graph.
# The reward kind imports the user's reward function its settings name (outside judgelab).
BY_NAME = {
    "src/judgelab/evaluators/registry.py",
    "src/judgelab/tasks/registry.py",
    "src/judgelab/evaluators/reward.py",
}


def test_nothing_but_the_registries_imports_by_string() -> None:
    found = []
    for path in modules(LIBRARY) + modules(FLOWS) + modules(CLI):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("import_module", "__import__"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} calls {name}")
    assert {f.split(":")[0] for f in found} == BY_NAME and len(found) == len(BY_NAME)


def test_importing_the_library_loads_neither_flows_nor_the_cli() -> None:
    """Every judgelab module, imported in a fresh interpreter; none pulls flows in."""
    names = sorted(
        ".".join(path.relative_to(LIBRARY.parent).with_suffix("").parts).removesuffix(".__init__")
        for path in modules(LIBRARY)
    )
    assert "judgelab.config" in names and "judgelab.scoring" in names
    script = (
        "import importlib, json, sys\n"
        f"names = {names!r}\n"
        "failed = {}\n"
        "for name in names:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as err:  # an optional extra (llama-cpp, ART's backend)\n"
        "        failed[name] = str(err)\n"
        "above = ('judgelab.flows', 'judgelab_cli')\n"
        "loaded = sorted(m for m in sys.modules if any(m == a or m.startswith(a + '.')\n"
        "                                             for a in above))\n"
        "print(json.dumps({'loaded': loaded, 'failed': failed}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["loaded"] == []
    # only the module that needs the `embedded` extra may be missing; the rest was imported
    assert set(result["failed"]) <= {"judgelab.models.llama_server"}, result["failed"]
