"""The scores stage's body: one path from the tasks and rollouts tables to the scores table,
which the scores flow (`judgelab scores`) and the Python API's `judgelab.score` both run.

`score_stage` validates the tables, groups the candidates (`scores.populations`), serves the
models the stage calls, builds every evaluator of `scores.evaluators`, lists the stage's calls
(`stage_calls`: evaluator-major) and has a *fan-out* make them, then assembles the table and
applies the failure budget (`scores.max_failure_share`). Two things differ between callers,
and they are its parameters:

- the fan-out: `in_process` makes the calls one at a time in this process (the API); the
  flow passes one that submits each call as a Prefect task under per-lane limits
  (`judgelab.flows.fanout`). A fan-out returns each call's result in call order, whatever
  its concurrency, so both give the same table;
- the sink: what becomes of the result. None keeps the tables in memory (the API);
  `write_files(out)` writes the stage's files (the flow): the table, the cache counts beside
  it (`judgelab.paths.calls_file`) and the structured-output mode found for each ``auto``
  judge endpoint (`judgelab.paths.structured_output_path`, which the report's provenance
  names).

A judge that scored none of its candidates, or whose calls failed for one cause more often than
the budget, is logged, one line each; with `raise_failures` (the flow) the stage then raises
`JudgeCallsFailed` once the sink has written (exit code 2 from the CLI), else the caller reads
them in `ScoresRun.failures`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from judgelab.cache import JsonCache, summed
from judgelab.config import Settings
from judgelab.evaluators.registry import build_evaluator
from judgelab.evaluators.transport.detect import detections
from judgelab.io import write_json, write_parquet
from judgelab.models.server import serve
from judgelab.paths import cache_dir, calls_file, structured_output_path
from judgelab.rollouts.generate import candidates_by_group
from judgelab.schemas import RolloutsSchema, TasksSchema, validate
from judgelab.scoring.failures import (
    JudgeCallsFailed,
    JudgeFailures,
    failure_message,
    loud_failures,
)
from judgelab.scoring.score import GroupCall, ScoredGroup, run_id_for, scores_frame, stage_calls
from judgelab.tasks import tasks_from_frame

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoresRun:
    """What one run of the scores stage made: the table (`ScoresSchema`), its run id, what the
    judge cache answered (`JsonCache.counts()`'s form), each ``auto`` judge endpoint's mode,
    and the judges whose calls failed beyond the budget."""

    frame: pl.DataFrame
    run_id: str
    calls: dict[str, int]
    modes: dict[str, dict[str, str]]
    failures: list[JudgeFailures]


# Makes every call; returns each call's result in call order; a call's error is raised.
FanOut = Callable[[Sequence[GroupCall]], list[ScoredGroup]]
Sink = Callable[[ScoresRun], None]


def in_process(calls: Sequence[GroupCall]) -> list[ScoredGroup]:
    """The `FanOut` that makes one call at a time, in order, in this process."""
    return [call() for call in calls]


def write_files(out: Path) -> Sink:
    """The `Sink` that writes the scores stage's files: the table at `out`, the cache counts
    and (when any endpoint was auto-detected) the structured-output modes beside it."""

    def write(run: ScoresRun) -> None:
        write_parquet(out, run.frame)
        log.info("wrote %d score rows (run %s) to %s", run.frame.height, run.run_id, out)
        write_json(calls_file(out), {"judge": run.calls})
        if run.modes:
            write_json(structured_output_path(out), run.modes)

    return write


def score_stage(
    settings: Settings,
    tasks: pl.DataFrame,
    rollouts: pl.DataFrame,
    *,
    fan_out: FanOut = in_process,
    sink: Sink | None = None,
    raise_failures: bool = False,
    where: str = "the scores table",
) -> ScoresRun:
    """Every evaluator of `settings.scores.evaluators` over every group of `rollouts`
    (module docstring): one row per (task, candidate, evaluator, repeat). `where` names the
    table in the failure message."""
    task_list = tasks_from_frame(validate(tasks, TasksSchema, "tasks table"))
    rollouts = validate(rollouts, RolloutsSchema, "rollouts table")
    groups = candidates_by_group(rollouts, settings.scores.populations == "apart")
    run_id = run_id_for(settings, rollouts)
    cache = JsonCache(cache_dir(), "judge", settings.cache.seed_dirs())
    with serve(settings, settings.models_called("scores")) as endpoints:
        evaluators = [
            build_evaluator(spec, endpoints, cache) for spec in settings.scores.evaluators
        ]
        calls = stage_calls(run_id, evaluators, task_list, groups, settings.scores.repeats)
        results = fan_out(calls)
    frame = scores_frame([row for result in results for row in result.rows])
    run = ScoresRun(
        frame=frame,
        run_id=run_id,
        calls=summed(result.calls for result in results),
        modes=detections(),
        failures=loud_failures(frame, settings.scores.max_failure_share),
    )
    for failure in run.failures:
        log.error("judge failed: %s", failure.line())
    if sink is not None:
        sink(run)
    if raise_failures and run.failures:
        raise JudgeCallsFailed(failure_message(run.failures, where))
    return run
