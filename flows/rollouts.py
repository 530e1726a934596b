"""rollouts stage: k candidates per task from the policy, or your own candidates file
(`rollouts.candidates`) -> rollouts.parquet."""

from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow, get_run_logger, task

from flows.fanout import UNIT_TASK, Lanes, Unit, fan_out
from flows.paths import ROLLOUTS, TASKS
from judgelab.cache import JsonCache
from judgelab.config import RolloutSettings, Settings, load_settings
from judgelab.io import write_parquet
from judgelab.models.endpoint import Endpoint
from judgelab.models.server import serve
from judgelab.paths import cache_dir, project_root
from judgelab.rollouts.generate import generate_group, rollouts_frame
from judgelab.rollouts.imported import import_candidates
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
    if settings.rollouts.candidates is not None:
        return _import(settings, task_list, out)
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


def _import(settings: Settings, task_list: list[Task], out: Path) -> Path:
    path = project_root() / settings.rollouts.candidates  # type: ignore[operator]
    rows = import_candidates(path, "rollouts.candidates", task_list, settings.rollouts)
    frame = rollouts_frame(rows)
    write_parquet(out, frame)
    logger = get_run_logger()
    missing = sorted({t.task_id for t in task_list} - set(frame["task_id"]))
    if missing:
        logger.warning(
            "%d task(s) have no candidates in %s and will not be scored: %s",
            len(missing), path, ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else ""),
        )  # fmt: skip
    logger.info("imported %d candidates for %d tasks from %s", frame.height,
                frame["task_id"].n_unique(), path)  # fmt: skip
    return out
