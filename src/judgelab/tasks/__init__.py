"""Task sources (`judgelab.tasks.registry`): HumanEval problems (with tests), your own task
files (`files`), CodeI/O problems (`codeio`) and AutoRL requests the policy writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from judgelab.errors import ConfigError

if TYPE_CHECKING:
    import polars as pl

    from judgelab.verdicts import Task

# judgelab.schemas takes the valid sources from judgelab.tasks.registry, so the table helpers
# import it (and polars) when called: importing a source module must not import the schemas.


def tasks_frame(tasks: list[Task]) -> pl.DataFrame:
    import polars as pl

    from judgelab.schemas import TasksSchema, columns, validate

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
    from judgelab.schemas import TasksSchema, columns
    from judgelab.verdicts import Task

    names = columns(TasksSchema).names()
    return [Task(**{c: row[c] for c in names}) for row in frame.iter_rows(named=True)]
