"""rollouts stage: k candidates per task from the policy -> rollouts.parquet."""

from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow, get_run_logger, task

from flows.fanout import UNIT_TASK, Lanes, Unit, fan_out
from flows.stages import ROLLOUTS, TASKS
from judgelab.cache import JsonCache
from judgelab.config import RolloutSettings, load_settings
from judgelab.io import write_parquet
from judgelab.models.endpoint import Endpoint
from judgelab.models.server import serve
from judgelab.paths import cache_dir
from judgelab.rollouts.generate import generate_group, rollouts_frame
from judgelab.schemas import validate_file
from judgelab.tasks import tasks_from_frame
from judgelab.verdicts import Task


@task(name="rollout-group", **UNIT_TASK)
def rollout_group_task(settings: RolloutSettings, task_: Task, endpoint: Endpoint) -> list[dict]:
    cache = JsonCache(cache_dir(), "completions")
    rows = generate_group(settings, task_, endpoint, cache)
    logging.getLogger("judgelab.flows.rollouts").info(
        "%s: %d samples (%d from cache)", task_.task_id, len(rows), cache.hits
    )
    return rows


@flow(name="judgelab-rollouts")
def rollouts_flow(
    params: Path = Path("params.yaml"), tasks: Path = TASKS, out: Path = ROLLOUTS
) -> Path:
    settings = load_settings(params)
    task_list = tasks_from_frame(validate_file(tasks, "tasks"))
    policy = settings.rollouts.policy
    lanes = Lanes(settings, [policy])
    with serve(settings, [policy]) as endpoints:
        units = [
            Unit(lanes.of(policy), {"settings": settings.rollouts, "task_": t,
                                    "endpoint": endpoints[policy]}, t.task_id)
            for t in task_list
        ]  # fmt: skip
        groups = fan_out(rollout_group_task, units, lanes.limits, stage="rollouts", unit="group")
    rows = [row for group in groups for row in group]
    frame = rollouts_frame(rows)
    write_parquet(out, frame)
    get_run_logger().info(
        "wrote %d candidates for %d tasks to %s", frame.height, len(task_list), out
    )
    return out
