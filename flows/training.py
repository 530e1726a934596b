"""training stage: one LoRA policy per judge in train.judges (and per seed in train.seeds),
GRPO on that judge's rewards, all policies in lockstep (one batched decode per epoch serves
every policy).

Writes data/training/<judge>/history.parquet (pandera-validated), samples.parquet and
checkpoints/step-NNN (adapter, optimiser, history so far); with train.seeds, the same under
data/training/<judge>/seed-<s>/ (judgelab.training.layout). Interrupted runs resume each
policy from its newest checkpoint.
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
    """Progress counts units of work: each epoch's sampling round, and per policy its scoring
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
        for run, path in paths.items():
            logging.getLogger("judgelab.flows.training").info("%s: history in %s", run, path)
    policies = len(settings.train.judges) * max(1, len(settings.train.seeds))
    get_run_logger().info("trained %d policies under %s", policies, out)
    return out
