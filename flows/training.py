"""training stage: one LoRA policy per judge in train.judges, GRPO on that judge's rewards.

Writes data/training/<judge>/history.parquet (pandera-validated) and checkpoints/step-NNN
(adapter, optimiser, history so far). Interrupted runs resume from the newest checkpoint.
"""

from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow, get_run_logger, task

from flows.paths import TASKS, TRAINING
from judgelab.config import Settings, load_settings
from judgelab.progress import progress
from judgelab.schemas import validate_file
from judgelab.tasks import tasks_from_frame
from judgelab.training.run import train_judge


@task(name="train-judge", retries=1, retry_delay_seconds=5)
def train_judge_task(settings: Settings, judge: str, tasks: list, out: Path) -> Path:
    epochs = settings.train.epochs + 1  # rows 0..E: the base policy is measured too
    with progress(f"train {judge}", epochs, unit="epoch") as advance:

        def on_epoch(row: dict) -> None:
            held = row["heldout_pass_rate"]
            advance(description=f"train {judge}: epoch {row['epoch']}, held-out {held:.2f}")

        return train_judge(settings, judge, tasks, out / judge, on_epoch)


@flow(name="judgelab-training")
def training_flow(
    params: Path = Path("params.yaml"), tasks: Path = TASKS, out: Path = TRAINING
) -> Path:
    settings = load_settings(params)
    task_list = tasks_from_frame(validate_file(tasks, "tasks"))
    out.mkdir(parents=True, exist_ok=True)
    for judge in settings.train.judges:
        path = train_judge_task(settings, judge, task_list, out)
        logging.getLogger("judgelab.flows.training").info("%s: history in %s", judge, path)
    get_run_logger().info("trained %d policies under %s", len(settings.train.judges), out)
    return out
