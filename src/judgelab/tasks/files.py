"""Your own coding tasks, from JSONL or parquet files (`tasks.files`): docs/TASKS.md.

One task per line (JSONL) or row (parquet). Fields:

- `task_id` (required, unique across every task source) and `request` (required): the user
  turn the policy sees.
- `prompt`: the code the tests import against (a signature and docstring, as HumanEval's);
  unset, the request.
- tests, optional, one of: `test`, Python source defining ``check(candidate)`` (HumanEval's
  form), or `tests`, input/output pairs ``[{"input": [args...], "output": value}]`` from which
  judgelab writes that check. Either needs `entry_point`, the function the tests call.
- `canonical_solution`: optional, kept for reference.
- `float_tolerance`: optional, with `tests` only: the relative tolerance within which a
  returned number answers an expected float (default 1e-6, with 1e-9 absolute); integers,
  booleans and text always compare exactly (judgelab.sandbox.compare).

A task without tests can be judged but has no execution truth. Any other field is an error,
and every error names the file, the line or row, and the field. The tests run only in the
sandbox, as HumanEval's do.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from judgelab.errors import ConfigError
from judgelab.io import validated_record, validated_records
from judgelab.sandbox.compare import REL_TOL
from judgelab.tasks.loaded import Loaded
from judgelab.verdicts import Task

SOURCE = "files"


class IOCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: Any = Field(
        description="The arguments: a list of positional ones or an object of keyword ones."
    )
    output: Any = Field(
        description="The value the call must return, compared as judgelab.sandbox.compare.same "
        "says: integers, booleans and text exactly, a float within the task's float_tolerance."
    )

    @field_validator("input")
    @classmethod
    def _arguments(cls, value: Any) -> list[Any] | dict[str, Any]:
        if isinstance(value, list) or (
            isinstance(value, dict) and all(isinstance(k, str) and k.isidentifier() for k in value)
        ):
            return value
        raise ValueError(
            "input must be a list of positional arguments or an object of keyword arguments "
            f"(got {type(value).__name__})"
        )


class TaskRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1)
    request: str = Field(min_length=1)
    prompt: str | None = Field(None, min_length=1)
    entry_point: str | None = None
    test: str | None = Field(None, min_length=1)
    tests: list[IOCase] | None = Field(None, min_length=1)
    canonical_solution: str | None = None
    float_tolerance: float | None = Field(
        None, gt=0, lt=1,
        description="With `tests`: the relative tolerance within which a number answers an "
        "expected float (unset: 1e-6). Integers, booleans and text compare exactly.",
    )  # fmt: skip

    @model_validator(mode="after")
    def _tests_need_an_entry_point(self) -> TaskRow:
        if self.test is not None and self.tests is not None:
            raise ValueError("give `test` (a check function) or `tests` (pairs), not both")
        if self.float_tolerance is not None and self.tests is None:
            raise ValueError("float_tolerance applies to `tests` (pairs) only")
        if self.entry_point is not None and not self.entry_point.isidentifier():
            raise ValueError(f"entry_point {self.entry_point!r} is not a Python name")
        if (self.test is not None or self.tests is not None) and self.entry_point is None:
            raise ValueError("entry_point is required with `test` or `tests`")
        return self

    def task(self) -> Task:
        test = self.test
        if self.tests is not None:
            assert self.entry_point is not None
            test = check_function(self.entry_point, self.tests, self.float_tolerance)
        return Task(
            task_id=self.task_id,
            source=SOURCE,
            request=self.request,
            prompt=self.prompt or self.request,
            entry_point=self.entry_point,
            test=test,
            canonical_solution=self.canonical_solution,
        )


def check_function(entry_point: str, cases: list[IOCase], rel_tol: float | None = None) -> str:
    """HumanEval's ``check(candidate)`` for input/output pairs: each call (``candidate(*args)``
    for a list, ``candidate(**args)`` for an object) must return a value equal (==) to its
    output; the first that does not fails with what it returned. Pairs of positional
    arguments only give the text they always gave (a table's md5 does not move); a float
    tolerance other than the default (`rel_tol`) is a first line of its own (`io_tolerance`).

    The execution evaluator does not run this text: it recognises it (`io_cases`), calls the
    candidate in the sandbox and compares the returned values itself. The text stays a
    working check for anyone who runs the tests table with HumanEval's own harness."""
    pairs = repr([(case.input, case.output) for case in cases])
    if any(isinstance(case.input, dict) for case in cases):
        call = (
            "        got = candidate(**args) if isinstance(args, dict) else candidate(*args)\n"
            "        shown = args if isinstance(args, dict) else tuple(args)\n"
        )
        shown = "shown"
    else:
        call, shown = "        got = candidate(*args)\n", "tuple(args)"
    header = "" if rel_tol is None else f"{_TOLERANCE}{rel_tol!r}\n"
    return (
        f"{header}def check(candidate):\n"
        f"    for i, (args, expected) in enumerate({pairs}):\n"
        f"{call}"
        "        assert got == expected, (\n"
        f'            f"case {{i}}: {entry_point}{{{shown}!r}} returned {{got!r}}, "\n'
        '            f"expected {expected!r}"\n'
        "        )\n"
    )


_TOLERANCE = "# judgelab float tolerance: "
_CHECK_FUNCTION = re.compile(
    r"(?:# judgelab float tolerance: (?P<tol>[0-9.e+-]+)\n)?"
    r"def check\(candidate\):\n    for i, \(args, expected\) in enumerate\((?P<pairs>.*)\):\n"
    r"        got = ",
    re.DOTALL,
)


def io_cases(test: str | None) -> list[tuple[Any, Any]] | None:
    """The (arguments, output) pairs of a `check_function` text, or None for any other test
    (or one whose values Python's literal syntax cannot spell back, such as nan)."""
    match = _CHECK_FUNCTION.match(test or "")
    if match is None:
        return None
    try:
        pairs = ast.literal_eval(match["pairs"])
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return None
    if not isinstance(pairs, list) or not _rebuilds(test, pairs):
        return None
    return [(args, output) for args, output in pairs]


def _rebuilds(test: str | None, pairs: list[tuple[Any, Any]]) -> bool:
    """True when `check_function` writes exactly `test` back from `pairs` (for some entry
    point): a test that only resembles its shape is run as written."""
    match = re.search(r'f"case \{i\}: (\w+)\{', test or "")
    if match is None:
        return False
    cases = [IOCase.model_construct(input=a, output=o) for a, o in pairs]
    tolerance = io_tolerance(test) if (test or "").startswith(_TOLERANCE) else None
    return check_function(match[1], cases, tolerance) == test


def io_tolerance(test: str | None) -> float:
    """The relative float tolerance a `check_function` text states (its first line), else the
    default, judgelab.sandbox.compare.REL_TOL."""
    match = _CHECK_FUNCTION.match(test or "")
    if match is None or match["tol"] is None:
        return REL_TOL
    try:
        return float(match["tol"])
    except ValueError:
        return REL_TOL


def load_task_file(path: Path, where: str) -> list[Task]:
    """The tasks in one file; `where` names the setting (e.g. ``tasks.files[0]``)."""
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for place, row in validated_records(path, where, TaskRow, "a task", "tests"):
        if row.task_id in seen:
            raise ConfigError(
                f"{where} ({path}) {place}: task_id {row.task_id!r} already at {seen[row.task_id]}"
            )
        seen[row.task_id] = place
        tasks.append(row.task())
    if not tasks:
        raise ConfigError(f"{where} ({path}): the file holds no tasks")
    return tasks


def tasks_from_records(records: Iterable[Any], where: str = "tasks") -> list[Task]:
    """Tasks given in memory (the Python API): each record a mapping with a task file's
    fields, or a `Task`; errors name `where`, the record's index and the field."""
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for i, record in enumerate(records):
        task = record if isinstance(record, Task) else None
        if task is None:
            task = validated_record(record, TaskRow, f"{where}[{i}]", "a task").task()
        if task.task_id in seen:
            raise ConfigError(
                f"{where}[{i}]: task_id {task.task_id!r} already at {where}[{seen[task.task_id]}]"
            )
        seen[task.task_id] = i
        tasks.append(task)
    if not tasks:
        raise ConfigError(f"{where}: no tasks given")
    return tasks


def load_task_files(files: list[str], root: Path) -> list[Task]:
    """Every `tasks.files` entry (relative to the project root), in order."""
    tasks: list[Task] = []
    for i, name in enumerate(files):
        path = Path(name) if Path(name).is_absolute() else root / name
        tasks += load_task_file(path, f"tasks.files[{i}]")
    return tasks


def files_source(files: list[str], root: Path) -> Loaded:
    """The task-source loader (`judgelab.tasks.registry`)."""
    return Loaded(load_task_files(files, root))
