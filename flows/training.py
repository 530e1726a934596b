"""training stage: one LoRA policy per judge in train.judges, GRPO on that judge's rewards,
all judges in lockstep (one batched decode per epoch serves every judge's policy).

Writes data/training/<judge>/history.parquet (pandera-validated) and checkpoints/step-NNN
(adapter, optimiser, history so far). Interrupted runs resume from the newest checkpoint.
"""

from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow, get_run_logger, task

from flows.stages import TASKS, TRAINING
from judgelab.config import Settings, load_settings
from judgelab.progress import progress
from judgelab.schemas import validate_file
from judgelab.tasks import tasks_from_frame
from judgelab.training.run import train_judges


@task(name="train-judges", retries=1, retry_delay_seconds=5)
def train_judges_task(settings: Settings, tasks: list, out: Path) -> dict[str, Path]:
    """Progress counts units of work: each epoch's sampling round, and per judge its scoring
    and its GRPO step (lines with elapsed time and ETA when stderr is not a terminal)."""
    judges = settings.train.judges
    with progress(f"train {', '.join(judges)}", None, unit="step") as advance:

        def on_progress(what: str, total: int) -> None:
            advance(description=f"train: {what}", total=total)

        return train_judges(settings, tasks, out, on_progress=on_progress)


@flow(name="judgelab-training")
def training_flow(
    params: Path = Path("params.yaml"), tasks: Path = TASKS, out: Path = TRAINING
) -> Path:
    settings = load_settings(params)
    task_list = tasks_from_frame(validate_file(tasks, "tasks"))
    out.mkdir(parents=True, exist_ok=True)
    if settings.train.judges:
        paths = train_judges_task(settings, task_list, out)
        for judge, path in paths.items():
            logging.getLogger("judgelab.flows.training").info("%s: history in %s", judge, path)
    get_run_logger().info("trained %d policies under %s", len(settings.train.judges), out)
    return out
