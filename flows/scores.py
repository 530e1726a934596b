"""scores stage: every evaluator scores every group -> scores.parquet."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from prefect import flow, get_run_logger, task

from flows.stages import ROLLOUTS, SCORES, TASKS
from judgelab.cache import JsonCache
from judgelab.config import load_settings
from judgelab.evaluators.base import Evaluator
from judgelab.evaluators.registry import build_evaluator
from judgelab.io import write_parquet
from judgelab.models.server import serve
from judgelab.paths import cache_dir
from judgelab.progress import progress
from judgelab.rollouts.generate import candidates_by_task
from judgelab.schemas import validate_file
from judgelab.scoring import judge_names, run_id_for, score_group, scores_frame
from judgelab.tasks import tasks_from_frame
from judgelab.verdicts import Candidate, Task

log = logging.getLogger("judgelab.flows.scores")


@task(name="score-group", retries=2, retry_delay_seconds=5)
def score_group_task(
    run_id: str, evaluator: Evaluator, task_: Task, candidates: list[Candidate], repeat: int
) -> list[dict]:
    return score_group(run_id, evaluator, task_, candidates, repeat)


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
    groups = candidates_by_task(rollout_frame)
    run_id = run_id_for(settings, rollout_frame)
    cache = JsonCache(cache_dir(), "judge")
    rows: list[dict] = []
    todo = [t for t in task_list if t.task_id in groups]
    repeats = settings.scores.repeats
    total = sum(spec.repeats(repeats) for spec in settings.scores.evaluators) * len(todo)
    with (
        serve(settings, judge_names(settings)) as endpoints,
        progress("scores", total, unit="group") as advance,
    ):
        # Evaluator-major order: the embedded server swaps models as rarely as possible.
        for spec in settings.scores.evaluators:
            evaluator = build_evaluator(spec, endpoints, cache)
            start = time.monotonic()
            for repeat in range(spec.repeats(repeats)):
                for i, t in enumerate(todo, start=1):
                    rows += score_group_task(run_id, evaluator, t, groups[t.task_id], repeat)
                    advance(description=f"scores: {spec.name} {t.task_id} r{repeat}")
                    log.debug(
                        "%s: group %d/%d (%s, repeat %d) done, %.0fs so far",
                        spec.name,
                        i,
                        len(todo),
                        t.task_id,
                        repeat,
                        time.monotonic() - start,
                    )
    frame = scores_frame(rows)
    write_parquet(out, frame)
    logger.info("wrote %d score rows (run %s) to %s", frame.height, run_id, out)
    return out
