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

A task without tests can be judged but has no execution truth. Any other field is an error,
and every error names the file, the line or row, and the field. The tests run only in the
sandbox, as HumanEval's do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from judgelab.errors import ConfigError
from judgelab.io import read_records
from judgelab.tasks.loaded import Loaded
from judgelab.verdicts import Task

SOURCE = "custom"


class IOCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: list[Any] | dict[str, Any] = Field(
        description="The arguments: a list (positional) or an object (by name)."
    )
    output: Any = Field(description="The value the call must return (==).")

    @field_validator("input", mode="before")
    @classmethod
    def _list_or_object(cls, value: Any) -> Any:
        if not isinstance(value, list | dict):
            raise PydanticCustomError(
                "list_type", "Input should be a valid list (or an object of named arguments)"
            )
        return value


class TaskRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1)
    request: str = Field(min_length=1)
    prompt: str | None = Field(None, min_length=1)
    entry_point: str | None = None
    test: str | None = Field(None, min_length=1)
    tests: list[IOCase] | None = Field(None, min_length=1)
    canonical_solution: str | None = None

    @model_validator(mode="after")
    def _tests_need_an_entry_point(self) -> TaskRow:
        if self.test is not None and self.tests is not None:
            raise ValueError("give `test` (a check function) or `tests` (pairs), not both")
        if self.entry_point is not None and not self.entry_point.isidentifier():
            raise ValueError(f"entry_point {self.entry_point!r} is not a Python name")
        if (self.test is not None or self.tests is not None) and self.entry_point is None:
            raise ValueError("entry_point is required with `test` or `tests`")
        return self

    def task(self) -> Task:
        test = self.test
        if self.tests is not None:
            assert self.entry_point is not None
            test = check_function(self.entry_point, self.tests)
        return Task(
            task_id=self.task_id,
            source=SOURCE,
            request=self.request,
            prompt=self.prompt or self.request,
            entry_point=self.entry_point,
            test=test,
            canonical_solution=self.canonical_solution,
        )


def check_function(entry_point: str, cases: list[IOCase]) -> str:
    """HumanEval's ``check(candidate)`` for input/output pairs: each call (``candidate(*args)``
    for a list, ``candidate(**args)`` for an object) must return a value equal (==) to its
    output; the first that does not fails with what it returned."""
    pairs = repr([(case.input, case.output) for case in cases])
    return (
        "def check(candidate):\n"
        f"    for i, (args, expected) in enumerate({pairs}):\n"
        "        got = candidate(**args) if isinstance(args, dict) else candidate(*args)\n"
        "        shown = args if isinstance(args, dict) else tuple(args)\n"
        "        assert got == expected, (\n"
        f'            f"case {{i}}: {entry_point}{{shown!r}} returned {{got!r}}, "\n'
        '            f"expected {expected!r}"\n'
        "        )\n"
    )


def load_task_file(path: Path, where: str) -> list[Task]:
    """The tasks in one file; `where` names the setting (e.g. ``tasks.files[0]``)."""
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for place, record in read_records(path, where):
        if not isinstance(record, dict):
            raise ConfigError(f"{where} ({path}) {place}: a task is a JSON object")
        if isinstance(record.get("tests"), str):  # parquet: the pairs as a JSON string
            try:
                record = {**record, "tests": json.loads(record["tests"])}
            except json.JSONDecodeError as err:
                raise ConfigError(
                    f"{where} ({path}) {place}: field 'tests': not JSON: {err.msg}"
                ) from None
        record = {k: v for k, v in record.items() if v is not None}
        try:
            row = TaskRow.model_validate(record)
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "<row>"
            raise ConfigError(
                f"{where} ({path}) {place}: field {field!r}: {first['msg']}"
            ) from None
        if row.task_id in seen:
            raise ConfigError(
                f"{where} ({path}) {place}: task_id {row.task_id!r} already at {seen[row.task_id]}"
            )
        seen[row.task_id] = place
        tasks.append(row.task())
    if not tasks:
        raise ConfigError(f"{where} ({path}): the file holds no tasks")
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
