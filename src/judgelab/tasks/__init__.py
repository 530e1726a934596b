"""Task sources: HumanEval problems (with tests) and AutoRL requests the policy writes."""

from __future__ import annotations

import polars as pl

from judgelab.schemas import TasksSchema, validate
from judgelab.verdicts import Task

TASK_COLUMNS = {
    "task_id": pl.Utf8,
    "source": pl.Utf8,
    "request": pl.Utf8,
    "prompt": pl.Utf8,
    "entry_point": pl.Utf8,
    "test": pl.Utf8,
    "canonical_solution": pl.Utf8,
}


def tasks_frame(tasks: list[Task]) -> pl.DataFrame:
    rows = [{c: getattr(t, c) for c in TASK_COLUMNS} for t in tasks]
    return validate(pl.DataFrame(rows, schema=TASK_COLUMNS), TasksSchema, "tasks table")


def tasks_from_frame(frame: pl.DataFrame) -> list[Task]:
    return [Task(**{c: row[c] for c in TASK_COLUMNS}) for row in frame.iter_rows(named=True)]
