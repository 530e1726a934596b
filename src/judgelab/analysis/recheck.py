"""Execution truth re-checked: an earlier run's execution verdicts against this run's.

Every truth figure rests on the execution evaluator's verdicts, so when the harness changes
(the sandbox, the forgery checks) an audit says whether the verdicts it had already made still
stand. `analysis.truth_baseline` names an earlier run's verdicts: a scores table (its
execution rows are used) or a table of `candidate_id`, `score` and `outcome`. Candidates are
matched by `candidate_id` (content-addressed: the same task and code give the same id), and a
verdict has changed when its score or its outcome differs (a null score, where the task has no
tests or the sandbox failed, equals only a null score).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from judgelab.errors import ConfigError

FIELD = "analysis.truth_baseline"
COLUMNS = ("candidate_id", "score", "outcome")


def read_baseline(path: Path) -> pl.DataFrame:
    """The baseline's verdicts, one row per candidate: candidate_id, task_id (when the file
    has it), score, outcome. Errors name the field, the file and what is wrong with it."""
    if not path.is_file():
        raise ConfigError(f"{FIELD}: {path} does not exist")
    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # polars raises several kinds for a file that is not parquet
        raise ConfigError(f"{FIELD}: {path} is not a parquet table ({exc})") from exc
    if missing := [c for c in COLUMNS if c not in frame.columns]:
        raise ConfigError(f"{FIELD}: {path} has no column {', '.join(missing)}")
    if "protocol" in frame.columns:  # a scores table: its execution rows
        frame = frame.filter(pl.col("protocol") == "execution")
    if not frame.height:
        raise ConfigError(f"{FIELD}: {path} has no execution verdicts")
    if nulls := frame["outcome"].null_count():  # a score may be null (no tests, a sandbox error)
        first = frame.filter(pl.col("outcome").is_null())["candidate_id"][0]
        raise ConfigError(
            f"{FIELD}: {path}: the execution verdict of candidate {first} has no outcome "
            f"({nulls} of {frame.height} execution rows have none)"
        )
    keep = [c for c in ("candidate_id", "task_id", "score", "outcome") if c in frame.columns]
    frame = frame.select(keep).unique(maintain_order=True)
    repeated = frame.group_by("candidate_id").len().filter(pl.col("len") > 1)
    if repeated.height:
        first = repeated["candidate_id"][0]
        raise ConfigError(
            f"{FIELD}: {path} gives candidate {first} more than one verdict "
            f"({repeated.height} candidates do)"
        )
    return frame


def truth_recheck(baseline: pl.DataFrame, scores: pl.DataFrame, source: str) -> dict[str, Any]:
    """How many of `baseline`'s verdicts (`read_baseline`) this scores table's execution rows
    changed: compared (candidates in both), changed (score or outcome differs), absent (in
    the baseline, not scored by execution here), and each change. Counts are of candidates:
    where this run's repeats disagree about one, it has changed if any repeat's verdict differs,
    and each differing verdict is listed."""
    now = (
        scores.filter(pl.col("protocol") == "execution")
        .select(
            "candidate_id",
            pl.col("score").alias("now_score"),
            pl.col("outcome").alias("now_outcome"),
        )
        .unique(maintain_order=True)
    )
    joined = baseline.join(now, on="candidate_id", how="inner", maintain_order="left")
    changed = joined.filter(  # a null score (no tests, a sandbox error) equals only null
        pl.col("score").ne_missing(pl.col("now_score"))
        | pl.col("outcome").ne_missing(pl.col("now_outcome"))
    )
    compared = joined["candidate_id"].n_unique()
    return {
        "baseline": source,
        "n_baseline": baseline.height,
        "n_compared": compared,
        "n_changed": changed["candidate_id"].n_unique(),
        "n_absent": baseline.height - compared,
        "changed": [
            {
                "candidate_id": row["candidate_id"],
                "task_id": row.get("task_id"),
                "was": {"score": row["score"], "outcome": row["outcome"]},
                "now": {"score": row["now_score"], "outcome": row["now_outcome"]},
            }
            for row in changed.iter_rows(named=True)
        ],
    }
