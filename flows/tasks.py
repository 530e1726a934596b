"""tasks stage: HumanEval problems + your task files + AutoRL requests written by the policy
-> tasks.parquet."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task

from flows.stages import TASKS
from judgelab.cache import JsonCache
from judgelab.config import AutoRLSettings, HumanEvalSettings, load_settings
from judgelab.io import write_parquet
from judgelab.models.endpoint import Endpoint
from judgelab.models.server import serve
from judgelab.paths import cache_dir, project_root
from judgelab.tasks import tasks_frame
from judgelab.tasks.autorl import generate_autorl
from judgelab.tasks.files import load_task_files
from judgelab.tasks.humaneval import load_humaneval
from judgelab.verdicts import Task


@task(name="load-humaneval")
def load_humaneval_task(settings: HumanEvalSettings) -> list[Task]:
    return load_humaneval(settings)


@task(name="generate-autorl", retries=2, retry_delay_seconds=5)
def generate_autorl_task(settings: AutoRLSettings, endpoint: Endpoint) -> list[Task]:
    return generate_autorl(settings, endpoint, JsonCache(cache_dir(), "completions"))


@flow(name="judgelab-tasks")
def tasks_flow(params: Path = Path("params.yaml"), out: Path = TASKS) -> Path:
    settings = load_settings(params)
    logger = get_run_logger()
    tasks = load_humaneval_task(settings.tasks.humaneval)
    tasks += load_task_files(settings.tasks.files, project_root())
    autorl = settings.tasks.autorl
    if autorl.enabled and autorl.n:
        with serve(settings, [autorl.model]) as endpoints:
            tasks += generate_autorl_task(autorl, endpoints[autorl.model])
    frame = tasks_frame(tasks)
    write_parquet(out, frame)
    logger.info("wrote %d tasks to %s", frame.height, out)
    return out
