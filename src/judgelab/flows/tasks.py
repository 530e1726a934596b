"""tasks stage: the task sources (HumanEval, your task files, CodeI/O; judgelab.tasks.registry)
+ AutoRL requests written by the policy -> tasks.parquet, and what each source left out and
why -> dropped.json."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task

from judgelab.cache import JsonCache
from judgelab.config import AutoRLSettings, TasksSettings, load_settings
from judgelab.flows.paths import TASKS, TASKS_DROPPED
from judgelab.io import write_json, write_parquet
from judgelab.models.endpoint import Endpoint
from judgelab.models.server import serve
from judgelab.paths import cache_dir, project_root
from judgelab.rollouts.autorl import generate_autorl
from judgelab.tasks import tasks_frame
from judgelab.tasks.registry import load_sources
from judgelab.verdicts import Task


@task(name="load-task-sources")
def load_sources_task(settings: TasksSettings) -> tuple[list[Task], dict]:
    return load_sources(settings, project_root())


@task(name="generate-autorl", retries=2, retry_delay_seconds=5)
def generate_autorl_task(
    settings: AutoRLSettings, endpoint: Endpoint, seeds: tuple[Path, ...] = ()
) -> list[Task]:
    return generate_autorl(settings, endpoint, JsonCache(cache_dir(), "completions", seeds))


@flow(name="judgelab-tasks")
def tasks_flow(params: Path = Path("params.yaml"), out: Path = TASKS.parent) -> Path:
    """Writes `out`/tasks.parquet and `out`/dropped.json; returns the tasks table's path."""
    settings = load_settings(params)
    logger = get_run_logger()
    tasks, reports = load_sources_task(settings.tasks)
    autorl = settings.tasks.autorl
    if autorl.enabled and autorl.n:
        with serve(settings, [autorl.model]) as endpoints:
            seeds = tuple(settings.cache.seed_dirs())
            tasks += generate_autorl_task(autorl, endpoints[autorl.model], seeds)
    frame = tasks_frame(tasks)
    table = Path(out) / TASKS.name
    write_parquet(table, frame)
    write_json(Path(out) / TASKS_DROPPED.name, reports)
    for name, report in reports.items():
        logger.info("%s: kept %s of %s, dropped %s", name, report.get("kept"),
                    report.get("selected"), report.get("dropped"))  # fmt: skip
    logger.info("wrote %d tasks to %s", frame.height, table)
    return table
