"""scores stage: every evaluator scores every group -> scores.parquet.

The stage's body is `judgelab.scores_stage.score_stage`, which `judgelab.score` runs too;
this flow reads the tables, fans the calls out as Prefect tasks under per-lane limits, and
has the body write the stage's files: the table, the cache counts and the structured-output
mode found for each ``auto`` judge endpoint (`structured_output.json`, which the report's
provenance names). A judge that scored none of its candidates, or more than
``scores.max_failure_share`` of whose calls failed (whatever their causes), fails the stage
once the files are written, with one line per such judge (`judgelab.scoring.failures`; exit
code 2 from the CLI). The pipeline catches that error and raises it again once the report,
whose first section names the same judges, is written."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prefect import flow, task

from judgelab.config import Settings, load_settings
from judgelab.flows.fanout import UNIT_TASK, Lanes, Unit, fan_out
from judgelab.flows.paths import ROLLOUTS, SCORES, TASKS
from judgelab.schemas import validate_file
from judgelab.scores_stage import FanOut, score_stage, write_files
from judgelab.scoring import GroupCall, ScoredGroup


@task(name="score-group", **UNIT_TASK)
def score_group_task(call: GroupCall) -> ScoredGroup:
    return call()


def as_tasks(settings: Settings) -> FanOut:
    """The `FanOut` that submits each call as a `score_group_task` in its model's lane."""
    lanes = Lanes(settings, settings.models_called("scores"))

    def run(calls: Sequence[GroupCall]) -> list[ScoredGroup]:
        units = [Unit(lanes.of(c.evaluator.spec.judge_model), {"call": c}, c.label) for c in calls]
        return fan_out(score_group_task, units, lanes.limits, stage="scores", unit="group")

    return run


@flow(name="judgelab-scores")
def scores_flow(
    params: Path = Path("params.yaml"),
    tasks: Path = TASKS,
    rollouts: Path = ROLLOUTS,
    out: Path = SCORES,
) -> Path:
    settings = load_settings(params)
    score_stage(
        settings,
        validate_file(tasks, "tasks"),
        validate_file(rollouts, "rollouts"),
        fan_out=as_tasks(settings),
        sink=write_files(out),
        raise_failures=True,
        where=str(out),
    )
    return out
