"""`judgelab validate scores PATH`: exit 0 on a valid table, non-zero with a clear message."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from judgelab.errors import TableError
from judgelab.schemas import ScoresSchema, TasksSchema, columns, validate
from judgelab_cli import app

runner = CliRunner()


def row(**over: object) -> dict:
    base = {
        "run_id": "r1",
        "task_id": "HumanEval/0",
        "candidate_id": "c0",
        "evaluator": "ruler-x",
        "protocol": "ruler",
        "judge": "x",
        "repeat": 0,
        "score": 0.5,
        "raw_score": 0.5,
        "status": "scored",
        "out_of_range": False,
        "reason": None,
        "explanation": "ok",
        "latency_s": 1.0,
        "slot": 0,
        "permutation": "0,1",
    }
    return {**base, **over}


def table(*rows: dict) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=columns(ScoresSchema))


def check(tmp_path: Path, frame: pl.DataFrame | None, suffix: str = ".parquet") -> tuple[int, str]:
    path = tmp_path / f"scores{suffix}"
    if frame is not None:
        frame.write_parquet(path) if suffix == ".parquet" else frame.write_csv(path)
    result = runner.invoke(app, ["validate", "scores", str(path)])
    return result.exit_code, result.output


def test_valid_table(tmp_path: Path) -> None:
    code, out = check(
        tmp_path,
        table(
            row(),
            row(
                candidate_id="c1",
                score=None,
                status="unscored",
                reason="judge reply error",
                raw_score=None,
            ),
        ),
    )
    assert code == 0, out
    assert "valid scores table (2 rows)" in out


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            row(score=1.5, raw_score=1.5),
            "column 'score', row 0: must be at most 1.0 (value: '1.5')",
        ),
        (row(score=-0.1), "column 'score', row 0: must be at least 0.0 (value: '-0.1')"),
        (row(score=math.nan), "column 'score', row 0: must be at most 1.0 (value: 'NaN')"),
        (row(evaluator=None), "column 'evaluator', row 0: must have a value (it is null)"),
        (row(run_id=""), "column 'run_id', row 0: must not be empty (value: '')"),
        (
            row(protocol="vibes"),
            "column 'protocol', row 0: must be one of ['rule', 'execution', 'ruler', 'rubric', "
            "'reward', 'planted'] (value: 'vibes')",
        ),
        (
            row(status="unscored", reason=None, score=None),
            "row 0: status 'scored' needs a score; 'unscored' needs a reason and no score (row: "
            '{"run_id":"r1","task_id":"HumanEval/0"',
        ),
    ],
)
def test_bad_rows_are_named(tmp_path: Path, bad: dict, message: str) -> None:
    code, out = check(tmp_path, table(bad))
    assert code != 0
    assert message in out, out


def test_missing_column(tmp_path: Path) -> None:
    code, out = check(tmp_path, table(row()).drop("score"))
    # the checks that read the column say nothing more: the one cause is named once
    assert code != 0 and out.strip().endswith("failed validation:\n  - missing column 'score'")


def test_unexpected_column_and_wrong_type_in_words() -> None:
    with pytest.raises(TableError) as err:
        validate(table(row()).with_columns(pl.lit(1).alias("extra")), ScoresSchema, "scores")
    assert str(err.value) == (
        "scores failed validation:\n  - unexpected column 'extra' (not part of this table)"
    )
    repeat_as_float = table(row()).with_columns(pl.col("repeat").cast(pl.Float64))
    with pytest.raises(TableError) as err:
        validate(repeat_as_float, ScoresSchema, "scores")
    assert "column 'repeat' has type Float64, expected Int64" in str(err.value)
    assert "dtype(" not in str(err.value)


def test_not_a_table(tmp_path: Path) -> None:
    (tmp_path / "scores.parquet").write_text("this is not parquet")
    code, out = check(tmp_path, None)
    assert code != 0 and "not a readable parquet/CSV table" in out
    code, out = check(tmp_path / "missing", None)
    assert code != 0 and "no such file" in out


def test_duplicate_key_rows_rejected() -> None:
    with pytest.raises(TableError, match="duplicate"):
        validate(table(row(), row()), ScoresSchema, "scores")


def test_tasks_schema_requires_tests_for_humaneval() -> None:
    frame = pl.DataFrame(
        [
            {
                "task_id": "HumanEval/0",
                "source": "humaneval",
                "request": "r",
                "prompt": "p",
                "entry_point": None,
                "test": None,
                "canonical_solution": None,
            }
        ],
        schema=columns(TasksSchema),
    )
    with pytest.raises(TableError, match="humaneval rows need entry_point and test"):
        validate(frame, TasksSchema, "tasks")


def test_console_script_exit_codes(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.parquet", tmp_path / "bad.parquet"
    table(row()).write_parquet(good)
    table(row(score=7.0)).write_parquet(bad)
    cmd = [sys.executable, "-m", "judgelab_cli", "validate", "scores"]
    assert subprocess.run([*cmd, str(good)], capture_output=True).returncode == 0
    proc = subprocess.run([*cmd, str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2 and "row 0" in proc.stderr  # bad input
