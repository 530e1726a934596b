"""Execution truth: which candidates pass their tests, from the execution evaluator's rows of
the scores table (the fidelity figures that rest on it: `fidelity`).

Contract:
- Execution truth is the repeat-0 row of the evaluator whose protocol is "execution": a scored
  1.0 means the candidate passes its tests, any other scored value means it fails. A candidate
  whose execution row is unscored (a task without tests, a sandbox failure) or missing has no
  truth; it is left out of every truth metric and counted (`n_candidates_no_truth`).
- Each candidate's execution `outcome` (the scores table's column, written by the execution
  evaluator: passed, tests failed, forged, did not parse, no code, sandbox error, no tests;
  null without an execution row) is counted in `Truth.summary`. `Truth.parseable()` is the
  truth on parseable code only: a candidate without code or whose code did not parse has no
  truth there, so the same figures taken on it say how a judge does on code that ran (the
  analysis reports both).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from judgelab.verdicts import OUTCOMES, UNPARSEABLE

logger = logging.getLogger(__name__)

_TRUTH_COLUMNS = {
    "task_id": pl.String,
    "candidate_id": pl.String,
    "passed": pl.Boolean,
    "outcome": pl.String,
}
NO_ROW = "no_execution_row"  # the outcome count of candidates the execution evaluator lacks


def _known_tasks(table: pl.DataFrame) -> list[str]:
    known = table.filter(pl.col("passed").is_not_null())
    return sorted(known.get_column("task_id").unique().to_list())


@dataclass(frozen=True)
class Truth:
    """Execution truth per candidate. `table` has task_id, candidate_id, passed (null =
    unknown) and, from `execution_truth`, the execution outcome (null: no execution row)."""

    evaluator: str | None
    table: pl.DataFrame
    tasks: list[str] = field(default_factory=list)  # sorted tasks with at least one known result
    reason: str | None = None

    def _counts(self) -> dict[str, Any]:
        known = self.table.filter(pl.col("passed").is_not_null())
        n_pass = int(known.get_column("passed").sum()) if known.height else 0
        return {
            "n_candidates_with_truth": known.height,
            "n_passing": n_pass,
            "n_failing": known.height - n_pass,
            "n_tasks_with_truth": len(self.tasks),
            "reason": self.reason,
        }

    def summary(self) -> dict[str, Any]:
        """Counts for metrics.json; with outcomes, theirs and the parseable truth's too."""
        counts = self._counts()
        out = {
            "evaluator": self.evaluator,
            "n_candidates": self.table.height,
            "n_candidates_no_truth": self.table.height - counts["n_candidates_with_truth"],
            **counts,
        }
        if "outcome" in self.table.columns:
            seen = self.table.get_column("outcome").fill_null(NO_ROW).to_list()
            out["outcomes"] = {name: seen.count(name) for name in (*OUTCOMES, NO_ROW)}
            out["parseable"] = self.parseable()._counts()
        return out

    def parseable(self) -> Truth:
        """The truth on parseable code only: candidates whose outcome is UNPARSEABLE (no code,
        code that does not parse) lose theirs, as if they had none."""
        if "outcome" not in self.table.columns:
            raise ValueError("parseable() needs the execution outcome (execution_truth's table)")
        unparseable = pl.col("outcome").is_in(UNPARSEABLE).fill_null(False)
        table = self.table.with_columns(
            pl.when(unparseable).then(None).otherwise(pl.col("passed")).alias("passed")
        )
        tasks = _known_tasks(table)
        reason = self.reason
        if reason is None and not tasks:
            reason = "no candidate with parseable code has a test result"
        return Truth(self.evaluator, table, tasks, reason)


def execution_truth(scores: pl.DataFrame, evaluator: str | None = None) -> Truth:
    """Pass/fail per candidate from the execution evaluator's repeat-0 row.

    Every candidate in `scores` appears in the table; those without a scored execution row have
    passed = null. With several execution evaluators and none named, the first by name is used.
    """
    candidates = (
        scores.select("task_id", "candidate_id").unique().sort("task_id", "candidate_id")
        if scores.height
        else pl.DataFrame(schema={"task_id": pl.String, "candidate_id": pl.String})
    )
    execs = (
        sorted(
            scores.filter(pl.col("protocol") == "execution")
            .get_column("evaluator")
            .unique()
            .to_list()
        )
        if scores.height
        else []
    )
    if evaluator is None:
        if not execs:
            table = candidates.with_columns(
                pl.lit(None, dtype=pl.Boolean).alias("passed"),
                pl.lit(None, dtype=pl.String).alias("outcome"),
            )
            return Truth(None, table, [], "no evaluator with protocol 'execution' in the scores")
        if len(execs) > 1:
            logger.warning("several execution evaluators %s; using %s as truth", execs, execs[0])
        evaluator = execs[0]
    rows = scores.filter((pl.col("evaluator") == evaluator) & (pl.col("repeat") == 0))
    rows = rows.select(
        "candidate_id",
        pl.when(pl.col("status") == "scored").then(pl.col("score") >= 1.0).alias("passed"),
        "outcome",
    )
    table = candidates.join(rows, on="candidate_id", how="left").select(
        [pl.col(c).cast(t) for c, t in _TRUTH_COLUMNS.items()]
    )
    tasks = _known_tasks(table)
    reason = None if tasks else f"execution evaluator {evaluator!r} scored no candidate"
    return Truth(evaluator, table, tasks, reason)
