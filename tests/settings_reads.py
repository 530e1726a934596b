"""The params.yaml keys a module reads, derived from its code (statically, with `ast`).

A read is an attribute chain on a settings object, taken as far as it names settings fields:
`settings.scores.max_failure_share` reads ``scores.max_failure_share``; `settings.scores`
handed on whole reads ``scores``; `analysis.min_ci_groups` reads ``analysis.min_ci_groups``
where `analysis` is a parameter annotated `AnalysisSettings`. A settings object is a name
annotated with `Settings` or a section's class (a parameter, or an annotated assignment),
`self.settings`, or any name `settings` (the code's own convention). A call of a `Settings`
method reads what the method's body reads through `self` (`settings.model(name)` reads
``models``); `models_called("scores")` reads what its branch for that stage reads.

The unit is the function: a module that a stage imports counts with all its functions, called
or not (tests/unit/test_stage_table.py excuses, with a reason, the reads of functions that a
stage imports but never runs). Reads inside `judgelab.config` are the settings' own validation.
"""

from __future__ import annotations

import ast
import functools
import typing
from pathlib import Path

from pydantic import BaseModel

from judgelab.config import Settings

SETTINGS_PY = Path(__file__).resolve().parents[1] / "src/judgelab/config/settings.py"


@functools.cache
def section_paths() -> dict[str, str]:
    """Settings class name -> its dotted params.yaml path (`CodeIOSettings` -> `tasks.codeio`;
    `Settings` -> "")."""
    paths = {"Settings": ""}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            for t in (field.annotation, *typing.get_args(field.annotation)):
                if isinstance(t, type) and issubclass(t, BaseModel):
                    paths.setdefault(t.__name__, prefix + name)
                    walk(t, f"{prefix}{name}.")

    walk(Settings, "")
    return paths


def _section(model: type[BaseModel], name: str) -> type[BaseModel] | bool | None:
    """The section class of `model`'s field `name`; True for a leaf; None: no such field."""
    field = model.model_fields.get(name)
    if field is None:
        return None
    for t in (field.annotation, *typing.get_args(field.annotation)):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return True


def _model_at(path: str) -> type[BaseModel]:
    model: type[BaseModel] = Settings
    for part in filter(None, path.split(".")):
        sub = _section(model, part)
        assert isinstance(sub, type), path
        model = sub
    return model


def resolve(root: str, attrs: list[str]) -> str | None:
    """The longest settings path from section `root` along `attrs`; None when the first
    attribute is no field (a method, a property)."""
    model: type[BaseModel] | bool = _model_at(root)
    path = root
    for attr in attrs:
        sub = _section(model, attr) if isinstance(model, type) else None
        if sub is None:
            break
        path = f"{path}.{attr}" if path else attr
        model = sub
    return None if path == root else path


def chain(node: ast.AST) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"] when the base is a name, else None."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return [node.id, *reversed(attrs)] if isinstance(node, ast.Name) else None


def _outer_chains(tree: ast.AST) -> list[tuple[ast.Attribute, list[str]]]:
    """Each attribute chain of `tree` taken whole (`a.b.c`, not also its `a.b`)."""
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    return [
        (n, c)
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and id(n) not in inner and (c := chain(n))
    ]


def _annotated_section(annotation: ast.AST | None) -> str | None:
    """The settings path of the class an annotation names (`Settings`, `X | None`, "X")."""
    for n in ast.walk(annotation) if annotation is not None else ():
        text = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else ""
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            text = n.value
        for word in text.replace("|", " ").split():
            if word in section_paths():
                return section_paths()[word]
    return None


@functools.cache
def method_reads() -> dict[str, frozenset[str]]:
    """`Settings` method -> the keys its body reads through `self` (and the methods it calls);
    "models_called:<stage>" -> what that stage's branch of `models_called` reads."""
    tree = ast.parse(SETTINGS_PY.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Settings")
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}

    def reads(node: ast.AST, seen: tuple[str, ...] = ()) -> set[str]:
        found: set[str] = set()
        for _, c in _outer_chains(node):
            if c[0] == "self" and len(c) > 1:
                if (key := resolve("", c[1:])) is not None:
                    found.add(key)
                elif c[1] in methods and c[1] not in seen:
                    found |= reads(methods[c[1]], (*seen, c[1]))
            elif c[0] == "autorl":  # models_called's alias of self.tasks.autorl
                found.add(resolve("tasks.autorl", c[1:]) or "tasks.autorl")
        return found

    out = {name: frozenset(reads(f, (name,))) for name, f in methods.items()}
    called = methods["models_called"]
    table = next(n.value for n in ast.walk(called) if isinstance(n, ast.AnnAssign))
    assert isinstance(table, ast.Dict)
    branches = {
        k.value: reads(v)
        for k, v in zip(table.keys, table.values, strict=True)
        if isinstance(k, ast.Constant)
    }
    # called["pipeline"]: the models of the stages its tuple names
    pipeline = next(
        n
        for n in ast.walk(called)
        if isinstance(n, ast.Tuple) and all(isinstance(e, ast.Constant) for e in n.elts)
    )
    stages = [e.value for e in pipeline.elts if isinstance(e, ast.Constant)]
    branches["pipeline"] = set().union(*(branches[s] for s in stages))
    out |= {f"models_called:{stage}": frozenset(keys) for stage, keys in branches.items()}
    return out


def _typed_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """Names in `fn` that hold settings -> their section's path ("" for `Settings`)."""
    typed = {"settings": ""}
    args = fn.args
    for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if (path := _annotated_section(a.annotation)) is not None:
            typed[a.arg] = path
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and (path := _annotated_section(node.annotation)) is not None
        ):
            typed[node.target.id] = path
    return typed


def reads_of(tree: ast.AST) -> set[str]:
    """The keys the functions of a module's `tree` read (module docstring)."""
    keys: set[str] = set()
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for fn in (n for n in ast.walk(tree) if isinstance(n, functions)):
        typed = _typed_names(fn)
        literal = {
            id(n.func): n.args[0].value
            for n in ast.walk(fn)
            if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant)
        }
        for node, (base, *attrs) in _outer_chains(fn):
            if base == "self" and attrs[:1] == ["settings"]:
                base, attrs = "settings", attrs[1:]
            if base not in typed or not attrs:
                continue
            if (key := resolve(typed[base], attrs)) is not None:
                keys.add(key)
            elif typed[base] == "" and attrs[0] == "models_called":
                branch = f"models_called:{literal.get(id(node), '')}"  # none named: any
                every = [v for k, v in method_reads().items() if k.startswith("models_called:")]
                keys |= {"models", *method_reads().get(branch, frozenset().union(*every))}
            elif typed[base] == "" and attrs[0] in method_reads():
                keys |= method_reads()[attrs[0]]
    return keys


def read_by(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Key -> the modules (of `modules`, name -> file) that read it; `judgelab.config`'s own
    reads left out."""
    found: dict[str, set[str]] = {}
    for name, path in sorted(modules.items()):
        if name == "judgelab.config" or name.startswith("judgelab.config."):
            continue
        for key in reads_of(ast.parse(path.read_text(encoding="utf-8"))):
            found.setdefault(key, set()).add(name.removeprefix("judgelab."))
    return found
