"""scores stage: every evaluator scores every group -> scores.parquet.

After the table is written: the structured-output mode found for each ``auto`` judge endpoint
goes to ``structured_output.json`` beside it (the report's provenance names it), and a judge
that scored none of its candidates, or more than ``scores.max_failure_share`` of whose calls
failed (whatever their causes), fails the stage with one line per such judge
(`judgelab.scoring.failures`; exit code 2 from the CLI). The pipeline catches that error
and raises it again once the report, whose first section names the same judges, is
written."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task

from judgelab.cache import JsonCache, summed
from judgelab.config import load_settings
from judgelab.evaluators.registry import build_evaluator
from judgelab.evaluators.transport.detect import detections
from judgelab.flows.fanout import UNIT_TASK, Lanes, Unit, fan_out
from judgelab.flows.paths import ROLLOUTS, SCORES, TASKS, calls_file
from judgelab.io import write_json, write_parquet
from judgelab.models.server import serve
from judgelab.paths import cache_dir
from judgelab.rollouts.generate import candidates_by_group
from judgelab.schemas import validate_file
from judgelab.scoring import GroupCall, ScoredGroup, run_id_for, scores_frame, stage_calls
from judgelab.scoring.failures import JudgeCallsFailed, failure_message, loud_failures
from judgelab.tasks import tasks_from_frame


@task(name="score-group", **UNIT_TASK)
def score_group_task(call: GroupCall) -> ScoredGroup:
    return call()


@flow(name="judgelab-scores")
def scores_flow(
    params: Path = Path("params.yaml"),
    tasks: Path = TASKS,
    rollouts: Path = ROLLOUTS,
    out: Path = SCORES,
) -> Path:
    settings = load_settings(params)
    logger = get_run_logger()
    task_list = tasks_from_frame(validate_file(tasks, "tasks"))
    rollout_frame = validate_file(rollouts, "rollouts")
    groups = candidates_by_group(rollout_frame, settings.scores.populations == "apart")
    run_id = run_id_for(settings, rollout_frame)
    cache = JsonCache(cache_dir(), "judge", settings.cache.seed_dirs())
    models = settings.models_called("scores")
    lanes = Lanes(settings, models)
    with serve(settings, models) as endpoints:
        evaluators = [
            build_evaluator(spec, endpoints, cache) for spec in settings.scores.evaluators
        ]
        calls = stage_calls(run_id, evaluators, task_list, groups, settings.scores.repeats)
        units = [Unit(lanes.of(c.evaluator.spec.judge_model), {"call": c}, c.label) for c in calls]
        results = fan_out(score_group_task, units, lanes.limits, stage="scores", unit="group")
    rows = [row for result in results for row in result.rows]
    frame = scores_frame(rows)
    write_parquet(out, frame)
    logger.info("wrote %d score rows (run %s) to %s", frame.height, run_id, out)
    write_json(calls_file(out), {"judge": summed(result.calls for result in results)})
    modes = detections()
    if modes:
        write_json(structured_output_path(out), modes)
    loud = loud_failures(frame, settings.scores.max_failure_share)
    for failure in loud:
        logger.error("judge failed: %s", failure.line())
    if loud:
        raise JudgeCallsFailed(failure_message(loud, str(out)))
    return out


def structured_output_path(scores: Path) -> Path:
    """Where the scores stage records each auto-detected judge endpoint's mode."""
    return Path(scores).with_name("structured_output.json")
