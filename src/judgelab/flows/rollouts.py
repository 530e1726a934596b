"""rollouts stage: k candidates per task from each writer (`rollouts.policy` or
`rollouts.policies`), with a file's candidates joined to them (`rollouts.extra_candidates`),
or your own candidates file in their place (`rollouts.candidates`) -> rollouts.parquet."""

from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow, get_run_logger, task

from judgelab.cache import JsonCache, summed
from judgelab.config import RolloutSettings, Settings, load_settings
from judgelab.flows.fanout import UNIT_TASK, Lanes, Unit, fan_out
from judgelab.flows.paths import ROLLOUTS, TASKS
from judgelab.io import write_json, write_parquet
from judgelab.models.endpoint import Endpoint
from judgelab.models.server import serve
from judgelab.paths import cache_dir, calls_file, project_root
from judgelab.rollouts.generate import distinct_writers, generate_group, rollouts_frame
from judgelab.rollouts.imported import import_candidates, join_candidates
from judgelab.schemas import validate_file
from judgelab.tasks import tasks_from_frame
from judgelab.verdicts import Task


@task(name="rollout-group", **UNIT_TASK)
def rollout_group_task(
    settings: RolloutSettings,
    task_: Task,
    endpoint: Endpoint,
    first_index: int = 0,
    seeds: tuple[Path, ...] = (),
) -> tuple[list[dict], dict[str, int]]:
    """The group's rows, and what the completions cache answered for them."""
    cache = JsonCache(cache_dir(), "completions", seeds)
    rows = generate_group(settings, task_, endpoint, cache, first_index)
    logging.getLogger("judgelab.flows.rollouts").info(
        "%s (%s): %d samples (%d from cache)", task_.task_id, endpoint.name, len(rows), cache.hits
    )
    return rows, cache.counts()


def group_units(
    settings: RolloutSettings,
    task_list: list[Task],
    endpoints: dict[str, Endpoint],
    lanes: Lanes,
    seeds: tuple[Path, ...] = (),
) -> list[Unit]:
    """One unit per (writer, task), writer-major: the embedded server then swaps models once
    per writer, not once per task. Each writer's samples take their own places in a group."""
    distinct_writers({w: endpoints[w] for w in settings.writers})
    return [
        Unit(lanes.of(w), {"settings": settings, "task_": t, "endpoint": endpoints[w],
                           "first_index": n * settings.k, "seeds": seeds}, t.task_id)
        for n, w in enumerate(settings.writers)
        for t in task_list
    ]  # fmt: skip


@flow(name="judgelab-rollouts")
def rollouts_flow(
    params: Path = Path("params.yaml"), tasks: Path = TASKS, out: Path = ROLLOUTS
) -> Path:
    settings = load_settings(params)
    task_list = tasks_from_frame(validate_file(tasks, "tasks"))
    if settings.rollouts.candidates is not None:
        return _import(settings, task_list, out)
    extra = _extra(settings, task_list)
    writers = settings.rollouts.writers
    lanes = Lanes(settings, writers)
    with serve(settings, writers) as endpoints:
        seeds = tuple(settings.cache.seed_dirs())
        units = group_units(settings.rollouts, task_list, endpoints, lanes, seeds)
        groups = fan_out(rollout_group_task, units, lanes.limits, stage="rollouts", unit="group")
    rows = [row for group, _ in groups for row in group] + extra
    frame = rollouts_frame(rows)
    write_parquet(out, frame)
    write_json(calls_file(out), {"completions": summed(c for _, c in groups)})
    get_run_logger().info(
        "wrote %d candidates for %d tasks to %s", frame.height, len(task_list), out
    )
    return out


def _extra(settings: Settings, task_list: list[Task]) -> list[dict]:
    """`rollouts.extra_candidates`' rows, read before anything is sampled, so a bad file
    fails first."""
    if settings.rollouts.extra_candidates is None:
        return []
    path = project_root() / settings.rollouts.extra_candidates
    first = len(settings.rollouts.writers) * settings.rollouts.k
    return join_candidates(path, "rollouts.extra_candidates", task_list, settings.rollouts, first)


def _import(settings: Settings, task_list: list[Task], out: Path) -> Path:
    path = project_root() / settings.rollouts.candidates  # type: ignore[operator]
    rows = import_candidates(path, "rollouts.candidates", task_list, settings.rollouts)
    frame = rollouts_frame(rows)
    write_parquet(out, frame)
    calls_file(out).unlink(missing_ok=True)  # no model was called
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
