"""The import graph of src/ (judgelab, its flows, judgelab_cli): no cycle, no upward import,
and every DVC stage depends on each module its flow imports.

The graph has an edge a -> b for every import statement in a that names module b (resolved
to the longest module path the checkout has), wherever it sits: at the top, inside a
function (lazy) or under TYPE_CHECKING; and for a file "b.py" beside a that a names (a runs
it as a program: the sandbox's launcher, the runners of a test run). Importing a.b.c also runs
the `__init__` of a and a.b; those implicit edges are left out of the cycle check (a
package's `__init__` importing its own modules is no cycle) and kept in the dependency check
(their code runs).

Layers, from the bottom:
  0. foundation: `FOUNDATION`, modules that import no other judgelab module outside it;
  1. settings: `judgelab.config` (params.yaml -> typed settings, each evaluator kind's
     included; the config never imports an evaluator's implementation or the registry);
  2. the rest of the library, `judgelab` (its `__init__` exports the Python API lazily);
  3. `judgelab.flows` (one Prefect flow per stage, the stage table);
  4. `judgelab_cli` (what starts flows).
An upward import is an edge from a module to one of a higher layer.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from tests import floorplan

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (ROOT / "src" / "judgelab", ROOT / "src" / "judgelab_cli")

FOUNDATION = frozenset(
    "judgelab." + name
    for name in (
        "advantage", "answer", "cache", "env", "errors", "extras", "hardware", "io", "lifetime",
        "paths", "progress", "verdicts",
    )
)  # fmt: skip

# The flow module each DVC stage runs (judgelab.flows.stages.load_flow; test_stage_table.py checks
# that each stage depends on its flow's file).
FLOWS = {
    "tasks": "judgelab.flows.tasks",
    "rollouts": "judgelab.flows.rollouts",
    "scores": "judgelab.flows.scores",
    "training": "judgelab.flows.training",
    "analysis": "judgelab.flows.analysis",
    "probes": "judgelab.flows.probe",
}
# dvc file -> the prefix that makes a dep path relative to the project root
DVC_FILES = {
    Path("dvc.yaml"): "",
    Path("probes/dvc.yaml"): "",  # wdir: ..
    Path("reference/dvc.yaml"): "../",
}


def module_files(packages: Iterable[Path] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the packages."""
    out = {}
    for package in packages:
        for path in sorted(package.rglob("*.py")):
            parts = path.relative_to(package.parent).with_suffix("").parts
            out[".".join(parts).removesuffix(".__init__")] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(
    module: str, path: Path, modules: dict[str, Path], on_import: bool = False
) -> set[str]:
    """The modules of `modules` that `module`'s import statements name (any depth), and the
    files beside it that it runs as programs. `on_import`: only those that importing the
    module runs, without the lazy exports of a module-level `__getattr__` (PEP 562), which
    run when one of its names is asked for."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    lazy = {
        id(inner)
        for node in tree.body
        if on_import and isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
        for inner in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in lazy:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            # `from a import b` names module a.b when there is one, else a
            names = [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # a file of its own folder that it reads and runs as a program (the sandbox's
            # launcher, the runners of a test run)
            if node.value.endswith(".py") and (path.parent / node.value).is_file():
                names = [f"{package}.{node.value.removesuffix('.py')}"]
            else:
                continue
        else:
            continue
        found |= {m for m in (_resolve(n, modules) for n in names) if m and m != module}
    return found


def build_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {m: imports_of(m, path, modules) for m, path in modules.items()}


def imported_by_name() -> dict[str, set[str]]:
    """The imports a registry makes from a name its settings give ("module:name"), which no
    import statement shows: the evaluator registry imports each kind's class, the task
    registry each source's loader."""
    from judgelab.config.evaluators import SETTINGS
    from judgelab.config.tasks import TASK_SOURCES

    loaders = [p for s in TASK_SOURCES.values() for p in (s.load, s.by_ids) if p is not None]
    return {
        "judgelab.evaluators.registry": {s.evaluator.partition(":")[0] for s in SETTINGS.values()},
        "judgelab.tasks.registry": {p.partition(":")[0] for p in loaders},
    }


@functools.cache
def graph() -> dict[str, set[str]]:
    edges = build_graph(module_files())
    for module, named in imported_by_name().items():
        edges[module] |= named
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def layer(module: str) -> int:
    top = module.split(".")[0]
    if top == "judgelab_cli":
        return 4
    if module == "judgelab.flows" or module.startswith("judgelab.flows."):
        return 3
    if module == "judgelab.config" or module.startswith("judgelab.config."):
        return 1
    return 0 if module in FOUNDATION else 2


def upward(edges: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
        for a, targets in edges.items()
        for b in targets
        if layer(b) > layer(a)
    )


# ------------------------------------------------------------------------ the checkout


def test_the_graph_covers_the_three_packages() -> None:
    edges = graph()
    assert {"judgelab.config", "judgelab.flows.stages", "judgelab_cli.main"} <= set(edges)
    assert "judgelab.config.evaluators" in edges["judgelab.config"]
    assert set(FOUNDATION) <= set(edges), sorted(set(FOUNDATION) - set(edges))


def test_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_no_upward_import() -> None:
    assert upward(graph()) == []


def test_the_sandbox_is_the_bottom_of_the_house() -> None:
    """Everything that runs code stands on judgelab.sandbox; it stands on nothing of ours."""
    edges = graph()
    inside = {m for m in edges if m.startswith("judgelab.sandbox")}
    assert {"judgelab.sandbox.run", "judgelab.sandbox.tester"} <= inside
    assert {m: sorted(edges[m] - inside) for m in inside if edges[m] - inside} == {}
    users = {m for m, deps in edges.items() if deps & inside and m not in inside}
    assert {"judgelab.evaluators.execution", "judgelab.tasks.codeio"} <= users


def test_the_evaluator_settings_import_nothing_else_of_the_evaluators() -> None:
    edges = graph()
    assert not {m for m in edges["judgelab.config.evaluators"] if m.startswith("judgelab.")}
    assert "judgelab.evaluators.registry" not in edges["judgelab.config"]


# ------------------------------------------------------------------------ the floor plan


def test_every_room_stands_on_a_floor_below_eleven_or_at_it() -> None:
    """Rooms (top-level modules and packages) never import each other in a circle, and the
    house is at most 11 floors high (12 before the task sources stopped importing the
    evaluators and the probes). The package's face (`judgelab`, which exports the Python
    API lazily) stands on the API, beside the CLI."""
    at = floorplan.floors(floorplan.room_edges(graph()))
    assert max(at.values()) <= 11, at
    assert at["judgelab.sandbox"] == 1 and at["judgelab_cli"] == max(at.values())
    assert at["judgelab"] == at["judgelab.api"] + 1 <= at["judgelab_cli"]


def test_the_task_sources_import_neither_evaluators_nor_probes() -> None:
    rooms = floorplan.room_edges(graph())
    assert not rooms["judgelab.tasks"] & {"judgelab.evaluators", "judgelab.probes"}
    assert "judgelab.analysis" not in rooms["judgelab.scoring"]


def test_the_floor_plan_in_the_docs_is_the_codes() -> None:
    text = floorplan.DOC.read_text()
    assert floorplan.rewrite(text, floorplan.table(graph())) == text, (
        "docs/ARCHITECTURE.md's floors are stale: .venv/bin/python tests/floorplan.py --write"
    )


def test_the_floor_plan_sees_a_circle_and_counts_floors() -> None:
    assert floorplan.floors({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == {"a": 2, "b": 1, "c": 3}
    with pytest.raises(ValueError, match="circle: a -> b -> a"):
        floorplan.floors({"a": {"b"}, "b": {"a"}})
    assert floorplan.room_edges({"judgelab.x.y": {"judgelab.z", "judgelab.x.w"}}) == {
        "judgelab.x": {"judgelab.z"}
    }


# ------------------------------------------------------------------------ the checker


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return build_graph(module_files([tmp_path / "pkg"]))


def test_the_checker_sees_lazy_relative_and_type_checking_imports(tmp_path: Path) -> None:
    edges = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "def f():\n    from pkg.b import x\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import c\n",
        "sub/__init__.py": "",
        "sub/c.py": "from .. import a\nimport os\nPROGRAM = 'd.py'\nOTHER = 'main.py'\n",
        "sub/d.py": "",
    })  # fmt: skip
    assert edges["pkg.a"] == {"pkg.b"}
    assert edges["pkg.b"] == {"pkg.sub.c"}
    assert edges["pkg.sub.c"] == {"pkg.a", "pkg.sub.d"}
    assert cycles(edges) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_the_checker_finds_an_upward_import() -> None:
    edges = {
        "judgelab.config": {"judgelab.evaluators.registry"},
        "judgelab.flows.x": {"judgelab.io"},
    }
    assert upward(edges) == [
        "judgelab.config (layer 1) imports judgelab.evaluators.registry (layer 2)"
    ]
    assert upward({"judgelab.scoring": {"judgelab.flows.paths"}}) != []
    assert upward({"judgelab.flows.paths": {"judgelab_cli.main"}}) != []
    assert upward({"judgelab.io": {"judgelab.config"}}) != []


# ------------------------------------------------------------------------ dvc code deps


def closure(start: str, edges: dict[str, set[str]], modules: dict[str, Path]) -> set[str]:
    """Every module that importing `start` runs: its imports, transitively, and the
    `__init__` of each package on the way that imports anything when it is imported (its
    lazy exports do not run: `judgelab`'s, the Python API)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo += edges[module]
        parent = module.rpartition(".")[0]
        while parent:
            if (
                parent in modules
                and parent not in seen
                and (eager := imports_of(parent, modules[parent], modules, on_import=True))
            ):
                seen.add(parent)
                todo += eager
            parent = parent.rpartition(".")[0]
    return seen


def uncovered(modules: Iterable[Path], deps: Iterable[str]) -> list[str]:
    """The files of `modules` that no dep (a file or a folder above it) covers."""
    dep_paths = [(ROOT / d).resolve() for d in deps]
    return sorted(
        str(path.relative_to(ROOT))
        for path in modules
        if not any(path == d or d in path.parents for d in dep_paths)
    )


def _stages() -> list[tuple[Path, str]]:
    return [
        (path, name)
        for path in DVC_FILES
        for name in yaml.safe_load((ROOT / path).read_text())["stages"]
    ]


def test_every_dvc_stage_names_its_flow() -> None:
    for path, name in _stages():
        assert name in FLOWS, f"{path}: stage {name} has no entry in FLOWS"
    assert set(FLOWS.values()) <= graph()["judgelab.flows.stages"]  # load_flow imports each


@pytest.mark.parametrize(("dvc_file", "name"), _stages(), ids=lambda v: str(v))
def test_a_stage_depends_on_every_module_its_flow_imports(dvc_file: Path, name: str) -> None:
    """A change to any module the stage's flow runs must rerun the stage."""
    modules = module_files()
    body = yaml.safe_load((ROOT / dvc_file).read_text())["stages"][name]
    prefix = DVC_FILES[dvc_file]
    deps = [
        d.removeprefix(prefix)
        for d in (e if isinstance(e, str) else next(iter(e)) for e in body["deps"])
        if d.startswith(prefix) and not d.startswith("data/")
    ]
    used = closure(FLOWS[name], graph(), modules)
    missing = uncovered((modules[m] for m in used), deps)
    assert missing == [], f"{dvc_file} stage {name} lacks deps: {missing}"


@pytest.mark.parametrize(("dvc_file", "name"), _stages(), ids=lambda v: str(v))
def test_a_stage_depends_on_no_module_its_flow_does_not_run(dvc_file: Path, name: str) -> None:
    """A change to a module the stage never runs must not rerun it: a code dep is a module the
    flow imports, or a folder of which it imports every module."""
    modules = module_files()
    used = {modules[m].resolve() for m in closure(FLOWS[name], graph(), modules)}
    body = yaml.safe_load((ROOT / dvc_file).read_text())["stages"][name]
    prefix = DVC_FILES[dvc_file]
    unused = {}
    for entry in (e if isinstance(e, str) else next(iter(e)) for e in body["deps"]):
        path = (ROOT / entry.removeprefix(prefix)).resolve()
        if entry.removeprefix(prefix).startswith("src/"):
            files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
            # a package's __init__ that imports nothing runs no code of ours worth a rerun
            files = [f for f in files if f.name != "__init__.py" or f in used]
            if missing := [str(f.relative_to(ROOT)) for f in files if f not in used]:
                unused[entry] = missing
    assert unused == {}, f"{dvc_file} stage {name} depends on modules it never runs"


def test_the_dependency_check_sees_a_missing_module() -> None:
    modules = module_files()
    used = closure("judgelab.flows.scores", graph(), modules)
    assert "judgelab.sandbox.tester" in used and "judgelab.flows.fanout" in used
    assert uncovered([modules["judgelab.sandbox.tester"]], ["src/judgelab/sandbox"]) == []
    assert uncovered([modules["judgelab.sandbox.tester"]], ["src/judgelab/evaluators"]) == [
        "src/judgelab/sandbox/tester.py"
    ]


# ------------------------------------------------- docs/ARCHITECTURE.md "Where do I add…"


def test_an_evaluator_kind_has_its_settings_and_its_class() -> None:
    from judgelab.config.evaluators import SETTINGS
    from judgelab.evaluators.base import Evaluator
    from judgelab.evaluators.registry import evaluator_class

    for kind, settings in SETTINGS.items():  # the settings name a class that scores them
        cls = evaluator_class(kind)
        assert issubclass(cls, Evaluator) and cls.__module__.startswith("judgelab.evaluators.")
        assert cls.protocol == settings.protocol, kind


def test_a_task_source_is_its_module_its_section_and_one_entry() -> None:
    from judgelab.config import TasksSettings
    from judgelab.tasks.registry import SOURCES

    for source in SOURCES:  # each registration names functions of judgelab.tasks
        assert source.name in TasksSettings.model_fields, source.name
        for function in (source.loader, source.by_ids):
            if function is not None:
                assert callable(function), source.name
                assert function.__module__.startswith("judgelab.tasks."), source.name
    assert SOURCES[0].loader is not None and SOURCES[-1].loader is None  # autorl has none


def test_a_probe_generator_is_named_in_the_settings() -> None:
    from judgelab.config import ATTACK_KINDS, PERTURBATION_KINDS
    from judgelab.config.probes import ATTACK_FAMILIES
    from judgelab.probes.attacks import ATTACKS
    from judgelab.rollouts.perturb import PERTURBATIONS

    assert tuple(PERTURBATIONS) == PERTURBATION_KINDS
    assert set(ATTACKS) == set(ATTACK_KINDS)
    # an attack's family is the config's, not read from its name
    assert {a.name: a.family for a in ATTACKS.values()} == {
        name: family for family, names in ATTACK_FAMILIES.items() for name in names
    }


def test_the_guide_names_the_registries_the_tests_hold() -> None:
    guide = (ROOT / "docs/ARCHITECTURE.md").read_text()
    table = guide.split("## Where do I add", 1)[1].split("\n## ", 1)[0]
    for name in ("`SETTINGS`", "`TASK_SOURCES`", "`SOURCES`", "`PERTURBATIONS`", "`ATTACKS`",
                 "`Settings.models_called`", "flows/stages.py"):  # fmt: skip
        assert name in table, name


MAX_FUNCTION_LINES = 60  # a function a reader holds in mind at once


def test_no_function_is_longer_than_sixty_lines() -> None:
    long = []
    for module, path in module_files().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{module}.{node.name}: {lines} lines")
    assert long == []


def test_a_report_module_named_as_an_analysis_module_renders_its_figures() -> None:
    """report/X.py and analysis/X.py share a name because they share a topic: analysis/X
    computes its figures, report/X writes them (one meaning in two layers, never two). Each
    such report module names the analysis module it renders in its docstring."""
    report, analysis = ROOT / "src/judgelab/report", ROOT / "src/judgelab/analysis"
    shared = sorted(p.stem for p in report.glob("*.py") if (analysis / p.name).exists())
    assert "training" in shared and "__init__" in shared
    unnamed = [
        name
        for name in shared
        if name != "__init__"
        and not re.search(
            rf"`(judgelab\.)?analysis\.{name}\b",
            ast.get_docstring(ast.parse((report / f"{name}.py").read_text())) or "",
        )
    ]
    assert unnamed == []
