"""training stage: one LoRA policy per judge in train.rewards (and per seed in train.seeds),
GRPO on that judge's rewards, all policies in lockstep (one batched decode per epoch serves
every policy).

Each epoch's judge and test calls, for every judge at once, fan out in lanes like the scores
stage's groups (judgelab.flows.fanout): judges on different endpoints side by side, an
endpoint up to its max_concurrency, the embedded server one call at a time in a serial run's
order, the sandbox one group per core. The epoch loop itself holds the policy in this process,
so it runs in one task; its calls are tasks of their own, submitted from it to the flow's task
runner.

Writes data/training/<judge>/history.parquet (pandera-validated), samples.parquet and
checkpoints/step-NNN (adapter, optimiser, history so far); with train.seeds, the same under
data/training/<judge>/seed-<s>/ (judgelab.training.layout). Interrupted runs resume each
policy from its newest checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from prefect import flow, get_run_logger, task

from judgelab.config import Settings, load_settings
from judgelab.flows.fanout import UNIT_TASK, Lanes, Unit, run_units
from judgelab.flows.paths import TASKS, TRAINING
from judgelab.progress import progress
from judgelab.schemas import validate_file
from judgelab.scoring import GroupCall, ScoredGroup, Scorer
from judgelab.tasks import tasks_from_frame
from judgelab.training.run import train_rewards


@task(name="train-score-group", **UNIT_TASK)
def score_call_task(call: GroupCall) -> ScoredGroup:
    return call()


def fanned_out(settings: Settings, on_done: Callable[[str], None] = lambda label: None) -> Scorer:
    """The `Scorer` that makes a training epoch's calls as tasks, all at once up to each
    lane's limit; `on_done(label)` after each call that succeeded. Call it in a flow run."""
    lanes = Lanes(settings, settings.models_called("training"))

    def score(calls: Sequence[GroupCall]) -> list[ScoredGroup | Exception]:
        units = [
            Unit(lanes.of(c.evaluator.spec.judge_model), {"call": c},
                 f"{c.evaluator.name} {c.task.task_id}")
            for c in calls
        ]  # fmt: skip
        # one judge's failure costs no other judge its epoch: each call's error comes back
        return run_units(
            score_call_task, units, lanes.limits, lambda u: on_done(u.label),
            return_exceptions=True,
        )  # fmt: skip

    return score


@task(name="train-rewards", retries=1, retry_delay_seconds=5)
def train_rewards_task(settings: Settings, tasks: list, out: Path) -> dict[str, Path]:
    """Progress counts units of work: each epoch's sampling round, and per policy its scoring
    and its GRPO step (lines with elapsed time and ETA when stderr is not a terminal)."""
    judges = settings.train.rewards
    with progress(f"train {', '.join(judges)}", None, unit="step") as advance:

        def on_progress(what: str, total: int) -> None:
            advance(description=f"train: {what}", total=total)

        def on_call(label: str) -> None:
            advance(0, description=f"train: scored {label}")

        return train_rewards(
            settings, tasks, out, on_progress=on_progress, scorer=fanned_out(settings, on_call)
        )


@flow(name="judgelab-training")
def training_flow(
    params: Path = Path("params.yaml"), tasks: Path = TASKS, out: Path = TRAINING
) -> Path:
    settings = load_settings(params)
    task_list = tasks_from_frame(validate_file(tasks, "tasks"))
    out.mkdir(parents=True, exist_ok=True)
    if settings.train.rewards:
        paths = train_rewards_task(settings, task_list, out)
        for run, path in paths.items():
            logging.getLogger("judgelab.flows.training").info("%s: history in %s", run, path)
    policies = len(settings.train.rewards) * max(1, len(settings.train.seeds))
    get_run_logger().info("trained %d policies under %s", policies, out)
    return out
