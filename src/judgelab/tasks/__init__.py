"""Task sources: HumanEval problems (with tests), your own task files (`files`) and AutoRL
requests the policy writes."""

from __future__ import annotations

import polars as pl

from judgelab.errors import ConfigError
from judgelab.schemas import TasksSchema, columns, validate
from judgelab.verdicts import Task


def tasks_frame(tasks: list[Task]) -> pl.DataFrame:
    first: dict[str, str] = {}
    for t in tasks:
        if t.task_id in first:
            raise ConfigError(
                f"task_id {t.task_id!r} comes from two task sources ({first[t.task_id]} and "
                f"{t.source}): task ids must be unique"
            )
        first[t.task_id] = t.source
    schema = columns(TasksSchema)
    rows = [{c: getattr(t, c) for c in schema} for t in tasks]
    return validate(pl.DataFrame(rows, schema=schema), TasksSchema, "tasks table")


def tasks_from_frame(frame: pl.DataFrame) -> list[Task]:
    names = columns(TasksSchema).names()
    return [Task(**{c: row[c] for c in names}) for row in frame.iter_rows(named=True)]
